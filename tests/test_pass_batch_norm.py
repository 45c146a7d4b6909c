"""decompose-batch-norm (hlo_lowering/passes/decompose_batch_norm.py): stablehlo.batch_norm_training
/ inference / grad written by hand as MLIR text (JAX does not emit them; torch_xla does), compiled,
run on the simulator and compared with a NumPy reference of the StableHLO specification
(biased variance over every dim but feature_index, epsilon inside the square root); and the pass
on IR: no batch-norm op is left and the pieces fuse."""

import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from cpu_reference import assert_close
from hlo_lowering import importer, ir_printer, pipeline
from hlo_lowering.passes import decompose_batch_norm
from jax_trn import compilation

_MLIR_TYPES = {np.dtype(np.float32): "f32", np.dtype(ml_dtypes.bfloat16): "bf16"}


def _tensor(shape, dtype):
  return f"tensor<{'x'.join(map(str, shape))}x{_MLIR_TYPES[np.dtype(dtype)]}>"


def _program(op: str, shape, feature, dtype, epsilon=1e-3):
  x, c = _tensor(shape, dtype), _tensor((shape[feature],), dtype)
  attrs = f"{{epsilon = {epsilon:e} : f32, feature_index = {feature} : i64}}"
  if op == "training":
    return f"""
func.func @main(%x: {x}, %scale: {c}, %offset: {c}) -> ({x}, {c}, {c}) {{
  %y, %mean, %var = "stablehlo.batch_norm_training"(%x, %scale, %offset) {attrs}
      : ({x}, {c}, {c}) -> ({x}, {c}, {c})
  return %y, %mean, %var : {x}, {c}, {c}
}}"""
  if op == "inference":
    return f"""
func.func @main(%x: {x}, %scale: {c}, %offset: {c}, %mean: {c}, %var: {c}) -> {x} {{
  %y = "stablehlo.batch_norm_inference"(%x, %scale, %offset, %mean, %var) {attrs}
      : ({x}, {c}, {c}, {c}, {c}) -> {x}
  return %y : {x}
}}"""
  return f"""
func.func @main(%x: {x}, %scale: {c}, %mean: {c}, %var: {c}, %dy: {x}) -> ({x}, {c}, {c}) {{
  %dx, %dscale, %doffset = "stablehlo.batch_norm_grad"(%x, %scale, %mean, %var, %dy) {attrs}
      : ({x}, {c}, {c}, {c}, {x}) -> ({x}, {c}, {c})
  return %dx, %dscale, %doffset : {x}, {c}, {c}
}}"""


def _bcast(v, shape, feature):
  view = [1] * len(shape)
  view[feature] = shape[feature]
  return v.reshape(view)


def _reference(op, args, feature, epsilon):
  """The StableHLO spec's reference decomposition, in float64."""
  args = [np.asarray(a, np.float64) for a in args]
  x = args[0]
  axes = tuple(d for d in range(x.ndim) if d != feature)
  b = lambda v: _bcast(v, x.shape, feature)
  if op == "training":
    _, scale, offset = args
    mean = x.mean(axis=axes)
    var = ((x - b(mean)) ** 2).mean(axis=axes)
    y = b(scale) * (x - b(mean)) / np.sqrt(b(var) + epsilon) + b(offset)
    return [y, mean, var]
  if op == "inference":
    _, scale, offset, mean, var = args
    return [b(scale) * (x - b(mean)) / np.sqrt(b(var) + epsilon) + b(offset)]
  _, scale, mean, var, dy = args
  n = x.size / x.shape[feature]
  centered = x - b(mean)
  stddev = np.sqrt(b(var) + epsilon)
  i1 = dy * n
  i2 = b(dy.sum(axis=axes))
  i3 = b((dy * centered).sum(axis=axes))
  i5 = i3 * centered / (b(var) + epsilon)
  dx = b(scale) / stddev / n * (i1 - i2 - i5)
  return [dx, (dy * centered / stddev).sum(axis=axes), dy.sum(axis=axes)]


def _inputs(op, shape, feature, dtype, seed=0):
  rng = np.random.default_rng(seed)
  c = shape[feature]
  x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
  scale = (rng.standard_normal(c) + 1).astype(dtype)
  offset = rng.standard_normal(c).astype(dtype)
  mean = rng.standard_normal(c).astype(dtype)
  var = (rng.random(c) + 0.5).astype(dtype)
  if op == "training":
    return [x, scale, offset]
  if op == "inference":
    return [x, scale, offset, mean, var]
  return [x, scale, mean, var, rng.standard_normal(shape).astype(dtype)]


CASES = [((4, 6, 5, 3), 3), ((4, 3, 6, 5), 1), ((7, 130), 1), ((130, 9), 0), ((2, 3, 4), 2),
         ((5, 1, 3), 1)]


@pytest.mark.parametrize("op", ["training", "inference", "grad"])
@pytest.mark.parametrize("shape,feature", CASES)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_batch_norm_matches_the_spec(op, shape, feature, dtype):
  epsilon = 1e-3
  program = compilation.compile_text(_program(op, shape, feature, dtype, epsilon))
  assert not [o for o in compilation.last_report().summary() if "batch_norm" in o]
  args = _inputs(op, shape, feature, dtype)
  actual = harness.run_program(program, args)
  expected = [e.astype(dtype) for e in _reference(op, args, feature, epsilon)]
  # bf16 rounds after every op of the decomposition (the spec's element type).
  scale = 8.0 if dtype == ml_dtypes.bfloat16 else (4.0 if op == "grad" else 1.0)
  assert_close(list(actual), expected, scale=scale, err_msg=f"batch_norm_{op}")


def test_epsilon_is_inside_the_square_root():
  shape, feature = (3, 4), 1
  args = [np.zeros(shape, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32),
          np.zeros(4, np.float32), np.zeros(4, np.float32)]
  args[0][:] = 1.0
  program = compilation.compile_text(_program("inference", shape, feature, np.float32, 0.25))
  (y,) = harness.run_program(program, args)
  np.testing.assert_allclose(y, np.full(shape, 2.0), rtol=1e-6)  # 1 / sqrt(0 + 0.25)


def test_pass_leaves_no_batch_norm_and_pieces_fuse():
  module = importer.import_program(_program("training", (4, 6, 3), 2, np.float32).encode(),
                                   "mlir")
  decompose_batch_norm.run(module)
  text = ir_printer.format_module(module)
  assert "batch_norm" not in text
  assert text.count("stablehlo.reduce") == 2
  pipeline.run_pipeline(module)
  text = ir_printer.format_module(module)
  assert "trn.fusion" in text
