"""The profiler's collectives (jax_trn/profile_collectives.py): each core's collectives with
their bytes, algorithm, group, time waiting for the slowest peer and link utilization, on a
track of their own in every core's process of a Perfetto trace."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_trn import profile

CORES = 4


def _late_core_zero(v):
  """Core 0 runs four matmuls before the psum, the others none: they wait for it there."""
  slow = lambda a: jnp.tanh(a @ a @ a @ a @ a)
  v = jax.lax.cond(jax.lax.axis_index("i") == 0, slow, lambda a: a, v)
  return jax.lax.psum(v, "i")


@pytest.fixture(scope="module")
def late():
  devices = jax.devices("trn")[:CORES]
  x = np.random.default_rng(0).standard_normal((CORES, 256, 256), dtype=np.float32) / 16
  f = jax.pmap(_late_core_zero, axis_name="i", devices=devices)
  with profile.trace():
    got = jax.block_until_ready(f(x))
  want = jax.pmap(_late_core_zero, axis_name="i", devices=jax.devices("cpu")[:CORES])(x)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
  return [profile.last_execution(d) for d in devices]


def test_each_core_sees_its_wait_for_the_slowest_peer(late):
  [c0], *others = [p.collectives() for p in late]
  assert c0.op == "stablehlo.all_reduce" and c0.name == "psum"
  assert c0.bytes == 256 * 256 * 4 and c0.group_size == CORES
  assert c0.algorithm == "halving-doubling"
  assert c0.peer_wait_ns == 0.0  # the last to arrive
  for [c] in others:
    assert c.peer_wait_ns > 1000.0
    # Every member ends together: its arrival plus its wait is core 0's arrival.
    assert c.start_ns + c.peer_wait_ns == pytest.approx(c0.start_ns, rel=1e-9)
    assert c.time_ns == pytest.approx(c0.time_ns, rel=1e-9)


def test_link_utilization_is_the_share_of_the_links_rate_the_collective_reached():
  """4 cores of one chip, halving-doubling all-reduce of B bytes: 2 × (2 rounds of 1.5 µs,
  B/2 + B/4 bytes at a core's 368 GB/s) plus 600 ns to issue; latency-free, the bytes alone."""
  devices = jax.devices("trn")[:CORES]
  f = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)
  for nbytes in (1 << 10, 4 << 20):
    with profile.trace():
      jax.block_until_ready(f(np.ones((CORES, nbytes // 4), np.float32)))
    [c] = profile.last_execution(devices[0]).collectives()
    moved_ns = 2 * (nbytes / 2 + nbytes / 4) / 368
    assert c.time_ns == pytest.approx(600 + 2 * 2 * 1500 + moved_ns, rel=1e-9)
    assert c.link_utilization == pytest.approx(moved_ns / c.time_ns, rel=1e-5)


def test_perfetto_puts_the_collectives_on_their_own_track_of_every_core(late, tmp_path):
  path = tmp_path / "trace.json"
  profile.write_perfetto(path, late)
  events = json.loads(path.read_text())["traceEvents"]
  tracks = {(e["pid"], e["tid"]) for e in events
            if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == "collectives"}
  assert {pid for pid, _ in tracks} == {p.device_id for p in late}
  slices = [e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) in tracks]
  waits = [e for e in slices if e["name"] == "waiting for the slowest peer"]
  reduces = [e for e in slices if e["name"] == "all_reduce (halving-doubling)"]
  assert len(waits) == CORES - 1 and len(reduces) == CORES
  assert {e["args"]["bytes"] for e in reduces} == {256 * 256 * 4}
  assert all(0 < e["args"]["link_utilization"] <= 1 for e in reduces)


def test_the_report_lists_the_collectives(late):
  text = late[1].report()
  assert "collectives: 1," in text and "waiting for peers" in text
  assert "halving-doubling" in text and "psum (stablehlo.all_reduce)" in text
