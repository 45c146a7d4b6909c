"""strip-single-device-sharding: drop Shardy annotations, which a single-device program satisfies.

JAX puts `sdy.sharding_constraint` (and `sdy.reshard`) into programs even for one device, e.g.
around jax.random inside Flax initialisers. On one NeuronCore every value is whole on that core,
so each such op is its operand. In a multi-core program partition-spmd leaves every value
outside manual computations whole on every core, so there too a constraint is its operand.

Requires: calls inlined (inline-calls).
Ensures: no sdy.sharding_constraint or sdy.reshard op remains.
Runs after: partition-spmd.
"""

from __future__ import annotations

from hlo_lowering.ir import Block, Module, replace_uses

_IDENTITY_ON_ONE_DEVICE = frozenset({"sdy.sharding_constraint", "sdy.reshard"})


def _strip(block: Block) -> None:
  replaced = {}
  kept = []
  for op in block.ops:
    for region in op.regions:
      _strip(region.block)
    if op.name in _IDENTITY_ON_ONE_DEVICE:
      replaced[op.results[0]] = replaced.get(op.operands[0], op.operands[0])
    else:
      kept.append(op)
  block.ops = kept
  replace_uses(block, replaced)


def run(module: Module) -> None:
  _strip(module.main.body)
