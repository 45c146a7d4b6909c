"""The row fusion's fused forms (lowering/row_fusion.py) compute the unfused program's bits, with
rows of ±0, ±inf, NaN, the smallest normal and the largest values among random ones: ScalarE's
copy with its row sum standing for a VectorE add-reduce, the fp32 scalar_tensor_tensor
standing for (row op statistic) op row, in either operand order, with a statistic or an
immediate, and an fp32 statistic op writing the bf16/fp16 cell its convert would. Each case
also checks that the form is in the program, so the comparison is of two different programs."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering import pipeline
from hlo_lowering.program import disassemble
from jax_trn import compilation

_F32, _BF16 = np.float32, ml_dtypes.bfloat16


def _rows(dtype, shape=(300, 256), seed=0):
  """Random rows, then rows that are all +0, all −0, ±tiny, ±max (the sums overflow), and rows
  holding one NaN, one +inf, one −inf and a mix of the specials."""
  info = ml_dtypes.finfo(dtype)
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  rows, cols = shape
  specials = [np.zeros(cols), -np.zeros(cols), np.full(cols, info.tiny),
              np.resize([info.tiny, -info.tiny], cols), np.full(cols, info.max),
              np.resize([info.max, -info.max, 1.0], cols)]
  for value in (np.nan, np.inf, -np.inf):
    row = x[0].copy()
    row[cols // 2] = value
    specials.append(row)
  specials.append(np.resize([0.0, -0.0, info.tiny, -info.max, np.inf, np.nan, 1.0], cols))
  x[1:1 + len(specials)] = np.array(specials, np.float32)
  return x.astype(dtype)


def _compile(f, args, fused=True):
  text = jax.jit(f).lower(*args).as_text()
  passes = pipeline.PASSES
  if not fused:
    pipeline.PASSES = tuple(p for p in passes if p.name != "fuse-rows")
  try:
    return compilation.compile_text(text)
  finally:
    pipeline.PASSES = passes


def _assert_unfused_bits(f, args, form):
  """f compiled with fuse-rows holds `form` (a substring of one of its instructions) and
  computes the bits of f compiled without the pass."""
  fused, unfused = _compile(f, args), _compile(f, args, fused=False)
  assert any(form(line) for line in disassemble(fused).splitlines()), form
  for a, e in zip(harness.run_program(fused, list(args)),
                  harness.run_program(unfused, list(args))):
    a, e = np.asarray(a), np.asarray(e)
    bits = np.dtype(f"u{a.dtype.itemsize}")
    assert a.dtype == e.dtype and np.array_equal(a.view(bits), e.view(bits))


def _layer_norm(x, g, b):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def _copy_sum(line):
  return "activation_reduce" in line and "func=copy" in line and "dst_sum=SBUF" in line


def _fused_pair(line):
  return line.split()[1:2] == ["scalar_tensor_tensor"]


@pytest.mark.parametrize("dtype", [_F32, _BF16])
def test_add_reduce_as_scalar_engine_copy_sum_keeps_the_bits(dtype):
  """The mean's add-reduce of rows no ScalarE pass writes (rows of 256: ScalarE takes it over
  for rows longer than an instruction's fixed cost): ScalarE copies the row exactly to fp32 and
  sums what it wrote in tensor_reduce's order (bf16 rows widened as tensor_reduce widens
  them)."""
  harness.native()
  x = _rows(dtype)
  g, b = (np.random.default_rng(s).standard_normal(256).astype(dtype) for s in (1, 2))
  _assert_unfused_bits(_layer_norm, [x, g, b], _copy_sum)
  _assert_unfused_bits(lambda x: x - jnp.sum(x, -1, keepdims=True), [x], _copy_sum)


def test_copy_sum_of_its_rows_last_read_writes_over_them_and_keeps_the_bits():
  """sum(x · y) · x: ScalarE's copy sum is the last reader of the fp32 product row, so it writes
  its copy over that row (no scratch row); the sum and the result keep their bits."""
  harness.native()

  def over_its_source(line):
    fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
    return _copy_sum(line) and fields.get("dst") == fields.get("src")

  _assert_unfused_bits(lambda x, y: jnp.sum(x * y, -1, keepdims=True) * x,
                       [_rows(_F32), _rows(_F32, seed=1)], over_its_source)


@pytest.mark.parametrize("name,f", [
    ("centred_times_row", lambda x, y: (x - jnp.mean(x, -1, keepdims=True)) * y),
    ("row_over_scaled", lambda x, y: y / (x * jnp.max(x, -1, keepdims=True))),
    ("row_minus_reversed", lambda x, y: y - (jnp.max(x, -1, keepdims=True) - x)),
    ("immediate", lambda x, y: (x * np.float32(3.0)) * y - jnp.mean(x, -1, keepdims=True)),
    ("divided_immediate", lambda x, y: y * (x / np.float32(10.0)) + jnp.max(x, -1, keepdims=True)),
])
def test_fp32_row_op_pair_as_scalar_tensor_tensor_keeps_the_bits(name, f):
  """(x op0 s) op1 y and y op1 (x op0 s) (s a statistic or an immediate; s op0 x too): one
  scalar_tensor_tensor whose fp32 intermediate is what the first op would have written."""
  harness.native()
  x, y = _rows(_F32), _rows(_F32, seed=1)[::-1].copy()
  _assert_unfused_bits(f, [x, y], _fused_pair)


def test_layer_norm_scale_pass_is_one_scalar_tensor_tensor():
  """fp32 layernorm's ((x − mean) · rstd) · g is one VectorE pass; in bf16 (x − mean) · rstd
  rounds to bf16 before the multiply by g, so no pair is fused."""
  harness.native()
  for dtype, fused in ((_F32, True), (_BF16, False)):
    args = [_rows(dtype), *(np.ones(256, dtype) for _ in range(2))]
    text = disassemble(_compile(_layer_norm, args))
    assert any(_fused_pair(line) for line in text.splitlines()) == fused, dtype


@pytest.mark.parametrize("dtype", [_BF16, np.float16])
def test_narrow_statistic_is_written_by_its_fp32_op_and_keeps_the_bits(dtype):
  """JAX's mean of bf16 (or fp16) rows is an fp32 sum · (1 / C) converted to the narrow dtype:
  the multiply writes the narrow cell itself (fp32 arithmetic rounded once, as the convert
  rounds), so no convert instruction is left."""
  harness.native()
  x = _rows(dtype)
  g, b = (np.random.default_rng(s).standard_normal(256).astype(dtype) for s in (1, 2))
  _assert_unfused_bits(_layer_norm, [x, g, b], lambda line: "# stablehlo.divide" in line
                       and re.search(r"dst=\S+:(bf16|f16)\[1x1\]", line))
  text = disassemble(_compile(_layer_norm, [x, g, b]))
  # (The rows' loads carry the convert's label: it is their first reader.)
  assert not [line for line in text.splitlines()
              if "# stablehlo.convert" in line and "dma_copy" not in line]


@pytest.mark.parametrize("dtype", [_BF16, np.float16])
def test_narrow_rows_are_written_by_their_fp32_op_and_keep_the_bits(dtype):
  """An fp32 softmax of narrow rows cast back (attention's probabilities): the divide writes the
  narrow rows itself, fp32 arithmetic rounded once as the convert rounds, so no convert pass is
  left; a row the convert does not read alone (here the fp32 exponentials, also summed) keeps
  its fp32 tile."""
  harness.native()
  f = lambda x: jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)
  x = _rows(dtype)
  _assert_unfused_bits(f, [x], lambda line: "# stablehlo.divide" in line
                       and re.search(r"dst=\S+:(bf16|f16)\[1x256\]", line))
  text = disassemble(_compile(f, [x]))
  assert not [line for line in text.splitlines()
              if "# stablehlo.convert" in line and "dma_copy" not in line]
  assert re.search(r"func=exp dst=\S+:f32\[1x256\]", text)
