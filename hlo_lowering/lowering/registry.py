"""The lowering-rule registry (JAX's `register_lowering`, per op family).

A rule is `rule(ctx: LoweringContext, op: Op) -> None`: it emits instructions through
`ctx.builder` and places every result of `op` with `ctx.set_place` (or `ctx.new_result`). Rules of
kind "native" (tiled on TensorE/VectorE/ScalarE with DMA) are tried before "gpsimd" rules (GpSimd
general-purpose instructions over HBM); `when(op)` lets a rule decline an op it does not handle
(an integer dot_general, an odd dtype) so the next rule gets it; `when_placed(ctx, op)` decides
with what codegen knows (operand places, the consumers of the results), e.g. whether a transpose
can stay a view. `reads_views=True` declares that the rule reads its operands through their
access patterns whatever their strides, so a producer may hand it a strided view instead of
dense data (lowering/views.py); a callable `reads_views(op, value)` says so per operand value
(a row fusion reads only its matmul member's operands that way). `describe=` says in a few
words when the rule applies (the condition its `when`/`when_placed` tests); the coverage report
(hlo_lowering/coverage.py) prints it, falling back to the first line of the predicate's
docstring; a description starting with "always" says the predicate accepts every op of the name
(it only picks among equivalent paths).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Op

NATIVE = "native"
GPSIMD = "gpsimd"
KINDS = (NATIVE, GPSIMD)
ADDING_AN_OP_DOC = "docs/adding-an-op.md"


@dataclasses.dataclass(frozen=True)
class LoweringRule:
  op_name: str
  kind: str
  fn: Callable
  when: Callable[[Op], bool] | None
  when_placed: Callable | None = None
  reads_views: bool | Callable[[Op, object], bool] = False
  describe: str = ""
  when_target: Callable | None = None

  def reads_view_of(self, op: Op, value) -> bool:
    """Whether this rule reads `value`, an operand of `op`, through its access patterns."""
    return self.reads_views(op, value) if callable(self.reads_views) else self.reads_views

  @property
  def condition(self) -> str:
    """When the rule applies, in words: `describe=`, else the predicates' docstrings; "" for a
    rule that takes every op of its name."""
    if self.describe:
      return self.describe
    docs = [(p.__doc__ or "").strip().splitlines()[0]
            for p in (self.when, self.when_target, self.when_placed)
            if p is not None and (p.__doc__ or "").strip()]
    return "; ".join(docs)

  @property
  def name(self) -> str:
    """The rule's function by module under hlo_lowering.lowering ("matmul.lower_dot_general"):
    what the program's debug table records for the instructions it emitted."""
    return f"{self.fn.__module__.removeprefix('hlo_lowering.lowering.')}.{self.fn.__name__}"

  @property
  def conditional(self) -> bool:
    return any(p is not None for p in (self.when, self.when_target, self.when_placed))

  def accepts(self, op: Op, ctx=None, target_spec: dict | None = None) -> bool:
    """Whether the rule takes `op`; a rule with `when_target` takes nothing without a target
    description (`target_spec` or ctx's), one with `when_placed` nothing without a context."""
    if self.when is not None and not self.when(op):
      return False
    spec = ctx.target_spec if ctx is not None else target_spec
    if self.when_target is not None and (spec is None or not self.when_target(spec, op)):
      return False
    return self.when_placed is None or (ctx is not None and self.when_placed(ctx, op))


_RULES: dict[str, list[LoweringRule]] = {}


def register_lowering(op_name: str, kind: str = NATIVE, when: Callable[[Op], bool] | None = None,
                      when_placed: Callable | None = None,
                      reads_views: bool | Callable[[Op, object], bool] = False,
                      describe: str = "", when_target: Callable | None = None):
  """Decorator: `fn` lowers ops named `op_name` ("stablehlo.add") when `when(op)` (and
  `when_target(target_spec, op)` and `when_placed(ctx, op)`, if given) holds; `describe` states
  that condition in words."""
  if kind not in KINDS:
    raise ValueError(f"lowering kind {kind!r} is not one of {KINDS}")

  def decorate(fn):
    rules = _RULES.setdefault(op_name, [])
    rules.append(LoweringRule(op_name, kind, fn, when, when_placed, reads_views, describe,
                               when_target))
    rules.sort(key=lambda r: KINDS.index(r.kind))  # stable: registration order within a kind
    return fn

  return decorate


def registered_ops() -> list[str]:
  return sorted(_RULES)


def rules_for(op_name: str) -> tuple[LoweringRule, ...]:
  """The rules of `op_name` in the order they are tried (native first)."""
  return tuple(_RULES.get(op_name, ()))


def first_rule(op: Op, ctx=None, target_spec: dict | None = None) -> LoweringRule | None:
  """The first rule that accepts `op` (target-dependent rules only with a target description,
  context-dependent ones only when `ctx` is given)."""
  for rule in _RULES.get(op.name, ()):
    if rule.accepts(op, ctx, target_spec):
      return rule
  return None


def find_rule(op: Op, ctx=None) -> LoweringRule:
  """The first rule that accepts `op`; CompileError naming op, types and source line if none."""
  rule = first_rule(op, ctx)
  if rule is not None:
    return rule
  raise unsupported_op_error(op)


def unsupported_op_error(op: Op) -> CompileError:
  """The error for an op no rule accepts: its op, types and source line, and how to add it."""
  operands = ", ".join(f"{v.dtype.name.lower()}{list(v.shape)}" for v in op.operands) or "none"
  results = ", ".join(f"{v.dtype.name.lower()}{list(v.shape)}" for v in op.results) or "none"
  where = op.loc.position or "an unknown source line"
  reason = ("no lowering rule accepts these operand types" if op.name in _RULES
            else "no lowering rule is registered for it")
  if op.name == "stablehlo.custom_call":
    reason = (f"call_target_name {op.attrs.get('call_target_name')!r} names a host or vendor "
              "kernel the simulator does not have (trn_kernel, a jax_trn.nki kernel, is the "
              "custom call it runs)")
  if op.attrs.get("compare_type") == "TOTALORDER":
    # The dtypes are fine; the comparison is not (jnp.searchsorted, digitize, histogram).
    reason = ("no lowering rule accepts compare_type TOTALORDER (a total order of floats, "
              "-NaN < -Inf < ... < NaN, is not an ALU compare)")
  return CompileError(
      f"{op.name} is not supported on NeuronCores: {reason} (operands: {operands}; results: "
      f"{results}) at {where}{f' ({op.loc.name})' if op.loc.name else ''}. "
      f"To add it, see {ADDING_AN_OP_DOC}.", UNIMPLEMENTED)
