"""pad, reduce_window, convolution and sort run on shards along the dims they treat element by
element (partition/local_window_ops.py); split across a dim they reach across, the split moves
to another dim (pad, reduce_window, sort) or the op runs replicated (convolution); every case runs on trn and on JAX's CPU backend over as many devices,
split on each dimension in turn."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import sharded_reference as ref
from jax_trn import compilation, profile


def _jit(f, mesh_shape, spec):
  """f over a mesh of `mesh_shape` with its operand and result split by `spec`."""
  def make(devices):
    mesh = Mesh(np.array(devices).reshape(mesh_shape), ("x", "y")[:len(mesh_shape)])
    named = NamedSharding(mesh, P(*spec))
    return jax.jit(f, in_shardings=named, out_shardings=named)
  return make


def _run(f, x, mesh_shape, spec) -> list[str]:
  """Runs f on both backends; the ops trn ran replicated."""
  ref.on_both(_jit(f, mesh_shape, spec), x, cores=int(np.prod(mesh_shape)))
  return compilation.last_report().replicated_ops


def _max_pool(x):
  """2 x 2 max pooling over dims 2 and 3 of an NCHW batch."""
  return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def _conv(x):
  kernel = jnp.arange(8 * 4 * 3 * 3, dtype=jnp.float32).reshape(8, 4, 3, 3) / 100.0
  return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME")


def _pad(x):
  return jnp.pad(x, ((0, 0), (0, 0), (1, 3), (0, 4)), constant_values=-1.0)


def _sort(x):
  return jnp.sort(x, axis=3)


_OPS = {"reduce_window": (_max_pool, {2, 3}), "convolution": (_conv, {1, 2, 3}),
        "pad": (_pad, {2, 3}), "sort": (_sort, {3})}


@pytest.mark.parametrize("cores", [2, 4])
@pytest.mark.parametrize("dim", [0, 1, 2, 3])
@pytest.mark.parametrize("name", sorted(_OPS))
def test_an_op_split_across_a_dim_it_reaches_across_is_resplit_or_replicated(name, dim, cores):
  """Along a dim it treats element by element: on shards, nothing moved. Across one: pad,
  reduce_window and sort move the split to another dim (an all_to_all there and one back to
  the result's sharding); convolution runs replicated on the gathered input."""
  f, reaching = _OPS[name]
  x = np.random.default_rng(dim).standard_normal((4, 4, 8, 8)).astype(np.float32)
  spec = tuple("x" if d == dim else None for d in range(4))
  make = _jit(f, (cores,), spec)
  replicated = _run(f, x, (cores,), spec)
  collectives = ref.collectives(make, x, cores=cores)
  if dim not in reaching:
    assert not replicated and not collectives, (replicated, collectives)
  elif name == "convolution":
    assert [r.split()[0] for r in replicated] == ["stablehlo.convolution"], replicated
  else:
    assert not replicated and collectives == {"all_to_all": 2}, (replicated, collectives)


@pytest.mark.parametrize("name", sorted(_OPS))
def test_an_op_over_a_2d_mesh_runs_on_shards_split_twice(name):
  f, _ = _OPS[name]
  x = np.random.default_rng(5).standard_normal((4, 4, 8, 8)).astype(np.float32)
  spec = ("x", None, None, None) if name == "convolution" else ("x", "y", None, None)
  assert not _run(f, x, (2, 2), spec)


def test_a_batch_split_convolution_does_a_share_of_the_matmul_work():
  x = np.random.default_rng(6).standard_normal((8, 4, 8, 8)).astype(np.float32)
  flops = []
  for cores in (1, 4):
    devices = ref.devices("trn", cores)
    jax.block_until_ready(_jit(_conv, (cores,), ("x", None, None, None))(devices)(x))
    flops.append([profile.last_execution(d).matmul_flops for d in devices])
  (one,), four = flops
  assert one > 0 and four == [one // 4] * 4, flops


def test_a_convolution_with_its_kernel_split_by_output_features_splits_the_output_features():
  def make(devices):
    mesh = Mesh(np.array(devices), ("x",))
    named = lambda *spec: NamedSharding(mesh, P(*spec))
    return jax.jit(lambda x, k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME"),
                   in_shardings=(named(), named("x")), out_shardings=named(None, "x"))
  rng = np.random.default_rng(7)
  x, kernel = (rng.standard_normal((2, 4, 8, 8)).astype(np.float32),
               rng.standard_normal((8, 4, 3, 3)).astype(np.float32))
  ref.on_both(make, x, kernel, cores=4)
  assert not compilation.last_report().replicated_ops
  assert ref.collectives(make, x, kernel, cores=4) == {}
