"""jit over NamedSharding divides the compute between the cores (partition-spmd's local rules,
docs/multi-device.md "Partitioned compute"): every case runs on 4 simulated cores and on JAX's
CPU backend over 4 host devices (tests/conftest.py) and must agree; the programs are checked for
the collectives they need and nothing more."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import sharded_reference
from jax_trn import compilation, profile

CORES = 4


def _devices(platform, n=CORES):
  return sharded_reference.devices(platform, n)


def _on_both(make, *args):
  return sharded_reference.on_both(make, *args, cores=CORES)


def _collectives(make, *args):
  return sharded_reference.collectives(make, *args, cores=CORES)


def _mlp_step(params, x, y):
  def loss(params):
    w1, w2 = params
    return jnp.mean((jax.nn.relu(x @ w1) @ w2 - y) ** 2)
  value, grads = jax.value_and_grad(loss)(params)
  return [p - 0.1 * g for p, g in zip(params, grads)], value


def _mlp(mode):
  def make(devices):
    mesh = Mesh(np.array(devices), ("a",))
    named = lambda *spec: NamedSharding(mesh, P(*spec))
    if mode == "fsdp":  # parameters and batch sharded over the data axis
      params, batch = [named("a", None), named("a", None)], named("a", None)
    elif mode == "tp":  # Megatron: column parallel, then row parallel
      params, batch = [named(None, "a"), named("a", None)], named()
    else:
      params, batch = [named(), named()], named()
    return jax.jit(_mlp_step, in_shardings=(params, batch, batch), out_shardings=(params, named()))
  return make


def _mlp_inputs():
  rng = np.random.default_rng(7)
  return ([rng.standard_normal((64, 128), np.float32) * 0.1,
           rng.standard_normal((128, 64), np.float32) * 0.1],
          rng.standard_normal((32, 64), np.float32), rng.standard_normal((32, 64), np.float32))


def _matmul_flops_per_core(make, args, n) -> list[int]:
  jax.block_until_ready(make(_devices("trn", n))(*args))
  return [profile.last_execution(d).matmul_flops for d in _devices("trn", n)]


@pytest.mark.parametrize("mode", ["fsdp", "tp"])
def test_an_mlp_training_step_divides_its_matmul_flops_between_the_cores(mode):
  args = _mlp_inputs()
  _on_both(_mlp(mode), *args)
  one_core = _matmul_flops_per_core(_mlp("replicated"), args, 1)[0]
  assert _matmul_flops_per_core(_mlp(mode), args, CORES) == [one_core // CORES] * CORES
  assert not compilation.last_report().replicated_ops


def test_megatron_tensor_parallel_mlp_needs_one_all_reduce():
  assert _collectives(_mlp("tp"), *_mlp_inputs()) == {"all_reduce": 1}


def test_fsdp_mlp_reduce_scatters_its_weight_gradients():
  """FSDP: weights gathered for the matmuls, the weight updates' partial sums reduce_scattered
  straight to the parameters' shards (no all_reduce but the loss's)."""
  counts = _collectives(_mlp("fsdp"), *_mlp_inputs())
  assert counts["reduce_scatter"] >= 1 and counts["all_reduce"] == 1, counts


def _sharded(spec_in, spec_out, f):
  def make(devices):
    mesh = Mesh(np.array(devices).reshape(2, 2), ("x", "y"))
    ins = tuple(NamedSharding(mesh, P(*s)) for s in spec_in)
    return jax.jit(f, in_shardings=ins, out_shardings=NamedSharding(mesh, P(*spec_out)))
  return make


def test_a_batched_dot_over_a_2d_mesh_runs_on_shards_without_collectives():
  make = _sharded([("x", None, "y"), ("x", "y", None)], ("x", None, None),
                  lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b))
  rng = np.random.default_rng(1)
  a, b = rng.standard_normal((4, 6, 8), np.float32), rng.standard_normal((4, 8, 10), np.float32)
  _on_both(make, a, b)
  # The contraction over y's shards is partial: one all_reduce, the batch stays split on x.
  assert _collectives(make, a, b) == {"all_reduce": 1}


def test_a_contraction_over_a_sharded_dim_into_a_sharded_result_is_one_reduce_scatter():
  make = _sharded([(None, "x"), ("x", None)], ("x", None), lambda a, b: a @ b)
  rng = np.random.default_rng(2)
  a, b = rng.standard_normal((8, 12), np.float32), rng.standard_normal((12, 6), np.float32)
  _on_both(make, a, b)
  assert _collectives(make, a, b) == {"reduce_scatter": 1}


def test_moving_a_sharded_axis_between_dims_is_one_all_to_all():
  make = _sharded([("x", None), (None, "x")], ("x", None), lambda a, b: a * b + 1.0)
  rng = np.random.default_rng(3)
  a, b = rng.standard_normal((2, 8, 8), np.float32)
  _on_both(make, a, b)
  assert _collectives(make, a, b) == {"all_to_all": 1}


def test_data_movement_ops_keep_their_operands_sharding():
  """transpose, reshape (merging a sharded major dim), broadcast_in_dim, slice and dynamic_slice
  (whole along the sharded dim), concatenate (along an unsharded dim): all on shards."""
  def f(a, i):
    t = jnp.transpose(a, (1, 0, 2))                      # [6, 8, 4] split on dim 1
    r = t.reshape(6, 32)[:, None, :] * jnp.ones((6, 3, 32))  # dim 2 split (8 x 4 merged)
    s = jnp.concatenate([r[:4], r[1:5] * 2.0], axis=1)   # [4, 6, 32]
    return jax.lax.dynamic_slice_in_dim(s, i, 2, axis=0)
  make = _sharded([("x", None, None), ()], (None, None, "x"), f)
  a = np.random.default_rng(4).standard_normal((8, 6, 4)).astype(np.float32)
  got = _on_both(make, a, np.int32(1))
  assert got.shape == (2, 6, 32)
  assert _collectives(make, a, np.int32(1)) == {}


def test_the_compile_report_names_the_ops_run_replicated():
  """A scatter into a split array (not into zeros) runs replicated on the gathered array."""
  make = _sharded([("x", None)], ("x", None), lambda a: (a * 2.0).at[1].set(5.0) + 1.0)
  a = np.random.default_rng(5).standard_normal((8, 6)).astype(np.float32)
  _on_both(make, a)
  replicated = compilation.last_report().replicated_ops
  assert len(replicated) == 1 and replicated[0].startswith("stablehlo.scatter at "), replicated
  report = compilation.last_report().format()
  assert "run replicated on gathered shards: stablehlo.scatter" in report


def test_scaling_by_a_reduction_over_the_shards_runs_on_shards():
  """a / sum(a) + a * max(a): each core reduces its shard, one all_reduce per reduction, the
  broadcast scalars scale the shards; no all_gather."""
  make = _sharded([("x", "y")], ("x", "y"), lambda a: a / jnp.sum(a) + a * jnp.max(a))
  a = np.random.default_rng(6).uniform(1, 2, (8, 6)).astype(np.float32)
  _on_both(make, a)
  assert _collectives(make, a) == {"all_reduce": 2}
