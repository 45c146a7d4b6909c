"""The partitioner's local rules on 8 cores (one trn2 chip at TRN_LNC=1, a fresh process): the
cases of test_sharding_propagation, test_partitioned_window_ops, test_partitioned_gather and
test_partitioned_loops split 8 ways, each checked against JAX's CPU backend over 8 devices,
none running replicated."""

import json
import os

import pytest

from fresh_process import run_python, source_tree_path

_TESTS = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_TESTS)

_EIGHT_WAYS = """
import json, sys
import conftest  # the CPU backend's 8 host devices, the source tree's plugin
import numpy as np, jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import sharded_reference as ref
from jax_trn import compilation
import test_sharding_propagation as prop, test_partitioned_window_ops as windows
import test_partitioned_gather as indexing, test_partitioned_loops as loops

assert len(jax.devices("trn")) == 8, jax.devices("trn")
rng = np.random.default_rng(0)

def rows(f, spec):
  def make(devices):
    named = NamedSharding(Mesh(np.array(devices), ("x",)), P(*spec))
    return jax.jit(f, in_shardings=named, out_shardings=named)
  return make

table, ids = indexing._inputs()
cases = {
  "backward from out_shardings": (prop._jit(prop._scaled_tanh, (8,), [(), ()], (None, None, "x")),
                                  (rng.standard_normal((16, 32), np.float32),
                                   rng.standard_normal((16,), np.float32))),
  "causal mask": (prop._jit(prop._causal_scores, (8,), [(None, "x", None), ()], (None, "x", None)),
                  tuple(rng.standard_normal((2, 2, 16, 8), np.float32))),
  "gather": (indexing._make((8,), (None, None), ("x", None), ("x", None, None)), (table, ids)),
  "while": (rows(loops._normalize_steps, ("x", None)),
            (rng.uniform(1, 2, (8, 8)).astype(np.float32),)),
}
for name, (f, _) in windows._OPS.items():
  cases[name] = (windows._jit(f, (8,), ("x", None, None, None)),
                 (rng.standard_normal((8, 4, 8, 8)).astype(np.float32),))
replicated = {}
for name, (make, args) in cases.items():
  ref.on_both(make, *args, cores=8)
  replicated[name] = compilation.last_report().replicated_ops
print(json.dumps(replicated))
"""


@pytest.mark.slow
def test_the_local_rules_split_eight_ways_agree_with_the_cpu():
  path = os.pathsep.join(source_tree_path(_ROOT) + [_TESTS])
  result = run_python(_EIGHT_WAYS, env={"TRN_LNC": "1", "PYTHONPATH": path}, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  replicated = json.loads(result.stdout.strip().splitlines()[-1])
  assert len(replicated) == 8 and not any(replicated.values()), replicated
