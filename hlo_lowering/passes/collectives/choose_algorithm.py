"""choose-collective-algorithm: each all_reduce, all_gather and reduce_scatter records the
algorithm the interconnect moves it by (attrs["collective_algorithm"], isa.def's
COLLECTIVE_RING / _HALVING_DOUBLING / _HIERARCHICAL), which the lowering writes into its
collective instruction and the simulator's interconnect timing charges (docs/multi-device.md
"Timing model").

Inside one chip cores exchange through the chip's HBM, any pair alike: recursive
halving-doubling moves a ring's bytes in log2 n rounds instead of n − 1 steps, so a
power-of-two group takes it at every size. Across chips its far rounds cross several chip
links (each hop's latency, the link shared): messages up to MAX_HALVING_DOUBLING_BYTES still
gain from the fewer rounds; larger all_reduces up to HIERARCHICAL_BYTES_PER_CORE per core go
hierarchical (a reduce-scatter inside each chip, c all-reduces of the pieces between chips, an
all-gather inside each chip: fewer hops), other kinds and larger all_reduces the ring. Groups
of two, and groups of other sizes not taking the hierarchical algorithm: the ring.

The cores of a chip are estimated as rank // module.attrs["trn.cores_per_chip"] (the target's
devices per chip at its default LNC; the runtime's device assignment decides): an algorithm
chosen on a wrong estimate stays correct, the hierarchical one inside one chip is the ring.

Requires: resolve-collective-groups (attrs["core_groups"]); module.attrs["trn.cores_per_chip"]
(else one chip holds every core).
Ensures: every all_reduce, all_gather and reduce_scatter has attrs["collective_algorithm"].
Runs after: decompose-all-reduce (which makes the reduce_scatters and all_gathers it chooses for).
"""

from __future__ import annotations

from hlo_lowering.ir import Module, Op, walk_ops
from hlo_lowering.program.enums import (COLLECTIVE_HALVING_DOUBLING, COLLECTIVE_HIERARCHICAL,
                                        COLLECTIVE_RING)

# Across chips, the largest message recursive halving-doubling takes (est.: where a ring's
# extra (n − 1 − log2 n) hop latencies, 1.5 µs each, stop outweighing its far rounds' shared
# links at 1.28 TB/s).
MAX_HALVING_DOUBLING_BYTES = 1 << 20
# Across chips, the hierarchical all-reduce saves the ring's hops (2 (c − 1) + 2 (m − 1) steps
# instead of 2 (n − 1)) but moves every byte through the chip's cores once more, and its c rings
# between chips share the chip links: it wins up to about n × 0.75 MiB (est. from the
# interconnect model's crossovers: 6 MiB for 8 cores on 2 chips, 24 MiB for 32 on 4, 96 MiB for
# 64 on 8; the bound sits at or below each); the ring beyond.
HIERARCHICAL_BYTES_PER_CORE = 3 << 18
_CHOSEN = frozenset({"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter"})


def _bytes(op: Op) -> int:
  """The collective's largest buffer (a variadic all_reduce's packed one)."""
  return max(sum(v.type.nbytes for v in op.operands), sum(r.type.nbytes for r in op.results))


def algorithm_for(name: str, nbytes: int, groups: list[list[int]], cores_per_chip: int) -> int:
  """The algorithm for collective `name` ("stablehlo.all_reduce", ...) whose largest buffer
  holds `nbytes`, over `groups` (core ranks)."""
  n = len(groups[0])
  if n <= 2:
    return COLLECTIVE_RING  # one exchange either way
  spans_chips = any(len({rank // cores_per_chip for rank in group}) > 1 for group in groups)
  if spans_chips and nbytes > MAX_HALVING_DOUBLING_BYTES:
    hierarchical = name == "stablehlo.all_reduce" and nbytes <= n * HIERARCHICAL_BYTES_PER_CORE
    return COLLECTIVE_HIERARCHICAL if hierarchical else COLLECTIVE_RING
  return COLLECTIVE_HALVING_DOUBLING if n & (n - 1) == 0 else COLLECTIVE_RING


def choose(op: Op, cores_per_chip: int) -> int:
  return algorithm_for(op.name, _bytes(op), op.attrs["core_groups"], cores_per_chip)


def run(module: Module) -> None:
  cores_per_chip = int(module.attrs.get("trn.cores_per_chip", 0)) or 1 << 30
  for function in module.functions.values():
    for op in walk_ops(function.body):
      if op.name in _CHOSEN and "core_groups" in op.attrs:
        op.attrs["collective_algorithm"] = choose(op, cores_per_chip)
