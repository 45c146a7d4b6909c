"""IR invariants checked after each pass when TRN_VERIFY_IR=1 (tinygrad's SPEC=1 habit).

After every pass: every operand is defined before use (in its block or an enclosing one), every
value is defined once, the entry function's returned values match its result types, and the
elementwise ops lowering relies on have operands and results of one shape.
After a pass, what that pass's docstring Ensures, where it can be checked on the IR alone:
inline-calls (no func.call or stablehlo.composite, only the entry function), decompose-complex
(no complex64 value, regions and bodies included),
strip-single-device-sharding, decompose-batch-norm, decompose-reduce-precision,
decompose-rng-bit-generator, expand-total-order-compare and simplify-unit-reduce (none of the ops they remove is left
where they look: the functions and their while/case/if regions), cancel-transposes (no
transpose that only reshapes an earlier value), normalize-dot-general (every
dot_general in batch-matmul form), pair-matmuls (each trn.matmul_pair's region the transpose and
the two matmuls of its arguments), fold-product-into-reduce (no add-reduce of a multiply only it
reads), check-supported (no float64 value, a registered rule for every
op codegen lowers one by one).
"""

from __future__ import annotations

from typing import Callable, Iterator

from hlo_lowering.ir import Block, Module, Op, Value, control_flow_blocks, walk_ops
from hlo_lowering.lowering import registry
from hlo_lowering.passes.cancel_transposes import cancellable
from hlo_lowering.passes.check_supported import lowered_ops, uses_float64
from hlo_lowering.passes.decompose_approx_top_k import TARGET as APPROX_TOP_K
from hlo_lowering.passes.eliminate_common_subexpressions import repeated
from hlo_lowering.passes.expand_truth_reduce import truth_combine
from hlo_lowering.passes.fold_convert_into_reduce import unfolded
from hlo_lowering.passes.fold_product_into_reduce import unfolded as unfolded_product
from hlo_lowering.passes.fuse_attention import matmul_placed
from hlo_lowering.passes.fuse_rows import ROW_FUSION, holds_only_members
from hlo_lowering.passes.narrow_float64 import float64_boundary, narrows_every_float64
from hlo_lowering.passes.normalize_dot_general import is_batch_matmul
from hlo_lowering.passes.pair_matmuls import PAIR, pair_formed
from hlo_lowering.passes.simplify_unit_reduce import is_unit_reduce
from hlo_lowering.program import DType

_ELEMENTWISE_SAME_SHAPE = frozenset({
    "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
    "stablehlo.maximum", "stablehlo.minimum", "stablehlo.and", "stablehlo.or", "stablehlo.xor",
    "stablehlo.power", "stablehlo.remainder", "stablehlo.compare", "stablehlo.atan2",
})


class IRVerificationError(AssertionError):
  """The IR broke an invariant: a compiler bug in the pass named in the message."""


def _check_op(op: Op, where: str) -> None:
  if op.name in _ELEMENTWISE_SAME_SHAPE:
    shapes = {v.shape for v in op.operands} | {r.shape for r in op.results}
    if len(shapes) != 1:
      raise IRVerificationError(f"{where}: {op.describe()} mixes shapes {sorted(shapes)}")


def _check_block(block: Block, defined: set[Value], where: str) -> None:
  for arg in block.args:
    if arg in defined:
      raise IRVerificationError(f"{where}: block argument {arg} defined twice")
    defined.add(arg)
  for op in block.ops:
    for v in op.operands:
      if v not in defined:
        raise IRVerificationError(f"{where}: {op.describe()} uses {v} before its definition")
    for region in op.regions:
      _check_block(region.block, set(defined), where)
    for r in op.results:
      if r in defined:
        raise IRVerificationError(f"{where}: {op.describe()} redefines {r}")
      defined.add(r)
    _check_op(op, where)


# --- what each pass ensures: None, or what breaks it -------------------------------------------

def _control_flow_ops(module: Module) -> Iterator[Op]:
  for function in module.functions.values():
    for block in control_flow_blocks(function.body):
      yield from block.ops


def _all_ops(module: Module) -> Iterator[Op]:
  for function in module.functions.values():
    yield from walk_ops(function.body)


def _first(ops: Iterator[Op], breaks: Callable[[Op], bool], why: str) -> str | None:
  op = next((op for op in ops if breaks(op)), None)
  return None if op is None else f"{op.describe()} {why}"


def _inlined(module: Module) -> str | None:
  if list(module.functions) != [module.main.name]:
    return f"functions {sorted(module.functions)} remain besides the entry function"
  return _first(_all_ops(module), lambda op: op.name in ("func.call", "stablehlo.composite"),
                "is not inlined")


def _none_left(names: frozenset[str], why: str) -> Callable[[Module], str | None]:
  return lambda module: _first(_control_flow_ops(module), lambda op: op.name in names, why)


def _no_reduce_precision(module: Module) -> str | None:
  return _first(_control_flow_ops(module),
                lambda op: (op.name == "stablehlo.reduce_precision"
                            and op.operands[0].dtype in (DType.F32, DType.BF16, DType.F16)),
                "is not decomposed")


def _no_total_order_compare(module: Module) -> str | None:
  return _first(_control_flow_ops(module),
                lambda op: (op.name == "stablehlo.compare"
                            and op.attrs.get("compare_type") == "TOTALORDER"),
                "is still a TOTALORDER compare")


def _no_complex(module: Module) -> str | None:
  main = module.main
  if any(a.dtype == DType.C64 for a in main.args):
    return f"@{main.name} still takes a complex64 argument"
  return _first(_all_ops(module),
                lambda op: any(v.dtype == DType.C64 for v in (
                    *op.operands, *op.results, *(a for r in op.regions for a in r.block.args))),
                "still has a complex64 value")


