"""Timing-model sanity: streams overlap, matmul cost follows the neuroncore.md formula, and the
1024^3 fp32 matmul benchmark shape runs fast on the host."""

import time

import numpy as np
import pytest

from hlo_lowering.program import Alu, DType, HbmAP, Memory, ProgramBuilder, Scalar, TileAP
from compiler_harness import finish

_native = pytest.importorskip("jax_trn._native")


def _profile(builder, *inputs):
  return _native.run_program(finish(builder), list(inputs), record_timeline=True)


def test_dma_overlaps_compute_on_another_stream():
  b = ProgramBuilder()
  x = b.tensor("parameter", DType.F32, (128, 2048), index=0)
  big = TileAP.dense(Memory.SBUF, DType.F32, 0, 128, 0, (2048,))
  work = TileAP.dense(Memory.SBUF, DType.F32, 0, 128, 16384, (512,))
  b.dma_copy(0, big, HbmAP.dense(x, (128, 2048)))
  for _ in range(8):
    b.tensor_scalar(Alu.ADD, work, work, Scalar(DType.F32, 1.0))
  _, profile = _profile(b, np.zeros((128, 2048), np.float32))
  dma = next(r for r in profile["timeline"] if r["stream"] == "DMA0")
  dve = [r for r in profile["timeline"] if r["stream"] == "DVE"]
  assert dve[0]["start_ns"] == 0 and dve[-1]["end_ns"] > 0
  assert dma["start_ns"] < dve[-1]["end_ns"] and dve[0]["start_ns"] < dma["end_ns"]
  total = profile["streams"]["DVE"]["busy_ns"] + (dma["end_ns"] - dma["start_ns"])
  assert profile["device_time_ns"] < total


def _matmul_time(n, dtype):
  b = ProgramBuilder()
  stationary = TileAP.dense(Memory.SBUF, dtype, 0, 128, 0, (128,))
  moving = TileAP.dense(Memory.SBUF, dtype, 0, 128, 4096, (n,))
  psum = TileAP.dense(Memory.PSUM, DType.F32, 0, 128, 0, (n,))
  b.matmul(psum, stationary, moving)
  _, profile = _profile(b)
  assert profile["matmul_flops"] == 2 * 128 * 128 * n
  return profile["streams"]["PE"]["busy_ns"]


def test_matmul_cost_scales_with_n_and_fp32_is_four_times_bf16():
  clock = _native.target_spec("trn2")["tensor_clock_ghz"]
  assert _matmul_time(512, DType.BF16) == pytest.approx(512 / clock)
  assert _matmul_time(512, DType.BF16) == pytest.approx(4 * _matmul_time(128, DType.BF16))
  assert _matmul_time(32, DType.BF16) == pytest.approx(64 / clock)  # stationary load bound
  assert _matmul_time(512, DType.F32) == pytest.approx(4 * _matmul_time(512, DType.BF16))


def test_small_dma_is_overhead_bound():
  def dma_time(rows, cols):
    b = ProgramBuilder()
    x = b.tensor("parameter", DType.F32, (rows, cols), index=0)
    b.dma_copy(0, TileAP.dense(Memory.SBUF, DType.F32, 0, rows, 0, (cols,)),
               HbmAP.dense(x, (rows, cols)))
    _, profile = _profile(b, np.zeros((rows, cols), np.float32))
    return profile["device_time_ns"]
  spec = _native.target_spec("trn2")
  core_bytes_per_ns = spec["dma_engines_per_core"] * spec["dma_bytes_per_ns_per_engine"]
  assert 128 * 4 / dma_time(128, 1) < 0.05 * core_bytes_per_ns  # 4-byte runs: descriptor-bound
  assert 128 * 4096 * 4 / dma_time(128, 4096) > 0.9 * core_bytes_per_ns  # 2 MiB: bandwidth-bound


def test_benchmark_matmul_runs_fast_and_correct():
  m = k = n = 1024
  b = ProgramBuilder()
  ta = b.tensor("parameter", DType.F32, (m, k), index=0)
  tb = b.tensor("parameter", DType.F32, (k, n), index=1)
  tc = b.tensor("output", DType.F32, (m, n), index=0)
  offset, queue = 0, 0
  a_tiles, b_tiles = {}, {}
  for mi in range(m // 128):
    for ki in range(k // 128):
      a_tiles[mi, ki] = TileAP.dense(Memory.SBUF, DType.F32, 0, 128, offset, (128,))
      b.dma_copy(queue % 16, a_tiles[mi, ki], HbmAP(ta, mi * 128 * k + ki * 128, ((1, 128), (k, 128))))
      offset, queue = offset + 512, queue + 1
  for ki in range(k // 128):
    for ni in range(n // 512):
      b_tiles[ki, ni] = TileAP.dense(Memory.SBUF, DType.F32, 0, 128, offset, (512,))
      b.dma_copy(queue % 16, b_tiles[ki, ni], HbmAP(tb, ki * 128 * n + ni * 512, ((n, 128), (1, 512))))
      offset, queue = offset + 2048, queue + 1
  bank = 0
  for mi in range(m // 128):
    for ni in range(n // 512):
      psum = TileAP.dense(Memory.PSUM, DType.F32, 0, 128, (bank % 8) * 2048, (512,))
      for ki in range(k // 128):
        b.matmul(psum, a_tiles[mi, ki], b_tiles[ki, ni], start=ki == 0, stop=ki == k // 128 - 1)
      out = TileAP.dense(Memory.SBUF, DType.F32, 0, 128, offset + (bank % 2) * 2048, (512,))
      b.tensor_copy(out, psum)
      b.dma_copy(queue % 16, HbmAP(tc, mi * 128 * n + ni * 512, ((n, 128), (1, 512))), out)
      bank, queue = bank + 1, queue + 1
  data = finish(b)
  rng = np.random.default_rng(1)
  a = rng.standard_normal((m, k)).astype(np.float32)
  w = rng.standard_normal((k, n)).astype(np.float32)
  start = time.perf_counter()
  (c,), profile = _native.run_program(data, [a, w])
  elapsed = time.perf_counter() - start
  np.testing.assert_allclose(c, a.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
  assert elapsed < 2.0
  assert profile["matmul_flops"] == 2 * m * n * k
  assert profile["streams"]["PE"]["instructions"] == 128
  # PE time is the fp32 formula: 128 matmuls of 4 * 512 cycles.
  clock = _native.target_spec("trn2")["tensor_clock_ghz"]
  assert profile["streams"]["PE"]["busy_ns"] == pytest.approx(128 * 2048 / clock)
