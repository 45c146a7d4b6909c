"""Shardings flow backward (partition/propagation.py, docs/compiler.md "Partitioning"): from
`out_shardings` and `with_sharding_constraint` to the ops producing those values, so replicated
inputs are sliced once and the ops after run on shards; an iota (a causal mask) is generated on
each core at its offset. Each case runs on trn and on JAX's CPU backend over as many devices."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import sharded_reference as ref
from jax_trn import profile


def _jit(f, mesh_shape, ins, out):
  def make(devices):
    mesh = Mesh(np.array(devices).reshape(mesh_shape), ("x", "y")[:len(mesh_shape)])
    named = lambda spec: NamedSharding(mesh, P(*spec))
    outs = tuple(map(named, out)) if isinstance(out, list) else named(out)
    return jax.jit(f, in_shardings=tuple(named(s) for s in ins), out_shardings=outs)
  return make


def _scaled_tanh(x, b):
  return jnp.tanh(x.T * 2.0 + b[None, :]).reshape(4, -1, x.shape[0])


def _bytes(make, args, cores, ops) -> list[int]:
  """The bytes each core's ops named `ops` move or touch."""
  devices = ref.devices("trn", cores)
  with profile.trace():
    jax.block_until_ready(make(devices)(*args))
  return [sum(t.bytes for t in profile.last_execution(d).by_op() if t.op in ops)
          for d in devices]


@pytest.mark.parametrize("cores", [2, 4])
@pytest.mark.parametrize("spec", [("x", None, None), (None, "x", None), (None, None, "x")])
def test_a_sharded_output_runs_its_producers_on_shards_of_replicated_inputs(cores, spec):
  rng = np.random.default_rng(0)
  args = rng.standard_normal((16, 32), np.float32), rng.standard_normal((16,), np.float32)
  make = _jit(_scaled_tanh, (cores,), [(), ()], spec)
  ref.on_both(make, *args, cores=cores)
  assert ref.collectives(make, *args, cores=cores) == {}


@pytest.mark.parametrize("spec", [("x", None, None), (None, None, "x")])
def test_producers_of_a_sharded_output_do_a_share_of_the_work(spec):
  """(None, "x", None) is no such case: its shards are no contiguous blocks of x.T's rows."""
  rng = np.random.default_rng(1)
  args = rng.standard_normal((256, 128), np.float32), rng.standard_normal((256,), np.float32)
  ops = {"stablehlo." + name for name in ("transpose", "multiply", "add", "tanh")}
  one = _bytes(_jit(_scaled_tanh, (1,), [(), ()], spec), args, 1, ops)[0]
  four = _bytes(_jit(_scaled_tanh, (4,), [(), ()], spec), args, 4, ops)
  assert one > 0 and four == [one // 4] * 4, (one, four)


def test_a_sharding_constraint_splits_the_ops_before_it():
  """sin(x) + 1 is wanted split by the constraint: it runs on x's shards, the product after it
  too, and the replicated result is one all_gather."""
  def make(devices):
    mesh = Mesh(np.array(devices), ("x",))
    rows = NamedSharding(mesh, P("x", None))
    return jax.jit(lambda x: jax.lax.with_sharding_constraint(jnp.sin(x) + 1.0, rows) * 3.0,
                   out_shardings=NamedSharding(mesh, P()))
  x = np.random.default_rng(2).standard_normal((8, 12)).astype(np.float32)
  ref.on_both(make, x, cores=4)
  assert ref.collectives(make, x, cores=4) == {"all_gather": 1}


def test_a_value_also_read_whole_is_not_split_for_its_sharded_use():
  """y feeds a replicated and a sharded result: it is computed whole once (no gather)."""
  def f(x):
    y = jnp.exp(x)
    return y, y * 2.0
  make = _jit(f, (4,), [()], [(), ("x", None)])
  x = np.random.default_rng(3).standard_normal((8, 4)).astype(np.float32)
  ref.on_both(make, x, cores=4)
  assert ref.collectives(make, x, cores=4) == {}


def _causal_scores(q, k):
  scores = jnp.einsum("bqd,bkd->bqk", q, k)
  mask = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))
  return jnp.where(mask[None], scores, -1e9)


@pytest.mark.parametrize("mesh_shape, spec", [
    ((4,), ("x", None, None)),            # batch split: the mask is whole per core
    ((4,), (None, "x", None)),            # query rows split: each core its rows of the mask
    ((2, 2), ("x", "y", None)),
])
def test_a_causal_mask_is_generated_on_each_core_at_its_offset(mesh_shape, spec):
  cores = int(np.prod(mesh_shape))
  rng = np.random.default_rng(4)
  q, k = rng.standard_normal((2, 4, 16, 8), np.float32)
  make = _jit(_causal_scores, mesh_shape, [spec, (spec[0], None, None)], spec)
  ref.on_both(make, q, k, cores=cores)
  assert ref.collectives(make, q, k, cores=cores) == {}


@pytest.mark.parametrize("spec", [("x", None), (None, "x")])
def test_a_matmul_of_replicated_operands_into_a_split_result_divides_its_flops(spec):
  rng = np.random.default_rng(5)
  a, b = rng.standard_normal((2, 32, 64), np.float32)
  make = lambda cores: _jit(lambda a, b: jnp.tanh(a @ b.T), (cores,), [(), ()], spec)
  ref.on_both(make(4), a, b, cores=4)
  assert ref.collectives(make(4), a, b, cores=4) == {}
  flops = []
  for cores in (1, 4):
    devices = ref.devices("trn", cores)
    jax.block_until_ready(make(cores)(devices)(a, b))
    flops.append([profile.last_execution(d).matmul_flops for d in devices])
  (one,), four = flops
  assert one > 0 and four == [one // 4] * 4, flops
