"""Multi-core programs (docs/multi-device.md): pmap, shard_map and jit over NamedSharding on the
simulated cores of one trn2 chip (4 devices at LNC=2), each checked against the CPU backend on
the same number of devices. Integers must match bit for bit; floats within the tolerance the
documented summation order gives (group order, rounded after each step)."""

import re

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from hlo_lowering.errors import CompileError
from jax_trn import profile
import compiler_harness as harness

CORES = 4
FLOAT_RTOL = 1e-6


def _devices(platform):
  devices = jax.devices(platform)[:CORES]
  assert len(devices) == CORES, f"needs {CORES} {platform} devices"
  return devices


def _same(got, want):
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape and got.dtype == want.dtype
  if np.issubdtype(want.dtype, np.floating):
    np.testing.assert_allclose(got, want, rtol=FLOAT_RTOL)
  else:
    np.testing.assert_array_equal(got, want)


def _collectives(disassembly: str, kind: int) -> int:
  """How many collective instructions of `kind` (0 all_reduce, 1 all_gather) a program has."""
  return len(re.findall(rf" collective (?:wait\[[^]]*\] )?kind={kind} ", disassembly))


def _on_both(make, *args):
  """make(devices) -> a function; runs it on trn and on cpu and compares."""
  got = make(_devices("trn"))(*args)
  want = make(_devices("cpu"))(*args)
  _same(got, want)
  return got


_X = np.arange(24, dtype=np.float32).reshape(4, 6) * 0.37 - 3.0
_XI = (np.arange(24, dtype=np.int32).reshape(4, 6) * 7919) % 1013 - 500
_XC = (_X + 1j * (_X[::-1] * 0.5)).astype(np.complex64)  # complex collectives: each part alone

PMAP_CASES = {
    "psum_f32": (lambda v: jax.lax.psum(v, "i"), _X),
    "psum_i32": (lambda v: jax.lax.psum(v, "i"), _XI),
    "pmean": (lambda v: jax.lax.pmean(v, "i"), _X),
    "pmax": (lambda v: jax.lax.pmax(v, "i"), _X),
    "pmin_i32": (lambda v: jax.lax.pmin(v, "i"), _XI),
    "all_gather": (lambda v: jax.lax.all_gather(v, "i"), _X),
    "all_gather_tiled": (lambda v: jax.lax.all_gather(v, "i", tiled=True), _XI),
    "psum_scatter": (lambda v: jax.lax.psum_scatter(v[:4], "i"), _X),
    "psum_scatter_tiled": (lambda v: jax.lax.psum_scatter(jnp.tile(v, 2)[:8], "i", tiled=True), _XI),
    "ppermute_ring": (lambda v: jax.lax.ppermute(v, "i", [(k, (k + 1) % CORES) for k in range(CORES)]), _X),
    "ppermute_partial": (lambda v: jax.lax.ppermute(v, "i", [(0, 2), (3, 1)]), _XI),
    "all_to_all": (lambda v: jax.lax.all_to_all(v[:4].reshape(4, 1) * jnp.ones((4, 3)), "i", 0, 0), _X),
    "axis_index": (lambda v: v * jax.lax.axis_index("i") + jax.lax.psum(1, "i"), _XI),
    "psum_c64": (lambda v: jax.lax.psum(v, "i"), _XC),
    "all_gather_c64": (lambda v: jax.lax.all_gather(v, "i"), _XC),
    "psum_scatter_c64": (lambda v: jax.lax.psum_scatter(v[:4], "i"), _XC),
    "ppermute_c64": (
        lambda v: jax.lax.ppermute(v, "i", [(k, (k + 1) % CORES) for k in range(CORES)]), _XC),
    "all_to_all_c64": (
        lambda v: jax.lax.all_to_all(v[:4].reshape(4, 1) * jnp.ones((4, 3)), "i", 0, 0), _XC),
}


@pytest.mark.parametrize("case", sorted(PMAP_CASES))
def test_pmap_collective_matches_cpu(case):
  f, x = PMAP_CASES[case]
  _on_both(lambda devices: jax.pmap(f, axis_name="i", devices=devices), x)


