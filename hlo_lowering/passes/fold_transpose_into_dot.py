"""fold-transpose-into-dot: transpose(dot_general(a, b)) → one dot_general that produces the
transposed layout itself ((A·B)ᵀ = Bᵀ·Aᵀ).

Why: a transpose whose consumers are elementwise ops (JAX's weight gradients,
`transpose(dot_general(dy, x))` feeding the SGD update) cannot be a view and lowers to a GpSimd
copy through HBM, which costs far more than the matmul. A dot_general's result is laid out as
[batch dims (lhs batching order), lhs free dims, rhs free dims], so a permutation that keeps the
batch dims leading and puts the two free-dim groups back to back (either order, each group in
its own order) is itself a dot_general result layout: reorder the batching dims of both
operands together, and swap the operands (with their contracting dims and precisions) when the
rhs free dims come first.

Requires: calls inlined; dead ops removed (canonicalize), so a dot's users are the ops that
need it.
Ensures: every stablehlo.transpose of a dot_general result whose permutation is foldable, and
whose dot has no other users than such transposes in the same block, is gone: each distinct
permutation gets one dot_general (the dot's location and attributes, operands and dimension
numbers rearranged) whose result is the transpose's result value; the original dot is removed.
A dot that has another user needing its own layout is left as it is (computing it twice would
trade a copy for a second matmul), as are permutations that move a batch dim out of the lead
or reorder dims inside a free-dim group (that would need a transposed operand). A batch-dim
reorder is folded only when the operand copies it causes (normalize-dot-general copies an
operand whose non-unit batch dims are out of order) hold no more elements than the result.
Chains (transpose of a folded transpose) fold to one dot. Transposes feeding a dot_general are
not touched: lowering reads them as views.
Runs after: canonicalize; before normalize-dot-general (which then puts the new dot in
batch-matmul form).
"""

from __future__ import annotations

from hlo_lowering.ir import Block, Module, Op, TensorType, Value, replace_uses, walk_ops


def _free_dims(rank: int, batching: list[int], contracting: list[int]) -> list[int]:
  return [d for d in range(rank) if d not in batching and d not in contracting]


def _batch_copy_elements(operand: Value, batching: list[int]) -> int:
  """Elements normalize-dot-general copies to bring `operand`'s batch dims into `batching`
  order: merging them into one batch dim is a view only when the non-unit ones ascend."""
  non_unit = [d for d in batching if operand.shape[d] != 1]
  return 0 if non_unit == sorted(non_unit) else operand.type.size


def folded_dot(dot: Op, permutation: list[int], result_type: TensorType) -> Op | None:
  """A dot_general whose result is `transpose(dot, permutation)`, or None when the permutation
  is not a dot_general result layout of the same operands, or when reordering the batch dims
  would make normalize-dot-general copy more operand elements than the transpose copies."""
  dims = dot.attrs["dot_dimension_numbers"]
  lhs, rhs = dot.operands
  lb, lc = dims["lhs_batching_dimensions"], dims["lhs_contracting_dimensions"]
  rb, rc = dims["rhs_batching_dimensions"], dims["rhs_contracting_dimensions"]
  nb = len(lb)
  nl = len(_free_dims(lhs.type.rank, lb, lc))
  nr = len(_free_dims(rhs.type.rank, rb, rc))
  if sorted(permutation[:nb]) != list(range(nb)):
    return None
  lhs_free = list(range(nb, nb + nl))
  rhs_free = list(range(nb + nl, nb + nl + nr))
  tail = list(permutation[nb:])
  if tail == lhs_free + rhs_free:
    swap = False
  elif tail == rhs_free + lhs_free:
    swap = True
  else:
    return None
  # A dot algorithm names lhs and rhs precision types in an opaque string: not swapped here.
  if swap and "algorithm" in dot.attrs:
    return None
  new_lb = [lb[i] for i in permutation[:nb]]
  new_rb = [rb[i] for i in permutation[:nb]]
  copied_before = (_batch_copy_elements(lhs, lb) + _batch_copy_elements(rhs, rb)
                   + dot.result.type.size)
  if _batch_copy_elements(lhs, new_lb) + _batch_copy_elements(rhs, new_rb) > copied_before:
    return None
  lb, rb = new_lb, new_rb
  attrs = dict(dot.attrs)
  if swap:
    lhs, rhs, lb, rb, lc, rc = rhs, lhs, rb, lb, rc, lc
    if "precision_config" in attrs:
      attrs["precision_config"] = list(reversed(attrs["precision_config"]))
  attrs["dot_dimension_numbers"] = {
      "lhs_batching_dimensions": lb, "rhs_batching_dimensions": rb,
      "lhs_contracting_dimensions": list(lc), "rhs_contracting_dimensions": list(rc)}
  return Op("stablehlo.dot_general", [lhs, rhs], [result_type], attrs, loc=dot.loc)


def _users(block: Block) -> dict[Value, list[tuple[Op, bool]]]:
  """For each value read in `block`: (user, whether the user is an op of `block` itself)."""
  users: dict[Value, list[tuple[Op, bool]]] = {}
  for op in block.ops:
    for v in op.operands:
      users.setdefault(v, []).append((op, True))
    for region in op.regions:
      for inner in walk_ops(region.block):
        for v in inner.operands:
          users.setdefault(v, []).append((inner, False))
  return users


def _fold_once(block: Block) -> bool:
  """Folds every foldable dot of `block` once; whether anything changed."""
  users = _users(block)
  replacements: dict[int, list[Op]] = {}  # id(dot) -> the dots that replace it
  removed: set[int] = set()
  aliases: dict[Value, Value] = {}
  for dot in block.ops:
    if dot.name != "stablehlo.dot_general":
      continue
    dot_users = users.get(dot.result, [])
    if not dot_users or not all(top and user.name == "stablehlo.transpose"
                                for user, top in dot_users):
      continue
    by_permutation: dict[tuple[int, ...], Op] = {}
    folds: list[tuple[Op, Op]] = []
    for transpose, _ in dot_users:
      permutation = tuple(transpose.attrs["permutation"])
      new_dot = by_permutation.get(permutation)
      if new_dot is None:
        new_dot = folded_dot(dot, list(permutation), transpose.result.type)
        if new_dot is None:
          break
        # The new dot defines the transpose's value, so its users need no rewriting.
        new_dot.results = [transpose.result]
        by_permutation[permutation] = new_dot
      folds.append((transpose, new_dot))
    else:
      replacements[id(dot)] = list(by_permutation.values())
      removed.update(id(transpose) for transpose, _ in folds)
      # A second transpose with the same permutation reads the first one's dot.
      aliases.update((t.result, d.result) for t, d in folds if t.result is not d.result)
  if not replacements:
    return False
  new_ops: list[Op] = []
  for op in block.ops:
    if id(op) in replacements:
      new_ops.extend(replacements[id(op)])
    elif id(op) not in removed:
      new_ops.append(op)
  block.ops = new_ops
  replace_uses(block, aliases)
  return True


def _fold_block(block: Block) -> None:
  for op in block.ops:
    for region in op.regions:
      _fold_block(region.block)
  # A fold can make the next transpose of a chain foldable: repeat until nothing changes.
  while _fold_once(block):
    pass


def run(module: Module) -> None:
  for function in module.functions.values():
    _fold_block(function.body)