def _no_four_bit(module: Module) -> str | None:
  four_bit = (DType.S4, DType.U4)
  for function in module.functions.values():
    if any(a.dtype in four_bit for a in function.args) or any(
        t.dtype in four_bit for t in function.result_types):
      return f"@{function.name} still takes or returns a 4-bit value"
  return _first(_all_ops(module),
                lambda op: any(v.dtype in four_bit for v in (
                    *op.operands, *op.results, *(a for r in op.regions for a in r.block.args))),
                "still has a 4-bit value")


def _batch_matmuls(module: Module) -> str | None:
  return _first(_all_ops(module),
                lambda op: op.name == "stablehlo.dot_general" and not is_batch_matmul(op),
                "is not in batch-matmul form")


def _float64_narrowed(module: Module) -> str | None:
  if module.source_format != "hlo" and not narrows_every_float64(module):
    return None
  kept = float64_boundary(module)
  return _first(walk_ops(module.main.body), lambda op: uses_float64(op, kept), "uses float64")


def _transposes_cancelled(module: Module) -> str | None:
  for function in module.functions.values():
    for block in control_flow_blocks(function.body):
      for _, transpose, _ in cancellable(block):
        return f"{transpose.describe()} only reshapes an earlier value"
  return None


def _supported(module: Module) -> str | None:
  kept = float64_boundary(module)
  return (_first(walk_ops(module.main.body), lambda op: uses_float64(op, kept), "uses float64")
          or _first(iter(lowered_ops(module.main.body)),
                    lambda op: not registry.rules_for(op.name), "has no registered lowering rule"))


_ENSURES: dict[str, Callable[[Module], str | None]] = {
    "decompose-approx-top-k": lambda module: _first(
        (op for f in module.functions.values() for op in walk_ops(f.body)),
        lambda op: op.name == "stablehlo.custom_call"
        and op.attrs.get("call_target_name") == APPROX_TOP_K, "is not decomposed"),
    "inline-calls": _inlined,
    "narrow-float64": _float64_narrowed,
    "widen-int4": _no_four_bit,
    "expand-truth-reduce": lambda module: _first(
        _all_ops(module), lambda op: truth_combine(op) is not None and op.operands[1] in {
            o.result for o in _all_ops(module) if o.name == "stablehlo.constant"
            and o.attrs["value"].size == 1 and o.attrs["value"].flat[0] in (0, 1)},
        "is a truth reduce with a constant init"),
    "stack-tuple-all-to-all": _none_left(frozenset({"mhlo.all_to_all"}), "is not stacked"),
    "strip-single-device-sharding": _none_left(
        frozenset({"sdy.sharding_constraint", "sdy.reshard"}), "is not stripped"),
    "decompose-complex-triangular-solve": lambda module: _first(
        _control_flow_ops(module), lambda op: op.name == "stablehlo.triangular_solve"
        and op.operands[0].dtype == DType.C64, "is a complex64 solve left"),
    "decompose-complex": _no_complex,
    "cancel-transposes": _transposes_cancelled,
    "eliminate-common-subexpressions": lambda module: (
        None if (op := repeated(module)) is None
        else f"{op.describe()} computes what an earlier op of its block does"),
    "decompose-batch-norm": _none_left(
        frozenset({"stablehlo.batch_norm_inference", "stablehlo.batch_norm_training",
                   "stablehlo.batch_norm_grad"}), "is not decomposed"),
    "decompose-reduce-precision": _no_reduce_precision,
    "decompose-rng-bit-generator": _none_left(frozenset({"stablehlo.rng_bit_generator"}),
                                              "is not decomposed"),
    "expand-total-order-compare": _no_total_order_compare,
    "simplify-unit-reduce": lambda module: _first(_all_ops(module), is_unit_reduce,
                                                  "reduces only dims of size one"),
    "normalize-dot-general": _batch_matmuls,
    "fuse-rows": lambda module: _first(
        _all_ops(module), lambda op: op.name == ROW_FUSION and not holds_only_members(op),
        "holds an op that is not a member of its row space"),
    "fuse-attention": lambda module: _first(
        _all_ops(module), lambda op: op.name == ROW_FUSION and not matmul_placed(op),
        "holds a matmul that is not its region's first op on block arguments"),
    "pair-matmuls": lambda module: _first(
        _all_ops(module), lambda op: op.name == PAIR and not pair_formed(op),
        "is not the transpose and the two matmuls of its arguments"),
    "fold-convert-into-reduce": lambda module: (
        None if (op := unfolded(module)) is None
        else f"{op.describe()} still reads a widening convert"),
    "fold-product-into-reduce": lambda module: (
        None if (op := unfolded_product(module)) is None
        else f"{op.describe()} still reads a multiply that nothing else reads"),
    "check-supported": _supported,
}


def verify_module(module: Module, after_pass: str) -> None:
  """Checks the invariants of every pass, then what `after_pass` ensures (if it is one of
  _ENSURES' passes)."""
  where = f"IR after pass '{after_pass}'"
  for function in module.functions.values():
    _check_block(function.body, set(), f"{where}, function @{function.name}")
  main = module.main
  returned = [v.type for v in main.returned]
  if returned != main.result_types:
    raise IRVerificationError(f"{where}: @{main.name} returns {returned}, declared "
                              f"{main.result_types}")
  check = _ENSURES.get(after_pass)
  broken = check(module) if check else None
  if broken:
    raise IRVerificationError(f"{where}: {broken}")