def _mesh(devices, shape=(2, 2), names=("x", "y")):
  return Mesh(np.array(devices).reshape(shape), names)


def test_shard_map_over_a_2d_mesh_gathers_and_reduces_along_each_axis():
  def make(devices):
    mesh = _mesh(devices)
    body = lambda a: jax.lax.psum(jax.lax.all_gather(a, "x", tiled=True), "y") * (
        1 + jax.lax.axis_index("y"))
    # all_gather's result is replicated over x, which check_vma cannot infer.
    return jax.jit(shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P(None, "y"),
                             check_vma=False),
                   in_shardings=NamedSharding(mesh, P("x", "y")))
  _on_both(make, np.arange(64, dtype=np.float32).reshape(8, 8) / 8)


def test_shard_map_over_a_1d_mesh():
  def make(devices):
    mesh = _mesh(devices, (CORES,), ("d",))
    body = lambda a: jax.lax.pmax(a.sum(axis=0, keepdims=True), "d") - a
    return jax.jit(shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
  _on_both(make, np.arange(32, dtype=np.int32).reshape(8, 4))


def test_shard_map_collectives_over_both_axes_and_partial_manual_axes():
  y = np.arange(64, dtype=np.int32).reshape(8, 8)
  both_axes = lambda devices: jax.jit(shard_map(
      lambda a: jax.lax.psum(a, ("x", "y")) + jax.lax.axis_index(("x", "y")), mesh=_mesh(devices),
      in_specs=P("x", "y"), out_specs=P("x", "y")))
  _on_both(both_axes, y)
  partial = lambda devices: jax.jit(shard_map(lambda a: jax.lax.psum(a, "x"), mesh=_mesh(devices),
                                              in_specs=P("x"), out_specs=P(), axis_names={"x"}))
  _on_both(partial, y)


def test_pmap_data_parallel_gradient_step_matches_cpu():
  def step(w, batch):
    grad = jax.grad(lambda w: jnp.mean(jnp.tanh(batch @ w) ** 2))(w)
    return w - 0.1 * jax.lax.pmean(grad, "i")
  rng = np.random.default_rng(1)
  w = np.tile(rng.standard_normal((1, 8, 4), np.float32), (CORES, 1, 1))
  batches = rng.standard_normal((CORES, 16, 8), np.float32)
  _on_both(lambda devices: jax.pmap(step, axis_name="i", devices=devices), w, batches)


def test_jit_reduction_over_a_sharded_dim_matches_cpu():
  """The case an earlier Shardy trial got wrong (no all-reduce): rows of x and columns of w
  sharded, the sum over the sharded columns."""
  def make(devices):
    mesh = _mesh(devices)
    return jax.jit(lambda x, w: jnp.sum(jnp.tanh(x @ w), axis=1),
                   in_shardings=(NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P(None, "y"))))
  rng = np.random.default_rng(0)
  _on_both(make, rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 8), np.float32))


def test_jit_outputs_come_back_with_their_shardings():
  mesh = _mesh(_devices("trn"))
  x = np.arange(64, dtype=np.float32).reshape(8, 8)
  f = jax.jit(lambda a: (a * 2, a.sum()), in_shardings=NamedSharding(mesh, P("x", "y")),
              out_shardings=(NamedSharding(mesh, P("y", "x")), NamedSharding(mesh, P())))
  sharded, total = f(x)
  assert sharded.sharding.spec == P("y", "x") and total.sharding.is_fully_replicated
  assert {s.data.shape for s in sharded.addressable_shards} == {(4, 4)}
  np.testing.assert_array_equal(np.asarray(sharded), x * 2)
  assert float(total) == x.sum()
  # Unspecified output shardings: the executable reports the sharding the result is held under,
  # as XLA's propagation does (here the input's), and a reduced value comes back replicated.
  def unspecified(devices):
    return jax.jit(lambda a: (a + 1, a.sum()),
                   in_shardings=NamedSharding(_mesh(devices), P("x", "y")))
  out, total = unspecified(_devices("trn"))(x)
  cpu_out, cpu_total = unspecified(_devices("cpu"))(x)
  assert out.sharding.spec == cpu_out.sharding.spec == P("x", "y")
  assert total.sharding.is_fully_replicated and cpu_total.sharding.is_fully_replicated
  np.testing.assert_array_equal(np.asarray(out), x + 1)


