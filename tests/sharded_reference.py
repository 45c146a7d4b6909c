"""Running a jitted function over several cores on trn and on JAX's CPU backend over as many
host devices (tests/conftest.py) and comparing, and counting the collectives its partitioned
program emits (docs/multi-device.md "Partitioned compute")."""

import collections
import re

import numpy as np

import jax

import compiler_harness as harness
from hlo_lowering.program import disassemble

# Partial sums are combined across cores in another order than one core sums them.
RTOL, ATOL = 2e-5, 2e-6
_KINDS = {"all_reduce": 0, "all_gather": 1, "reduce_scatter": 2, "all_to_all": 3,
          "collective_permute": 4}


def devices(platform, n):
  found = jax.devices(platform)[:n]
  assert len(found) == n, f"needs {n} {platform} devices"
  return found


def on_both(make, *args, cores):
  """make(devices) -> a jitted function; runs it on trn and cpu, compares, returns trn's."""
  got = make(devices("trn", cores))(*args)
  want = make(devices("cpu", cores))(*args)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert g.shape == w.shape and g.dtype == w.dtype and g.sharding.spec == w.sharding.spec
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=RTOL, atol=ATOL)
  return got


def collectives(make, *args, cores) -> collections.Counter:
  """How many collective instructions of each kind the partitioned program has."""
  text = make(devices("cpu", cores)).lower(*args).as_text()
  program = disassemble(harness.compile_code(text.encode(), num_partitions=cores))
  kinds = re.findall(r" collective (?:wait\[[^]]*\] )?kind=(\d+) ", program)
  names = {v: k for k, v in _KINDS.items()}
  return collections.Counter(names[int(k)] for k in kinds)
