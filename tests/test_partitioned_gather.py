"""A gather runs on shards when its indices are split along batch dims and its operand along dims
it takes whole (partition/local_indexing.py): an embedding lookup of a batch-split token array
looks up each core's own rows; a table split along its looked-up rows is gathered first. Its
gradient, a scatter-add into zeros, scatters each core's rows into partial sums. Every case runs
on trn and on JAX's CPU backend over as many devices."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import sharded_reference as ref
from jax_trn import compilation

_VOCAB, _WIDTH = 32, 16


def _lookup(table, ids):
  return jnp.take(table, ids, axis=0, mode="clip") * 2.0


def _make(mesh_shape, table_spec, ids_spec, out_spec):
  def make(devices):
    mesh = Mesh(np.array(devices).reshape(mesh_shape), ("x", "y")[:len(mesh_shape)])
    named = lambda spec: NamedSharding(mesh, P(*spec))
    return jax.jit(_lookup, in_shardings=(named(table_spec), named(ids_spec)),
                   out_shardings=named(out_spec))
  return make


def _inputs():
  rng = np.random.default_rng(0)
  return (rng.standard_normal((_VOCAB, _WIDTH)).astype(np.float32),
          rng.integers(-2, _VOCAB + 2, (8, 4)).astype(np.int32))  # some out of range: clipped


@pytest.mark.parametrize("cores", [2, 4])
@pytest.mark.parametrize("ids_spec, out_spec", [(("x", None), ("x", None, None)),
                                                ((None, "x"), (None, "x", None))])
def test_an_embedding_lookup_of_split_ids_runs_on_shards(cores, ids_spec, out_spec):
  make = _make((cores,), (None, None), ids_spec, out_spec)
  ref.on_both(make, *_inputs(), cores=cores)
  assert not compilation.last_report().replicated_ops
  assert ref.collectives(make, *_inputs(), cores=cores) == {}


def test_a_lookup_in_a_table_split_along_its_width_runs_on_shards_over_a_2d_mesh():
  make = _make((2, 2), (None, "y"), ("x", None), ("x", None, "y"))
  ref.on_both(make, *_inputs(), cores=4)
  assert not compilation.last_report().replicated_ops
  assert ref.collectives(make, *_inputs(), cores=4) == {}


def test_a_lookup_in_a_table_split_along_its_rows_gathers_the_table_once():
  make = _make((4,), ("x", None), ("x", None), ("x", None, None))
  ref.on_both(make, *_inputs(), cores=4)
  assert not compilation.last_report().replicated_ops
  assert ref.collectives(make, *_inputs(), cores=4) == {"all_gather": 1}


def _lookup_grad(table, ids, cotangent):
  """The table's gradient of a lookup: a scatter-add of the cotangent rows into zeros."""
  return jax.vjp(lambda t: _lookup(t, ids), table)[1](cotangent)[0]


@pytest.mark.parametrize("cores", [2, 4])
@pytest.mark.parametrize("table_spec", [(None, None), ("x", None)])
def test_a_lookups_gradient_scatters_each_cores_rows_into_partial_sums(cores, table_spec):
  """Replicated gradient: one all_reduce of the partial tables; split: one reduce_scatter."""
  def make(devices):
    mesh = Mesh(np.array(devices), ("x",))
    named = lambda *spec: NamedSharding(mesh, P(*spec))
    return jax.jit(_lookup_grad, in_shardings=(named(), named("x", None), named("x", None, None)),
                   out_shardings=named(*table_spec))
  table, ids = _inputs()
  cotangent = np.random.default_rng(1).standard_normal((8, 4, _WIDTH)).astype(np.float32)
  ref.on_both(make, table, ids, cotangent, cores=cores)
  assert not compilation.last_report().replicated_ops
  want = {"all_reduce": 1} if table_spec == (None, None) else {"reduce_scatter": 1}
  assert ref.collectives(make, table, ids, cotangent, cores=cores) == want