def test_with_sharding_constraint_inside_a_sharded_jit():
  def make(devices):
    mesh = _mesh(devices)
    return jax.jit(lambda a: jax.lax.with_sharding_constraint(
        a * 2, NamedSharding(mesh, P("y", "x"))).sum(axis=0), in_shardings=NamedSharding(mesh, P("x")))
  _on_both(make, np.arange(64, dtype=np.float32).reshape(8, 8))


def test_make_array_from_callback_feeds_a_program():
  x = np.arange(64, dtype=np.float32).reshape(8, 8)
  sharding = NamedSharding(_mesh(_devices("trn")), P("x", "y"))
  array = jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: a * 3)(array)), x * 3)


def test_device_put_to_a_sharding_round_trips():
  mesh = _mesh(_devices("trn"))
  x = np.arange(48, dtype=np.int32).reshape(4, 12)
  placed = jax.device_put(x, NamedSharding(mesh, P("y", "x")))
  assert {s.data.shape for s in placed.addressable_shards} == {(2, 6)}
  np.testing.assert_array_equal(np.asarray(placed), x)
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: a - 1)(placed)), x - 1)


_UNEVEN = """
module @uneven attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["d"=4]>
  func.func public @main(%arg0: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"d"}]>}) -> tensor<6xf32> {
    return %arg0 : tensor<6xf32>
  }
}"""


_GSPMD = """
module @gspmd attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x6xf32> {mhlo.sharding = "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}"}) -> (tensor<8x6xf32> {mhlo.sharding = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"}) {
    return %arg0 : tensor<8x6xf32>
  }
}"""


def test_gspmd_shardings_partition_like_shardy_ones():
  """torch_xla's mhlo.sharding form: the argument arrives as [4, 6] shards and is gathered, the
  result leaves as [8, 3] shards; the executable reports both shardings."""
  from hlo_lowering.program import read_program, disassemble
  data = harness.compile_code(_GSPMD.encode(), num_partitions=4)
  program = read_program(data)
  params = [t for t in program.tensors if t.kind == 0]
  assert [tuple(t.shape) for t in params] == [(4, 6)]
  assert _collectives(disassemble(data), 1) == 1
  assert 'mhlo.spmd_output_sharding = "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}"' in program.source
  assert "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}" in program.source
  # The reported module has the per-core signature, as XLA's partitioned module has it
  # (JAX's tests read compile().as_text() for it).
  assert "@main(%arg0: tensor<4x6xf32>" in program.source
  assert "-> (tensor<8x3xf32>" in program.source


def test_shards_that_do_not_divide_evenly_are_refused_naming_the_dim():
  with pytest.raises(CompileError, match=r"argument 0 .*dim 0 of size 6 does not split evenly "
                                         r"into 4 shards") as info:
    harness.compile_code(_UNEVEN.encode(), num_partitions=4)
  assert info.value.code == "INVALID_ARGUMENT"


def test_a_collective_over_an_axis_not_in_the_mesh_is_a_clear_error():
  with pytest.raises(NameError, match="unbound axis name: j"):
    jax.pmap(lambda v: jax.lax.psum(v, "j"), axis_name="i", devices=_devices("trn"))(_X)


def test_a_failing_core_stops_the_others_waiting_and_names_itself(monkeypatch):
  """Cores 2 and 3 run a loop past the iteration cap; 0 and 1 wait for them in the psum after
  it and fail at once with the failing core's error instead of hanging."""
  monkeypatch.setenv("TRN_MAX_LOOP_ITERATIONS", "5")
  def f(v):
    trips = jax.lax.axis_index("i") * 4
    v = jax.lax.fori_loop(0, trips, lambda k, a: a + 1.0, v)
    return jax.lax.psum(v, "i")
  out = jax.pmap(f, axis_name="i", devices=_devices("trn"))(_X)
  shards = sorted(out.addressable_shards, key=lambda s: s.device.id)
  with pytest.raises(Exception, match=r"iteration cap"):
    jax.block_until_ready(shards[2].data)
  with pytest.raises(Exception, match=r"core 0 stopped waiting in all_reduce .*: core [23] failed: "
                                      r".*iteration cap"):
    jax.block_until_ready(shards[0].data)


