"""The timing model reproduces the published NeuronCore figures within 5 % (docs/timing-model.md):
each test runs a real program on the simulator and compares its modeled time with the figure
AWS published, never with the model's own parameters."""

import ml_dtypes
import numpy as np
import pytest

from compiler_harness import compile_fn, finish, native
from hlo_lowering.program import Alu, DType, HbmAP, Memory, ProgramBuilder, TileAP

# Published figures (neuroncore.md "Calibration targets"; sources in docs/timing-model.md).
DMA_32KIB_ONE_QUEUE_NS_TRN2 = 1416                                   # NKI DMA overview, example 1
DMA_GB_PER_S_PER_CORE = {"trn1": 272, "trn2": 368, "trn3": 528}      # NKI DMA bandwidth guide
TINY_DEPENDENT_SCALAR_NS = {"trn1": 189, "trn2": 222}                # NKI performance guide, Opt #5a
TENSOR_TFLOPS_PER_CORE = {                                           # NeuronCore-v2/v3/v4 pages
    "trn1": {DType.BF16: 92, DType.F8E4M3FN: 92, DType.F32: 23},
    "trn2": {DType.BF16: 79, DType.F8E4M3FN: 158, DType.F32: 20},
    "trn3": {DType.BF16: 79, DType.F8E4M3FN: 158, DType.F32: 20},  # plain fp8; 315 is MXFP8
}
HBM_GB_PER_S_PER_CHIP = {"trn1": 820, "trn2": 2900, "trn3": 4900}    # Trainium architecture pages


def _device_time_ns(builder, *inputs):
  _, profile = native().run_program(finish(builder), list(inputs))
  return profile["device_time_ns"]


def test_32_kib_on_one_dma_queue_takes_1416_ns_on_trn2():
  # One partition: the transfer runs on one DMA engine of one queue, as in the published example.
  b = ProgramBuilder("trn2")
  x = b.tensor("parameter", DType.F32, (1, 8192), index=0)
  b.dma_copy(0, TileAP.dense(Memory.SBUF, DType.F32, 0, 1, 0, (8192,)), HbmAP.dense(x, (1, 8192)))
  ns = _device_time_ns(b, np.zeros((1, 8192), np.float32))
  assert ns == pytest.approx(DMA_32KIB_ONE_QUEUE_NS_TRN2, rel=0.05)


@pytest.mark.parametrize("target", sorted(TINY_DEPENDENT_SCALAR_NS))
def test_dependent_chain_of_tiny_scalar_instructions_costs_the_published_overhead_each(target):
  def chain(n):
    b = ProgramBuilder(target)
    tile = TileAP.dense(Memory.SBUF, DType.F32, 0, 1, 0, (1,))
    for _ in range(n):
      b.activation(Alu.EXP, tile, tile, scale=0.0)  # each reads what the previous one wrote
    return _device_time_ns(b)
  per_instruction = (chain(200) - chain(100)) / 100
  assert per_instruction == pytest.approx(TINY_DEPENDENT_SCALAR_NS[target], rel=0.05)


def test_cross_engine_hand_off_costs_the_named_semaphore_time():
  # ScalarE then VectorE on the same tile: the second waits for the first's semaphore.
  def pair(cross_engine):
    b = ProgramBuilder("trn2")
    tile = TileAP.dense(Memory.SBUF, DType.F32, 0, 1, 0, (1,))
    b.activation(Alu.EXP, tile, tile, scale=0.0)
    if cross_engine:
      b.tensor_copy(tile, tile)
    return _device_time_ns(b)
  spec = native().target_spec("trn2")
  vector_ns = (spec["instruction_fixed_cycles"] + 64) / spec["vector_clock_ghz"]
  assert spec["semaphore_handoff_ns"] > 0
  assert pair(True) - pair(False) == pytest.approx(spec["semaphore_handoff_ns"] + vector_ns)


@pytest.mark.parametrize("target", sorted(DMA_GB_PER_S_PER_CORE))
def test_bf16_elementwise_on_one_core_streams_near_but_never_above_the_core_dma_limit(target):
  x = np.ones((4096, 4096), ml_dtypes.bfloat16)  # 32 MiB in, 32 MiB out
  _, profile = native().run_program(compile_fn(lambda a: a * 2, x, target=target), [x])
  gb_per_s = 2 * x.nbytes / profile["device_time_ns"]
  limit = DMA_GB_PER_S_PER_CORE[target]
  assert 0.75 * limit <= gb_per_s <= limit


@pytest.mark.parametrize("target", sorted(TENSOR_TFLOPS_PER_CORE))
@pytest.mark.parametrize("dtype", [DType.BF16, DType.F8E4M3FN, DType.F32])
def test_big_matmul_runs_at_the_published_tensor_engine_peak_of_its_dtype(target, dtype):
  # 128 back-to-back 128x128x512 matmuls from SBUF into one PSUM bank: TensorE-bound.
  b = ProgramBuilder(target)
  stationary = TileAP.dense(Memory.SBUF, dtype, 0, 128, 0, (128,))
  moving = TileAP.dense(Memory.SBUF, dtype, 0, 128, 4096, (512,))
  psum = TileAP.dense(Memory.PSUM, DType.F32, 0, 128, 0, (512,))
  count = 128
  for i in range(count):
    b.matmul(psum, stationary, moving, start=i == 0, stop=i == count - 1)
  _, profile = native().run_program(finish(b), [])
  assert profile["matmul_flops"] == count * 2 * 128 * 128 * 512
  tflops = profile["matmul_flops"] / profile["device_time_ns"] / 1e3
  assert tflops == pytest.approx(TENSOR_TFLOPS_PER_CORE[target][dtype], rel=0.05)


@pytest.mark.parametrize("target", sorted(HBM_GB_PER_S_PER_CHIP))
def test_the_chip_hbm_limit_is_the_published_figure_and_above_one_core(target):
  # One core per device today: its DMA limit binds before the chip's HBM (shared by all cores).
  spec = native().target_spec(target)
  assert spec["hbm_bytes_per_ns_per_chip"] == HBM_GB_PER_S_PER_CHIP[target]
  assert spec["hbm_bytes_per_ns_per_chip"] > DMA_GB_PER_S_PER_CORE[target]
