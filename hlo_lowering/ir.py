"""The compiler's own IR: a compact SSA form of a StableHLO module.

Values are typed tensors; ops carry their StableHLO name, attributes as plain Python (ints,
lists, strings, numpy arrays), nested regions (reduce bodies, while cond/body, case branches) and
the source location of the user's Python line. Passes rewrite it in place; `ir_printer` prints it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Iterator

from hlo_lowering.program import DType


@dataclasses.dataclass(frozen=True)
class TensorType:
  shape: tuple[int, ...]
  dtype: DType

  @property
  def rank(self) -> int:
    return len(self.shape)

  @property
  def size(self) -> int:
    return math.prod(self.shape)

  @property
  def nbytes(self) -> int:
    return self.size * self.dtype.itemsize

  def __str__(self) -> str:
    dims = "x".join(str(d) for d in self.shape)
    return f"tensor<{dims + 'x' if dims else ''}{self.dtype.name.lower()}>"


@dataclasses.dataclass(frozen=True)
class Location:
  """Where an op came from: JAX's name for it ("jit(f)/add") and the user's file:line:col."""
  name: str = ""
  file: str = ""
  line: int = 0
  col: int = 0

  @property
  def position(self) -> str:
    """"file.py:3:4", or "" when unknown."""
    if not self.file:
      return ""
    return f"{self.file}:{self.line}:{self.col}"

  def __str__(self) -> str:
    parts = [p for p in (self.name, self.position) if p]
    return " at ".join(parts) if parts else "unknown location"


UNKNOWN_LOCATION = Location()
_value_ids = itertools.count()


class Value:
  """An SSA value: the result of an op or an argument of a block."""

  def __init__(self, type_: TensorType, name: str = ""):
    self.type = type_
    self.name = name
    self.id = next(_value_ids)

  @property
  def shape(self) -> tuple[int, ...]:
    return self.type.shape

  @property
  def dtype(self) -> DType:
    return self.type.dtype

  def __repr__(self) -> str:
    return f"%{self.id}:{self.type}"


class Op:
  """One operation. `attrs` holds plain Python; `regions` nested bodies (each a Region)."""

  def __init__(self, name: str, operands: list[Value], result_types: list[TensorType],
               attrs: dict[str, Any] | None = None, regions: list["Region"] | None = None,
               loc: Location = UNKNOWN_LOCATION):
    self.name = name
    self.operands = list(operands)
    self.results = [Value(t) for t in result_types]
    self.attrs = dict(attrs or {})
    self.regions = list(regions or [])
    self.loc = loc

  @property
  def result(self) -> Value:
    if len(self.results) != 1:
      raise ValueError(f"{self.name} has {len(self.results)} results, not one")
    return self.results[0]

  def describe(self) -> str:
    """The op for an error message: name, operand types and source position."""
    operands = ", ".join(str(v.type) for v in self.operands)
    return f"{self.name}({operands}) at {self.loc}"

  def __repr__(self) -> str:
    return f"Op({self.name})"


class Block:
  def __init__(self, args: list[Value] | None = None, ops: list[Op] | None = None):
    self.args = list(args or [])
    self.ops = list(ops or [])

  @property
  def terminator(self) -> Op:
    return self.ops[-1]


class Region:
  """A single-block region (StableHLO regions have one block)."""

  def __init__(self, block: Block):
    self.block = block


class Function:
  """A func.func: argument values, a body, and its result types (body ends in func.return)."""

  def __init__(self, name: str, body: Block, result_types: list[TensorType],
               public: bool = True, arg_names: list[str] | None = None,
               result_names: list[str] | None = None,
               output_aliases: dict[int, int] | None = None):
    self.name = name
    self.body = body
    self.result_types = list(result_types)
    self.public = public
    self.arg_names = list(arg_names or [""] * len(body.args))
    self.result_names = list(result_names or [""] * len(result_types))
    # Donated arguments: argument number -> the result that may reuse its buffer
    # (`tf.aliasing_output`, what jax.jit(donate_argnums=...) asks for).
    self.output_aliases = dict(output_aliases or {})
    # Arguments and results bound to complex64 buffers, held as float32 [..., 2] (real,
    # imaginary) pairs once decompose-complex has run.
    self.complex_args: set[int] = set()
    self.complex_results: set[int] = set()
    # Arguments and results bound to int4/uint4 buffers, held as int8/uint8 once widen-int4 has
    # run.
    self.nibble_args: set[int] = set()
    self.nibble_results: set[int] = set()
    # Per-value attributes as imported (sdy.sharding text, ...), one dict per argument/result.
    self.arg_attrs: list[dict] = [{} for _ in body.args]
    self.result_attrs: list[dict] = [{} for _ in result_types]

  @property
  def args(self) -> list[Value]:
    return self.body.args

  @property
  def returned(self) -> list[Value]:
    return self.body.terminator.operands


class Module:
  """Functions by name; `main` is the entry. `source` is the module's MLIR text;
  `source_format` what the program arrived as: "mlir" (JAX) or "hlo" (an HloModuleProto, from
  torch_xla)."""

  def __init__(self, functions: dict[str, Function], attrs: dict[str, Any] | None = None,
               source: str = "", entry: str = "main", source_format: str = "mlir"):
    self.functions = dict(functions)
    self.attrs = dict(attrs or {})
    self.source = source
    self.entry = entry
    self.source_format = source_format

  @property
  def main(self) -> Function:
    return self.functions[self.entry]


# Ops whose regions are code that runs (loop bodies, branches), as opposed to reduce/sort
# bodies, which lowering matches as a whole. Passes that rewrite code recurse into them.
CONTROL_FLOW = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})


def control_flow_blocks(block: Block) -> Iterator[Block]:
  """`block` and, depth first, the region blocks of the control-flow ops nested in it."""
  yield block
  for op in block.ops:
    if op.name in CONTROL_FLOW:
      for region in op.regions:
        yield from control_flow_blocks(region.block)


def walk_ops(block: Block) -> Iterator[Op]:
  """Every op of a block and, depth first, of the regions nested in it."""
  for op in block.ops:
    yield op
    for region in op.regions:
      yield from walk_ops(region.block)


def replace_uses(block: Block, mapping: dict[Value, Value]) -> None:
  """Rewrite every use of a key of `mapping` inside `block` (and nested regions)."""
  if not mapping:
    return
  for op in walk_ops(block):
    op.operands = [mapping.get(v, v) for v in op.operands]


def use_counts(block: Block) -> dict[Value, int]:
  counts: dict[Value, int] = {}
  for op in walk_ops(block):
    for v in op.operands:
      counts[v] = counts.get(v, 0) + 1
  return counts


def clone_op(op: Op, mapping: dict[Value, Value]) -> Op:
  """A copy of `op` (and its regions) whose operands go through `mapping`; the copy's results
  are added to `mapping` so later clones use them."""
  regions = [Region(clone_block(r.block, mapping)) for r in op.regions]
  copy = Op(op.name, [mapping.get(v, v) for v in op.operands], [r.type for r in op.results],
            dict(op.attrs), regions, op.loc)
  for old, new in zip(op.results, copy.results):
    mapping[old] = new
  return copy


def clone_block(block: Block, mapping: dict[Value, Value]) -> Block:
  args = [Value(a.type) for a in block.args]
  mapping.update(zip(block.args, args))
  return Block(args, [clone_op(op, mapping) for op in block.ops])