def test_a_collective_only_some_cores_reach_times_out_naming_core_and_collective(monkeypatch):
  monkeypatch.setenv("TRN_COLLECTIVE_TIMEOUT_S", "1")
  def f(v):
    return jax.lax.cond(jax.lax.axis_index("i") == 0, lambda a: jax.lax.psum(a, "i"),
                        lambda a: a, v)
  with pytest.raises(Exception, match=r"core 0 waited 1 s in all_reduce \(stablehlo.all_reduce .*test_multi_device.py:\d+.*\) "
                                         r"for core\(s\) 1, 2, 3"):
    jax.block_until_ready(jax.pmap(f, axis_name="i", devices=_devices("trn"))(_X))


def _all_reduce_ns(elements: int) -> float:
  devices = _devices("trn")
  f = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)
  jax.block_until_ready(f(np.ones((CORES, elements), np.float32)))
  return profile.last_execution(devices[0]).device_time_ns


def test_collective_time_is_deterministic_and_grows_with_the_message():
  small, again, large = _all_reduce_ns(256), _all_reduce_ns(256), _all_reduce_ns(1 << 18)
  assert small == again
  # A ring all-reduce of 1 MiB over 4 cores moves 1.5 MiB per core over the links: at least
  # that many bytes at the per-core DMA rate (trn2: 16 x 23 B/ns) on top of the small one.
  assert large - small > 1.5 * (1 << 20) / (16 * 23)


def _collective_program(**fields) -> bytes:
  from hlo_lowering.program import DType, HbmAP, ProgramBuilder
  b = ProgramBuilder(source="module @m {}")
  x = b.tensor("parameter", DType.F32, (4, 2), index=0, name="x")
  y = b.tensor("output", DType.F32, (8, 2), index=0, name="y")
  kind = fields.pop("kind")
  b.collective(kind, HbmAP.dense(y, (8, 2)), HbmAP.dense(x, (4, 2)), **fields)
  return harness.finish(b)


@pytest.mark.parametrize("fields, message", [
    ({"kind": 1, "groups": [[0, 1]], "dim": 0}, None),
    ({"kind": 1, "groups": [[0, 1, 2, 3]], "dim": 0}, "all_gather dst vs n x src"),
    ({"kind": 1, "groups": [[0, 1], [1, 2]], "dim": 0}, "name core 1 twice"),
    ({"kind": 1, "groups": [[0, 1]], "dim": 3}, "collective dim out of range"),
    ({"kind": 4, "pairs": [(0, 1), (2, 1)]}, "names core 2 or 1 twice"),
    ({"kind": 9, "groups": [[0, 1]]}, "collective kind 9"),
])
def test_the_loader_checks_collective_operands(fields, message):
  from jax_trn import _native
  data = _collective_program(**fields)
  if message is None:
    assert _native.program_info(data)["outputs"][0]["shape"] == (8, 2)
  else:
    with pytest.raises(ValueError, match=message):
      _native.program_info(data)


def test_the_executable_reports_its_partitions_devices_and_shardings():
  devices = _devices("trn")
  mesh = _mesh(devices)
  x = jax.device_put(np.ones((8, 8), np.float32), NamedSharding(mesh, P("x", "y")))
  compiled = jax.jit(lambda a: a * 2, out_shardings=NamedSharding(mesh, P("x"))).lower(x).compile()
  executable = compiled.runtime_executable()
  assert {d.id for d in executable.local_devices()} == {d.id for d in devices}
  assert compiled.input_shardings[0][0].spec == P("x", "y")
  assert compiled.output_shardings.spec == P("x")


