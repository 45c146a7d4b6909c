"""A while loop over split carried values runs on shards (partition/local_control_flow.py): each
carried value keeps one sharding for the whole loop, the body's collectives run on every trip,
the predicate is whole; a cond's branches reading split values run on shards too. Every case
runs on trn and on JAX's CPU backend over as many devices."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import sharded_reference as ref
from jax_trn import compilation, profile


def _normalize_steps(x):
  """Five trips of x / sum(x) + 1: a reduction over the split dim inside the body."""
  return jax.lax.fori_loop(0, 5, lambda i, a: a / jnp.sum(a) + 1.0, x)


def _until_large(x):
  """A trip count known only at run time: the predicate reads a max over the shards."""
  return jax.lax.while_loop(lambda a: jnp.max(a) < 50.0, lambda a: a * 1.5 + 0.25, x)


@pytest.mark.parametrize("cores", [2, 4])
@pytest.mark.parametrize("spec", [("x", None), (None, "x")])
@pytest.mark.parametrize("f", [_normalize_steps, _until_large])
def test_a_loop_over_split_values_runs_on_shards(f, spec, cores):
  def make(devices):
    named = NamedSharding(Mesh(np.array(devices), ("x",)), P(*spec))
    return jax.jit(f, in_shardings=named, out_shardings=named)
  x = np.random.default_rng(0).uniform(1, 2, (8, 8)).astype(np.float32)
  ref.on_both(make, x, cores=cores)
  assert not compilation.last_report().replicated_ops
  assert set(ref.collectives(make, x, cores=cores)) <= {"all_reduce"}


def _layers(ws, x):
  """A stack of layers scanned over (nn.scan's form): each trip slices its layer's weights."""
  def layer(h, w):
    return jnp.tanh(h @ w), None
  return jax.lax.scan(layer, x, ws)[0]


def _scan(devices, mesh_shape):
  mesh = Mesh(np.array(devices).reshape(mesh_shape), ("data", "model")[:len(mesh_shape)])
  batch = NamedSharding(mesh, P("data"))
  return jax.jit(_layers, in_shardings=(NamedSharding(mesh, P()), batch), out_shardings=batch)


def test_a_scan_over_layers_of_a_batch_split_input_does_a_share_of_the_matmuls():
  rng = np.random.default_rng(1)
  ws = rng.standard_normal((3, 32, 32)).astype(np.float32) * 0.2
  x = rng.standard_normal((16, 32)).astype(np.float32)
  ref.on_both(lambda devices: _scan(devices, (4,)), ws, x, cores=4)
  assert not compilation.last_report().replicated_ops
  flops = []
  for cores in (1, 4):
    devices = ref.devices("trn", cores)
    jax.block_until_ready(_scan(devices, (cores,))(ws, x))
    flops.append([profile.last_execution(d).matmul_flops for d in devices])
  (one,), four = flops
  assert one > 0 and four == [one // 4] * 4, flops


def _branchy(x, flag):
  """A cond whose branches read the split x, one of them reducing over the split dim."""
  return jax.lax.cond(flag > 0, lambda a: a * 2.0 + jnp.sum(a), lambda a: jnp.tanh(a) - 1.0, x)


@pytest.mark.parametrize("flag", [1, -1])
@pytest.mark.parametrize("spec", [("x", None), (None, "x")])
def test_a_cond_over_split_values_runs_its_branches_on_shards(spec, flag):
  def make(devices):
    mesh = Mesh(np.array(devices), ("x",))
    named = NamedSharding(mesh, P(*spec))
    return jax.jit(_branchy, in_shardings=(named, NamedSharding(mesh, P())), out_shardings=named)
  x = np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32)
  ref.on_both(make, x, np.int32(flag), cores=4)
  assert not compilation.last_report().replicated_ops
  assert set(ref.collectives(make, x, np.int32(flag), cores=4)) <= {"all_reduce"}
