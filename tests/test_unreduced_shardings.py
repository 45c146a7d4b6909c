"""Unreduced shardings (`P(unreduced={"x"})`, docs/multi-device.md "Partitioning"): a value held
as per-core partial sums, reduced exactly once where a reader needs it, and returned to JAX as
the partial sums under the unreduced sharding it expects. Every case runs on trn and on JAX's
CPU backend on the same devices; per-core shards are compared as well as the values."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import shard_map
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from jax._src.lib import xla_client

from hlo_lowering.passes.partition.mesh import Mesh
from hlo_lowering.passes.partition.sharding import Sharding


def _mesh(platform, shape=(4,), names=("x",)):
  devices = jax.devices(platform)[:int(np.prod(shape))]
  return jax.make_mesh(shape, names, axis_types=(AxisType.Explicit,) * len(shape),
                       devices=devices)


def _shards(array):
  return [np.asarray(s.data) for s in sorted(array.addressable_shards, key=lambda s: s.device.id)]


def _on_both(run, shape=(4,), names=("x",)):
  """run(mesh) -> an array, on trn and on the CPU: the same spec, values and per-core shards."""
  results = {}
  for platform in ("trn", "cpu"):
    mesh = _mesh(platform, shape, names)
    with jax.set_mesh(mesh):
      results[platform] = run(mesh)
  got, want = results["trn"], results["cpu"]
  assert got.sharding.spec == want.sharding.spec
  for g, w in zip(_shards(got), _shards(want)):
    np.testing.assert_array_equal(g, w)
  return got


def test_partial_sum_is_summed_once_where_shard_map_reads_it():
  """A contraction over a split dim left unreduced, then psum'd in a shard_map: summed once
  (before, read as replicated, it was summed twice)."""
  a = np.arange(8.0, dtype=np.float32).reshape(2, 4)
  b = np.arange(24.0, dtype=np.float32).reshape(4, 6)

  def run(mesh):
    summed = shard_map(lambda v: jax.lax.psum(v, "x"), in_specs=P(unreduced={"x"}),
                       out_specs=P())
    f = jax.jit(lambda u, v: summed(jnp.einsum("ab,bc->ac", u, v,
                                               out_sharding=P(unreduced={"x"}))))
    return f(jax.device_put(a, P(None, "x")), jax.device_put(b, P("x", None)))

  got = _on_both(run, (2,))
  np.testing.assert_array_equal(np.asarray(got), a @ b)


def test_shard_map_result_unreduced_keeps_each_cores_partial_sums():
  """out_specs=P(unreduced=...) returns each core's own value; a later program reading it
  unreduced and psum-ing it sums them; resharding to replicated adds them up."""
  x = (np.arange(16, dtype=np.int32) * 7919) % 1013

  def run(mesh):
    f = jax.jit(shard_map(lambda v: v * 3, in_specs=P("x"), out_specs=P(unreduced={"x"})))
    out = f(jax.device_put(x, P("x")))
    assert out.sharding == NamedSharding(mesh, P(None, unreduced={"x"}))
    return out

  _on_both(run)

  def summed(mesh):
    out = jax.jit(shard_map(lambda v: v * 3, in_specs=P("x"),
                            out_specs=P(unreduced={"x"})))(jax.device_put(x, P("x")))
    g = jax.jit(shard_map(lambda v: jax.lax.psum(v, "x"), in_specs=P(unreduced={"x"}),
                          out_specs=P()))
    return g(out)

  got = _on_both(summed)
  np.testing.assert_array_equal(np.asarray(got), (x * 3).reshape(4, 4).sum(0))

  def resharded(mesh):
    out = jax.jit(shard_map(lambda v: v * 3, in_specs=P("x"),
                            out_specs=P(unreduced={"x"})))(jax.device_put(x, P("x")))
    return jax.jit(lambda v: jax.sharding.reshard(v, P()))(out)

  _on_both(resharded)


def test_whole_value_made_unreduced_is_held_by_the_first_core():
  """A replicated value resharded to unreduced: the first core along the axes holds it, the
  others zeros (as XLA does), so any later sum counts it once."""
  _on_both(lambda mesh: jax.jit(lambda v: jax.reshard(v * 2, P(unreduced={"x"})))(
      jnp.arange(8.0)))


def test_split_and_unreduced_on_a_two_d_mesh():
  """P("x", None, unreduced={"y"}): rows split by x, partial sums over y (a matmul contracting
  the y-split dim), then resharded to the summed value."""
  a = np.arange(8.0, dtype=np.float32).reshape(2, 4)
  b = np.arange(8.0, dtype=np.float32).reshape(4, 2)

  def run(mesh):
    f = jax.jit(shard_map(lambda u, v: u @ v, in_specs=(P("x", "y"), P("y", None)),
                          out_specs=P("x", None, unreduced={"y"})))
    out = f(jax.device_put(a, P("x", "y")), jax.device_put(b, P("y", None)))
    assert out.sharding == NamedSharding(mesh, P("x", None, unreduced={"y"}))
    return out

  _on_both(run, (2, 2), ("x", "y"))
  got = _on_both(lambda mesh: jax.sharding.reshard(run(mesh), P("x", None)), (2, 2), ("x", "y"))
  np.testing.assert_array_equal(np.asarray(got), a @ b)


@pytest.mark.parametrize("dims, unreduced", [
    ((("x",), ()), ("y",)),
    (((), ()), ("x",)),
    (((), ()), ("y",)),
    ((("y",), ()), ()),
])
def test_hlo_sharding_text_is_xlas(dims, unreduced):
  """The executable's HLO sharding text of an unreduced sharding is the one XLA prints for the
  same OpSharding (unreduced and replicated devices in last tile dims)."""
  mesh = Mesh.parse('<["x"=2, "y"=2]>')
  s = Sharding("mesh", dims, unreduced)
  op = xla_client.OpSharding()
  op.type = xla_client.OpSharding.Type.OTHER
  tiles = [s.shards(mesh, d) for d in range(len(dims))]
  used = {a for d in dims for a in d}
  last, kinds = [], []
  for axes, kind in ((list(unreduced), xla_client.OpSharding.Type.UNREDUCED),
                     ([n for n, _ in mesh.axes if n not in used and n not in unreduced],
                      xla_client.OpSharding.Type.REPLICATED)):
    if axes:
      last.append(axes)
      kinds.append(kind)
  op.tile_assignment_dimensions = tiles + [int(np.prod([mesh.axis_size(a) for a in axes]))
                                           for axes in last]
  assignment = np.zeros(op.tile_assignment_dimensions, np.int64)
  for device in mesh.device_ids:
    index = [mesh.index_along(device, list(d)) for d in dims]
    index += [mesh.index_along(device, axes) for axes in last]
    assignment[tuple(index)] = device
  op.tile_assignment_devices = [int(d) for d in assignment.reshape(-1)]
  op.last_tile_dims = kinds
  assert s.hlo_text(mesh) == str(xla_client.HloSharding.from_proto(op))
