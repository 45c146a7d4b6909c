"""fold-convert-into-reduce (passes/fold_convert_into_reduce.py): a reduce of a widening float
convert reads the narrow operand itself. The outputs are bit-identical to the program compiled
without the pass, the fp32 copy no longer crosses HBM, and what the pass must leave alone it
leaves."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from cpu_reference import assert_close
from hlo_lowering import importer, pipeline
from hlo_lowering.ir import walk_ops
from hlo_lowering.program import read_program

_PASS = "fold-convert-into-reduce"
_REDUCERS = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min}


def _run(f, args, skipped=()):
  program = harness.compile_without(f, args, skipped)
  outputs, profile = harness.native().run_program(program, [np.asarray(a) for a in args])
  return outputs, profile, program


def _ops(f, args) -> list[str]:
  module = importer.import_program(jax.jit(f).lower(*args).as_text().encode(), "mlir")
  pipeline.run_pipeline(module)
  return [op.name for op in walk_ops(module.main.body)]


# (input shape, dtype, reduced axes): the three layouts of lowering/reduce.py (kept columns
# contiguous, rows on partitions, a full reduction spread over partitions), partial tiles.
CASES = [((520, 300), ml_dtypes.bfloat16, (0,)), ((300, 7), np.float16, (0,)),
         ((4, 300, 130), ml_dtypes.bfloat16, (0, 2)), ((1024, 512), ml_dtypes.bfloat16, (0, 1)),
         ((3, 64, 33), ml_dtypes.float8_e4m3fn, (0, 1))]


@pytest.mark.parametrize("reducer", sorted(_REDUCERS))
@pytest.mark.parametrize("shape, dtype, axes", CASES,
                         ids=[f"{s}-{np.dtype(d).name}-{a}" for s, d, a in CASES])
def test_folded_reduce_has_the_bits_of_the_unfolded_one_and_moves_fewer_bytes(shape, dtype, axes,
                                                                              reducer, cpu):
  x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
  f = lambda x: _REDUCERS[reducer](x.astype(jnp.float32), axis=axes)  # noqa: E731
  folded, folded_profile, program = _run(f, [x])
  unfolded, unfolded_profile, _ = _run(f, [x], (_PASS,))
  assert [a.tobytes() for a in folded] == [a.tobytes() for a in unfolded]
  assert folded_profile["hbm_bytes"] < unfolded_profile["hbm_bytes"]
  # No fp32 copy of the input is left in the program.
  assert not any(t.shape == shape for t in read_program(program).tensors[1:])
  expected = np.asarray(jax.jit(f)(jax.device_put(x, cpu)))
  assert_close(folded, [expected])


def test_the_reduce_reads_the_narrow_operand_and_the_convert_is_gone():
  x = jnp.zeros((520, 300), jnp.bfloat16)
  assert "stablehlo.convert" not in _ops(lambda x: jnp.sum(x.astype(jnp.float32), axis=0), [x])


def test_a_convert_with_another_user_stays_for_it():
  x = np.random.default_rng(1).standard_normal((520, 300)).astype(ml_dtypes.bfloat16)
  f = lambda x: (jnp.sum(x.astype(jnp.float32), axis=0), x.astype(jnp.float32) * 2)  # noqa: E731
  module = importer.import_program(jax.jit(f).lower(x).as_text().encode(), "mlir")
  pipeline.run_pipeline(module)
  ops = list(walk_ops(module.main.body))
  assert "stablehlo.convert" in [op.name for op in ops]
  reduces = [op for op in ops if op.name == "stablehlo.reduce"]
  assert [op.operands[0].dtype.name for op in reduces] == ["BF16"]  # folded all the same
  folded, _, _ = _run(f, [x])
  unfolded, _, _ = _run(f, [x], (_PASS,))
  assert [a.tobytes() for a in folded] == [a.tobytes() for a in unfolded]


@pytest.mark.parametrize("f", [
    lambda x: jnp.sum(x.astype(jnp.int32).astype(jnp.float32), axis=0),  # from an integer
    lambda x: jnp.sum(x.astype(jnp.float16), axis=0),                   # to a narrower float
    lambda x: jnp.prod(x.astype(jnp.float32), axis=0),                  # a reducer it leaves
], ids=["int-source", "not-f32", "prod"])
def test_what_the_pass_leaves_alone(f):
  x = jnp.zeros((520, 300), jnp.bfloat16)
  module = importer.import_program(jax.jit(f).lower(x).as_text().encode(), "mlir")
  pipeline.run_pipeline(module)
  reduces = [op for op in walk_ops(module.main.body) if op.name == "stablehlo.reduce"]
  assert reduces and all(op.operands[0].dtype == op.results[0].dtype for op in reduces)
