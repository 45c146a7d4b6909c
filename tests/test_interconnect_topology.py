"""The chips' topology (docs/multi-device.md "Topology"): each chip's place in its instance's
4×4 torus (an UltraServer stacks four), topology-aware meshes from jax.make_mesh, and the
interconnect timing of routes over the torus with the links shared by concurrent groups.
Each case runs in a fresh process (the chip count is fixed when the backend starts)."""

import json
import textwrap

import pytest

from fresh_process import run_python

_PRELUDE = textwrap.dedent("""
    import json, os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    from importlib import metadata
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
      from jax_trn import plugin
      plugin.initialize()
    import jax, numpy as np
    from jax_trn import profile
""")


def _run(body: str, **env) -> dict:
  result = run_python(_PRELUDE + textwrap.dedent(body), env, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_chips_sit_in_a_4x4_torus_and_an_ultraserver_stacks_four_instances():
  out = _run("""
      devices = jax.devices("trn")
      print(json.dumps({"count": len(devices),
                        "coords": {d.chip_index: list(d.coords) for d in devices}}))
  """, TRN_CHIPS="20")
  assert out["count"] == 80
  coords = {int(chip): tuple(c) for chip, c in out["coords"].items()}
  assert coords[0] == (0, 0, 0) and coords[3] == (3, 0, 0) and coords[4] == (0, 1, 0)
  assert coords[15] == (3, 3, 0) and coords[16] == (0, 0, 1) and coords[19] == (3, 0, 1)


@pytest.mark.parametrize("env, message", [
    ({"TRN_CHIPS": "65"}, "between 1 and 64 on trn2 (one Trn2 UltraServer), got 65"),
    ({"TRN_CHIPS": "17", "TRN_TARGET": "trn1"}, "between 1 and 16 on trn1 (one trn1.32xlarge)")])
def test_more_chips_than_the_largest_system_is_refused(env, message):
  result = run_python(_PRELUDE + "jax.devices('trn')\n", env)
  assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]


_SNAKE_AGAINST_ROW_MAJOR = """
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    devices = jax.devices("trn")
    snake = jax.make_mesh((8, 4), ("chips", "cores"))
    from jax.experimental import mesh_utils
    assert [d.id for d in mesh_utils.create_device_mesh((8, 4)).flat] == \\
        [d.id for d in snake.devices.flat]
    row_major = Mesh(np.asarray(devices).reshape(8, 4), ("chips", "cores"))
    x = np.arange(32 * (1 << 19), dtype=np.int32).reshape(32, -1) % 1000
    want = np.tile(x.reshape(8, 4, -1).sum(0), (8, 1))
    times = []
    for mesh in (snake, row_major):
      f = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "chips"), mesh=mesh,
                                in_specs=P(("chips", "cores")), out_specs=P(("chips", "cores"))))
      got = jax.block_until_ready(f(jax.device_put(x, NamedSharding(mesh, P(("chips", "cores"))))))
      assert np.array_equal(np.asarray(got), want)
      times.append(max(profile.last_execution(d).device_time_ns for d in devices))
    print(json.dumps({"chips": [d.chip_index for d in snake.devices[:, 0]],
                      "cores": [d.core_on_chip for d in snake.devices[0]],
                      "snake_ns": times[0], "row_major_ns": times[1]}))
"""


@pytest.mark.slow
def test_make_mesh_snakes_through_the_torus_so_rings_take_one_hop_per_step():
  """8 chips (two rows of the torus), 4 cores each, 2 MiB per core summed over the chips (the
  ring: a group of one core per chip): jax.make_mesh puts the cores of a chip on the last axis
  and the chips in snake order (0 1 2 3 7 6 5 4), every ring step one link; in row-major order
  two steps of each ring take two links (3 → 4 and 7 → 0), which the 4 groups' rings share."""
  out = _run(_SNAKE_AGAINST_ROW_MAJOR, TRN_CHIPS="8")
  assert out["chips"] == [0, 1, 2, 3, 7, 6, 5, 4] and out["cores"] == [0, 1, 2, 3]
  assert out["snake_ns"] < 0.9 * out["row_major_ns"], out


_GROUPS_SHARING_THE_LINK = """
    devices = jax.devices("trn")
    x = np.arange(8 * (1 << 18), dtype=np.int32).reshape(8, -1) % 1000
    times = {}
    for name, groups in (("four_across", [[0, 4], [1, 5], [2, 6], [3, 7]]),
                         ("two_across", [[0, 4], [1, 5], [2, 3], [6, 7]])):
      psum = lambda v: jax.lax.psum(v, "i", axis_index_groups=groups)
      got = jax.pmap(psum, axis_name="i", devices=devices)(x)
      want = jax.pmap(psum, axis_name="i", devices=jax.devices("cpu"))(x)
      assert np.array_equal(np.asarray(got), np.asarray(want))
      times[name] = profile.last_execution(devices[0]).device_time_ns
    print(json.dumps(times))
"""


def test_concurrent_groups_crossing_one_link_share_its_bandwidth():
  """Two chips, 1 MiB per core, pairs summed: with all four pairs across the chips, each
  direction of the one link carries four transfers at a time (64 GB/s each); with two pairs
  across, two (128 GB/s). Core 0's ring of two is 2 steps of 512 KiB."""
  out = _run(_GROUPS_SHARING_THE_LINK, TRN_CHIPS="2")
  half = (1 << 20) / 2
  assert out["four_across"] - out["two_across"] == pytest.approx(
      2 * (half / 64 - half / 128), rel=1e-3)


_EXECUTED_AGAINST_MODEL = """
    from hlo_lowering.passes.collectives.choose_algorithm import algorithm_for
    from jax_trn import _native
    devices = jax.devices("trn")
    out = []
    for nbytes in (1 << 10, 1 << 20, 4 << 20):
      f = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)
      with profile.trace():
        jax.block_until_ready(f(np.ones((8, nbytes // 4), np.float32)))
      ran = min(next(o.busy_ns for o in profile.last_execution(d).by_op()
                     if o.op == "stablehlo.all_reduce") for d in devices)
      algorithm = algorithm_for("stablehlo.all_reduce", nbytes, [list(range(8))], 4)
      model = _native.interconnect_ns(0, algorithm, nbytes, [list(range(8))],
                                      [d.chip_index for d in devices], "trn2")
      out.append([algorithm, ran, model])
    print(json.dumps(out))
"""


def test_an_executed_collective_takes_the_interconnect_models_time():
  """benchmarks/all_reduce.py reports sizes too large for the host from
  `_native.interconnect_ns`: it is the time the executed instruction is charged (8 cores on 2
  chips, each algorithm choose-collective-algorithm picks)."""
  out = _run(_EXECUTED_AGAINST_MODEL, TRN_CHIPS="2")
  assert [a for a, _, _ in out] == [1, 1, 2]  # halving-doubling, then hierarchical
  for _, ran, model in out:
    assert ran == pytest.approx(model, rel=1e-9)
