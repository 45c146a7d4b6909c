"""choose-collective-algorithm and the interconnect timing of each algorithm
(docs/multi-device.md "Timing model"): results never depend on the algorithm, modeled time does."""

import json
import re

import numpy as np
import pytest

import jax

import compiler_harness as harness
from hlo_lowering import pipeline
from hlo_lowering.program import disassemble
from hlo_lowering.program.enums import (COLLECTIVE_HALVING_DOUBLING, COLLECTIVE_HIERARCHICAL,
                                        COLLECTIVE_RING)
from jax_trn import profile

CORES = 4
_RING_ONLY = tuple(p for p in pipeline.PASSES if p.name != "choose-collective-algorithm")


def _psum(devices):
  return jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)


def _algorithms(program: bytes) -> list[int]:
  return [int(a) for a in re.findall(r" collective .*? algorithm=(\d+) ", disassemble(program))]


def _modeled_ns(x) -> float:
  devices = jax.devices("trn")[:CORES]
  got = jax.block_until_ready(_psum(devices)(x))
  np.testing.assert_array_equal(np.asarray(got), np.asarray(_psum(jax.devices("cpu")[:CORES])(x)))
  return max(profile.last_execution(d).device_time_ns for d in devices)


def test_a_power_of_two_group_on_one_chip_takes_halving_doubling():
  x = np.arange(CORES * 256, dtype=np.int32).reshape(CORES, 256)
  text = _psum(jax.devices("cpu")[:CORES]).lower(x).as_text()
  assert _algorithms(harness.compile_code(text.encode(), num_partitions=CORES)) == \
      [COLLECTIVE_HALVING_DOUBLING]


def test_halving_doubling_saves_the_rings_extra_hops(monkeypatch):
  """4 cores, 1 KiB: log2 4 = 2 rounds each way instead of 3 ring steps, 2 hops of 1.5 µs
  fewer (the bytes moved are the same); the sums are the same."""
  x = np.arange(CORES * 256, dtype=np.int32).reshape(CORES, 256)
  chosen = _modeled_ns(x)
  monkeypatch.setattr(pipeline, "PASSES", _RING_ONLY)
  ring = _modeled_ns(x)
  assert ring - chosen == pytest.approx(2 * 1500.0, rel=0.05)


_EIGHT_CORES_ON_TWO_CHIPS = """
import json, os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
from importlib import metadata
if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
  from jax_trn import plugin
  plugin.initialize()
import jax, numpy as np
from hlo_lowering import pipeline
from jax_trn import profile
devices = jax.devices("trn")
x = np.arange(8 * (1 << 20), dtype=np.int32).reshape(8, -1) % 1000
f = lambda: jax.block_until_ready(jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)(x))
want = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=jax.devices("cpu"))(x)
times, equal = [], []
for passes in (pipeline.PASSES, tuple(p for p in pipeline.PASSES if p.name != "choose-collective-algorithm")):
  pipeline.PASSES = passes
  equal.append(bool(np.array_equal(f(), want)))
  times.append(max(profile.last_execution(d).device_time_ns for d in devices))
print(json.dumps({"equal": equal, "hierarchical_ns": times[0], "ring_ns": times[1]}))
"""


@pytest.mark.slow
def test_a_large_all_reduce_across_two_chips_goes_hierarchical():
  """8 cores on 2 neighbouring chips (TRN_CHIPS=2), 4 MiB: the ring has 14 steps of 512 KiB,
  each as slow as its chip-link step (256 GB/s); the hierarchical algorithm has 6 steps of 1 MiB
  inside each chip (368 GB/s) and 2 steps of 512 KiB between the chips, where the 4 rings (one
  per core of a chip) share the one link: 64 GB/s each. Same sums; 6 hops of 1.5 µs fewer,
  partly spent on the slower shared steps."""
  from fresh_process import run_python
  result = run_python(_EIGHT_CORES_ON_TWO_CHIPS, env={"TRN_CHIPS": "2"}, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert out["equal"] == [True, True]
  mib = 1 << 20
  ring = 14 * (1500 + 4 * mib / 8 / 256)
  hierarchical = 6 * (1500 + mib / 368) + 2 * (1500 + mib / 2 / (256 / 4))
  assert out["ring_ns"] - out["hierarchical_ns"] == pytest.approx(ring - hierarchical, rel=1e-3)


def test_across_chips_the_hierarchical_all_reduce_stops_where_the_ring_wins():
  """8 cores on 2 chips: up to 6 MiB (8 × 0.75 MiB) hierarchical, beyond it the ring, whose
  flat steps then cost less than moving every byte through each chip's cores once more."""
  from hlo_lowering.passes.collectives.choose_algorithm import algorithm_for
  group = [list(range(8))]
  assert algorithm_for("stablehlo.all_reduce", 1 << 20, group, 4) == COLLECTIVE_HALVING_DOUBLING
  assert algorithm_for("stablehlo.all_reduce", 6 << 20, group, 4) == COLLECTIVE_HIERARCHICAL
  assert algorithm_for("stablehlo.all_reduce", 8 << 20, group, 4) == COLLECTIVE_RING
  assert algorithm_for("stablehlo.all_gather", 4 << 20, group, 4) == COLLECTIVE_RING
  assert algorithm_for("stablehlo.all_reduce", 64 << 20, [list(range(8))], 8) == \
      COLLECTIVE_HALVING_DOUBLING  # one chip


def test_the_algorithm_reaches_the_instruction_and_the_loader_checks_it():
  from hlo_lowering.program import Alu, DType, HbmAP, ProgramBuilder
  from jax_trn import _native

  def program(kind, groups, algorithm):
    b = ProgramBuilder(source="module @m {}")
    x = b.tensor("parameter", DType.F32, (4, 2), index=0, name="x")
    y = b.tensor("output", DType.F32, (4, 2), index=0, name="y")
    b.collective(kind, HbmAP.dense(y, (4, 2)), HbmAP.dense(x, (4, 2)), groups=groups,
                 algorithm=algorithm, op=Alu.ADD)
    return harness.finish(b)
  assert _algorithms(program(0, [[0, 1, 2, 3]], COLLECTIVE_HIERARCHICAL)) == [COLLECTIVE_HIERARCHICAL]
  _native.program_info(program(0, [[0, 1, 2, 3]], COLLECTIVE_HALVING_DOUBLING))
  with pytest.raises(ValueError, match="power-of-two group, not 3 cores"):
    _native.program_info(program(0, [[0, 1, 2]], COLLECTIVE_HALVING_DOUBLING))
  with pytest.raises(ValueError, match="collective algorithm 7"):
    _native.program_info(program(0, [[0, 1]], 7))
  assert COLLECTIVE_RING == 0