def test_independent_all_reduces_are_combined_into_one_collective():
  """combine-all-reduces: pmean of a three-leaf tree is one all_reduce per leaf in JAX's
  program and one collective in ours, with the CPU's results."""
  from hlo_lowering.program import disassemble
  f = lambda a, b, c: jax.lax.pmean((a * 2, b, c.astype(jnp.float32)), "i")
  args = (np.ones((CORES, 3), np.float32), np.arange(CORES * 10, dtype=np.float32).reshape(CORES, 5, 2),
          np.arange(CORES * 4, dtype=np.int32).reshape(CORES, 4))
  text = jax.pmap(f, axis_name="i", devices=_devices("cpu")).lower(*args).as_text()
  assert text.count('"stablehlo.all_reduce"') == 3
  program = disassemble(harness.compile_code(text.encode(), num_partitions=CORES))
  assert _collectives(program, 0) == 1
  got = jax.pmap(f, axis_name="i", devices=_devices("trn"))(*args)
  want = jax.pmap(f, axis_name="i", devices=_devices("cpu"))(*args)
  for g, w in zip(got, want):
    _same(g, w)


_EIGHT_CORES = """
import json, os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
from importlib import metadata
if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
  from jax_trn import plugin
  plugin.initialize()
import jax, numpy as np
x = np.arange(8 * 6, dtype=np.int32).reshape(8, 6)
f = lambda v: (jax.lax.psum(v, "i") * (1 + jax.lax.axis_index("i")) +
               jax.lax.ppermute(v, "i", [(k, (k + 3) % 8) for k in range(8)]))
devices = jax.devices("trn")
got = jax.pmap(f, axis_name="i", devices=devices)(x)
want = jax.pmap(f, axis_name="i", devices=jax.devices("cpu"))(x)
mesh = jax.make_mesh((2, 4), ("x", "y"), devices=devices)
print(json.dumps({"count": len(devices), "equal": bool(np.array_equal(got, want)),
                  "chips": sorted({d.chip_index for d in devices}),
                  "mesh": [[d.id for d in row] for row in mesh.devices]}))
"""


