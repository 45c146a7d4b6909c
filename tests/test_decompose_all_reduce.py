"""decompose-all-reduce: a large all_reduce feeding elementwise compute becomes a reduce_scatter,
the compute on each core's piece and an all_gather; bit-identical, checked against JAX's CPU
backend on 4 devices (tests/conftest.py)."""

import re

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import compiler_harness as harness
from hlo_lowering.passes.collectives import decompose_all_reduce
from hlo_lowering.program import disassemble

CORES = 4
ROWS = decompose_all_reduce.MIN_BYTES // (4 * 512)  # a psum of exactly MIN_BYTES per core


def _devices(platform):
  return jax.devices(platform)[:CORES]


def _kinds(program: bytes) -> list[int]:
  """The kind of each collective instruction (0 all_reduce, 1 all_gather, 2 reduce_scatter)."""
  return [int(k) for k in re.findall(r" collective (?:wait\[[^]]*\] )?kind=(\d+) ",
                                     disassemble(program))]


def _scaled_psum(devices):
  mesh = Mesh(np.array(devices), ("i",))
  def f(g):
    return jnp.clip(jax.lax.psum(g, "i") * 3 - 7, -40, 40)
  return jax.jit(shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P()),
                 in_shardings=NamedSharding(mesh, P("i")))


def _program(make, *args) -> bytes:
  text = make(_devices("cpu")).lower(*args).as_text()
  return harness.compile_code(text.encode(), num_partitions=CORES)


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_compute_after_a_large_psum_runs_on_pieces_and_matches_cpu(dtype):
  g = (np.random.default_rng(0).standard_normal((CORES * ROWS, 512)) * 8).astype(dtype)
  got = _scaled_psum(_devices("trn"))(g)
  want = _scaled_psum(_devices("cpu"))(g)
  # Integers: bit-identical; floats: the group-order fold (docs/multi-device.md).
  tolerance = dict(rtol=1e-6, atol=1e-5) if dtype == np.float32 else dict(rtol=0)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), **tolerance)
  assert _kinds(_program(_scaled_psum, g)) == [2, 1]  # reduce_scatter, all_gather


def test_a_small_psum_stays_one_all_reduce():
  g = np.ones((CORES * 8, 512), np.float32)
  assert _kinds(_program(_scaled_psum, g)) == [0]


def test_a_pmap_update_of_per_core_weights_stays_an_all_reduce():
  """pmap's arguments may differ between cores: `w - psum(g)` on pieces would mix the cores'
  w, so the all_reduce stays."""
  def make(devices):
    return jax.pmap(lambda w, g: w - 0.1 * jax.lax.psum(g, "i"), axis_name="i", devices=devices)
  w = np.random.default_rng(1).standard_normal((CORES, ROWS, 512)).astype(np.float32)
  got = make(_devices("trn"))(w, w * 2)
  np.testing.assert_allclose(np.asarray(got), np.asarray(make(_devices("cpu"))(w, w * 2)),
                             rtol=1e-6, atol=1e-6)
  assert _kinds(_program(make, w, w * 2)) == [0]
