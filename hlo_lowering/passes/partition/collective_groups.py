"""resolve-collective-groups: every collective's participants as core ranks.

StableHLO names a collective's participants by replica ids, partition ids or flattened device
ids depending on channel_handle and use_global_device_ids (the StableHLO spec, "all_reduce");
the simulator names cores by rank = replica * num_partitions + partition. This pass writes
attrs["core_groups"] (or, for collective_permute, attrs["core_pairs"]) in ranks, and marks
partition_id / replica_id with attrs["core_rank"] where their value is the core's rank (the one
that varies between this program's cores) or leaves them to be the constant 0.

Requires: module.attrs["mhlo.num_partitions"] / ["mhlo.num_replicas"] the program's counts.
Refuses: groups of unequal sizes (StableHLO pads them with -1; a NeuronCore collective's groups
are all one size), as UNIMPLEMENTED naming the op.
Ensures: every all_reduce, all_gather, reduce_scatter, all_to_all, collective_broadcast has
attrs["core_groups"]; every collective_permute attrs["core_pairs"]; every partition_id /
replica_id attrs["core_rank"] (bool).
Runs after: partition-spmd.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import Module, Op, walk_ops

_GROUPED = frozenset({"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter",
                      "stablehlo.all_to_all", "stablehlo.collective_broadcast"})


def _mode(op: Op) -> str:
  if op.attrs.get("use_global_device_ids"):
    return "flattened"
  return "cross_partition" if op.attrs.get("channel_handle") else "cross_replica"


def _groups(op: Op, replicas: int, partitions: int) -> list[list[int]]:
  ids = np.asarray(op.attrs.get("replica_groups", np.zeros((0, 0))), dtype=np.int64)
  mode = _mode(op)
  if ids.size == 0:
    ids = np.arange(replicas * partitions if mode == "flattened" else
                    partitions if mode == "cross_partition" else replicas).reshape(1, -1)
  groups = [[int(i) for i in g if i >= 0] for g in ids]
  if len({len(g) for g in groups}) > 1:
    raise CompileError(f"{op.describe()}: replica groups of unequal sizes "
                       f"({', '.join(str(len(g)) for g in groups)} members) are not supported: "
                       "a NeuronCore collective's groups are all one size", UNIMPLEMENTED)
  if mode == "flattened":
    return groups
  if mode == "cross_partition":
    return [[r * partitions + q for q in g] for r in range(replicas) for g in groups]
  return [[r * partitions + p for r in g] for p in range(partitions) for g in groups]


def _pairs(op: Op, replicas: int, partitions: int) -> list[tuple[int, int]]:
  pairs = [tuple(map(int, p)) for p in np.asarray(op.attrs["source_target_pairs"]).reshape(-1, 2)]
  if op.attrs.get("channel_handle"):
    return [(r * partitions + a, r * partitions + b) for r in range(replicas) for a, b in pairs]
  return [(a * partitions + p, b * partitions + p) for p in range(partitions) for a, b in pairs]


def run(module: Module) -> None:
  replicas = int(module.attrs.get("mhlo.num_replicas", 1) or 1)
  partitions = int(module.attrs.get("mhlo.num_partitions", 1) or 1)
  for function in module.functions.values():
    for op in walk_ops(function.body):
      if op.name in _GROUPED and "core_groups" not in op.attrs:
        op.attrs["core_groups"] = _groups(op, replicas, partitions)
      elif op.name == "stablehlo.collective_permute":
        op.attrs["core_pairs"] = _pairs(op, replicas, partitions)
      elif op.name == "stablehlo.partition_id" and "core_rank" not in op.attrs:
        op.attrs["core_rank"] = partitions > 1
      elif op.name == "stablehlo.replica_id":
        op.attrs["core_rank"] = replicas > 1 and partitions == 1