@pytest.mark.parametrize("env, chips", [({"TRN_CHIPS": "2"}, [0, 1]), ({"TRN_LNC": "1"}, [0])])
def test_eight_cores_across_two_chips_or_one_chip_at_lnc_1(env, chips):
  import json
  from fresh_process import run_python
  result = run_python(_EIGHT_CORES, env=env, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert out == {"count": 8, "equal": True, "chips": chips,
                 "mesh": [[0, 1, 2, 3], [4, 5, 6, 7]]}


_TORCH_XLA_SPMD = """
import json
from importlib import metadata
import numpy as np
import torch, torch_xla
if not any(ep.name == "trn" for ep in metadata.entry_points(group="torch_xla.plugins")):
  from torch_xla.experimental import plugins
  from jax_trn.torch_plugin import TrnPlugin
  plugins.register_plugin("TRN", TrnPlugin())
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs
xr.use_spmd()
mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
g = torch.Generator().manual_seed(0)
x, w = torch.randn(8, 16, generator=g), torch.randn(16, 6, generator=g)
dev = torch_xla.device()
xt, wt = x.to(dev), w.to(dev)
xs.mark_sharding(xt, mesh, ("data", None))
xs.mark_sharding(wt, mesh, (None, "model"))
h = xt @ wt
xs.mark_sharding(h, mesh, ("data", "model"))
got = torch.tanh(h).sum(1).cpu()
print(json.dumps({"trn": got.tolist(), "cpu": torch.tanh(x @ w).sum(1).tolist()}))
"""


@pytest.mark.slow
def test_torch_xla_spmd_mark_sharding_matches_torch_on_the_cpu():
  """torch_xla's SPMD mode sends GSPMD mhlo.sharding annotations: the same partitioner."""
  pytest.importorskip("torch_xla")
  import json
  from fresh_process import run_python
  result = run_python(_TORCH_XLA_SPMD, {"PJRT_DEVICE": "TRN"}, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  np.testing.assert_allclose(out["trn"], out["cpu"], rtol=1e-5, atol=1e-5)


def test_an_elementwise_sharded_jit_stays_local():
  """An elementwise chain from sharded arguments to a result of the same sharding needs no
  all_gather: every core computes its own shard (partition-spmd's propagate)."""
  from hlo_lowering.program import disassemble
  def make(devices):
    s = NamedSharding(_mesh(devices), P("x", "y"))
    return jax.jit(lambda a, b: jnp.where(a > 0.5, a * b + 1.0, jnp.maximum(-b, a)),
                   in_shardings=(s, s), out_shardings=s)
  rng = np.random.default_rng(2)
  a, b = rng.standard_normal((2, 8, 6), np.float32)
  _on_both(make, a, b)
  text = make(_devices("cpu")).lower(a, b).as_text()
  program = disassemble(harness.compile_code(text.encode(), num_partitions=CORES))
  assert " collective " not in program and " gp_gather " not in program, program


def test_a_reduction_over_a_sharded_dim_runs_on_shards_with_one_all_reduce():
  """The reduce of an operand sharded x by y over dim 1 (split along y): each core reduces its
  shard and one all_reduce over the y groups combines the pieces; no all_gather."""
  from hlo_lowering.program import disassemble
  def make(devices):
    mesh = _mesh(devices)
    return jax.jit(lambda a: jnp.max(a * 2.0, axis=1) + jnp.sum(a, axis=1),
                   in_shardings=NamedSharding(mesh, P("x", "y")),
                   out_shardings=NamedSharding(mesh, P("x")))
  x = np.random.default_rng(3).standard_normal((8, 12)).astype(np.float32)
  _on_both(make, x)
  text = make(_devices("cpu")).lower(x).as_text()
  program = disassemble(harness.compile_code(text.encode(), num_partitions=CORES))
  assert _collectives(program, 0) == 2  # the max's and the sum's
  assert _collectives(program, 1) == 0


def test_shard_map_results_come_back_under_their_out_specs():
  """A shard_map result with no jit-level sharding comes back as the shard_map holds it (under
  its out_specs), as on the CPU backend, jitted or eager: not gathered and replicated."""
  x = np.arange(32, dtype=np.float32).reshape(4, 8)
  for jit in (True, False):
    def make(devices):
      body = shard_map(lambda v: jax.lax.all_gather(v, "y", axis=1, tiled=True),
                       mesh=_mesh(devices), in_specs=P("x", "y"), out_specs=P("x", "y"))
      return jax.jit(body) if jit else body
    got, want = make(_devices("trn"))(x), make(_devices("cpu"))(x)
    _same(got, want)
    assert got.sharding.spec == want.sharding.spec == P("x", "y")
    assert ({s.data.shape for s in got.addressable_shards} ==
            {s.data.shape for s in want.addressable_shards} == {(2, 8)})


_TWO_SCRIPTS_SOURCE = """
import jax
from jax.sharding import NamedSharding, PartitionSpec as P
def make(mesh):
  return jax.jit(lambda a: a * 2 + 1, in_shardings=NamedSharding(mesh, P("x", "y")))
"""


def test_a_sharded_program_served_from_the_cache_keeps_its_partitioned_signature(tmp_path,
                                                                                   monkeypatch):
  """The compile cache serves a program to the same function from other source lines with the
  request's locations, and a multi-core program keeps its partitioned signature there: JAX reads
  the output shardings from it (the request's module, with its sdy ops, is not one it can read)."""
  monkeypatch.setenv("TRN_CACHE_DIR", str(tmp_path))
  mesh, x = _mesh(_devices("trn")), np.arange(64, dtype=np.float32).reshape(8, 8)
  outs = []
  for filename, blank_lines in (("scripts/first.py", 0), ("scripts/second.py", 5)):
    scope = {}
    exec(compile("\n" * blank_lines + _TWO_SCRIPTS_SOURCE, filename, "exec"), scope)
    f = scope["make"](mesh)
    assert "trn.neuroncore_program" in f.lower(x).compile().as_text()
    outs.append(f(x))
  assert outs[0].sharding.spec == outs[1].sharding.spec == P("x", "y")
  _same(outs[1], x * 2 + 1)


def test_a_program_over_several_cores_with_no_results_runs():
  """A multi-core program with no results reports XLA's empty tuple output, replicated: an eager
  shard_map runs each primitive of its body as such a program, here one with no outputs."""
  from jax._src import core
  no_results = core.Primitive("no_results")
  no_results.multiple_results = True
  no_results.def_impl(lambda: [])
  no_results.def_abstract_eval(lambda: [])

  def body():
    no_results.bind()

  assert shard_map(body, mesh=_mesh(_devices("trn")), in_specs=(), out_specs=None,
                   check_vma=False)() is None


def test_uneven_replica_groups_are_refused_naming_the_collective():
  """psum over axis_index_groups of unequal sizes (StableHLO pads them with -1) is a clear
  UNIMPLEMENTED naming the op, not an invalid program."""
  f = jax.pmap(lambda v: jax.lax.psum(v, "i", axis_index_groups=[[0], [1, 2, 3]]), "i",
               devices=_devices("trn"))
  with pytest.raises(jax.errors.JaxRuntimeError,
                     match=r"UNIMPLEMENTED: stablehlo\.all_reduce.*replica groups of unequal "
                           r"sizes \(1, 3 members\)"):
    f(np.arange(8, dtype=np.float32).reshape(4, 2))


def test_pmap_inside_a_loop_or_a_cond_that_reads_no_split_value():
  """A pmap under lax.map (a while loop) or lax.cond over whole values: the loop and the branch
  are partitioned for the manual computation they hold (it used to survive as an op with no
  lowering)."""
  x = np.arange(12, dtype=np.float32).reshape(3, 4)

  def make(devices):
    psum = jax.pmap(lambda t: jax.lax.psum(t, "i") * 2 + t, "i", devices=devices)
    return jax.jit(lambda v: (jax.lax.map(psum, v),
                              jax.lax.cond(v[0, 0] < 1, psum, lambda t: -t, v[1])))
  got, want = make(_devices("trn"))(x), make(_devices("cpu"))(x)
  for g, w in zip(got, want):
    _same(g, w)


def test_shard_map_nested_in_a_partial_manual_shard_map():
  """A shard_map over y inside a shard_map manual over x only: the inner one is inlined over y
  (operands sliced along y, its psum over y's cores, results gathered back along y)."""
  x = np.arange(64, dtype=np.float32).reshape(8, 8) * 0.25

  def make(devices):
    mesh = _mesh(devices)

    def outer(a):
      inner = shard_map(lambda b: jax.lax.psum(b * 2, "y") + b, in_specs=P(None, "y"),
                        out_specs=P(None, "y"))
      return inner(jnp.tanh(a)) - jax.lax.psum(a, "x")
    f = jax.jit(shard_map(outer, in_specs=P("x"), out_specs=P("x"), axis_names={"x"},
                          check_vma=False))

    def under_mesh(a):
      with jax.set_mesh(mesh):
        return f(a)
    return under_mesh
  _on_both(make, x)


def test_a_donated_sharded_argument_is_donated_as_on_the_cpu():
  """A sharded jit marks donations `jax.buffer_donor` (the compiler pairs them with outputs):
  each donor takes the first unaliased output of its type, as XLA does, so the same arguments
  are deleted on trn as on the CPU backend, and the results agree."""
  ones = np.ones((8, 4), np.float32)
  deleted = {}
  for platform in ("trn", "cpu"):
    s = NamedSharding(_mesh(_devices(platform)), P("x", "y"))
    a, b = jax.device_put(ones, s), jax.device_put(ones * 3, s)
    total, bumped = jax.jit(lambda u, v: (u.sum(), v + 1), donate_argnums=(0, 1))(a, b)
    _same(total, np.float32(32))
    _same(bumped, ones * 4)
    deleted[platform] = (a.is_deleted(), b.is_deleted())
  assert deleted["trn"] == deleted["cpu"] == (True, False)


def test_a_constraint_on_an_auto_axis_in_a_partial_manual_body_reaches_the_result():
  """shard_map manual over y only, its body constraining its result along the auto axis x and
  the out spec leaving x open: the result comes back split along x (sliced from the body's
  whole value, nothing moved), as XLA's propagation returns it on the CPU."""
  x = _X * 1.5
  results = {}
  for platform in ("trn", "cpu"):
    mesh = _mesh(_devices(platform))
    split = NamedSharding(mesh, P("x"))
    body = lambda v: jax.lax.with_sharding_constraint(v * v, split)
    f = jax.jit(shard_map(body, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False,
                          axis_names=frozenset({"y"})))
    results[platform] = f(jax.device_put(x, split))
  got, want = results["trn"], results["cpu"]
  assert got.sharding.spec == want.sharding.spec == P("x")
  _same(got, want)
