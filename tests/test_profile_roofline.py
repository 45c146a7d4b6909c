"""MFU, HFU and MBU (as Neuron Explorer defines them) per execution and per op against the peak of
the JAX device, the HBM bytes behind MBU, each op's bottleneck, and what to fix first."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_trn import _native, config, profile, profile_advice, roofline


def _run(trn, f, *args):
  placed = [jax.device_put(a, trn) for a in args]
  jitted = jax.jit(f)
  jitted(*placed).block_until_ready()  # compile outside the trace
  with profile.trace():
    jitted(*placed).block_until_ready()
  return profile.last_execution(trn)


def _close(x, y, rel=1e-9):
  return abs(x - y) <= rel * max(abs(x), abs(y), 1e-30)


@pytest.fixture(scope="module")
def matmul(trn):
  rng = np.random.default_rng(0)
  a = rng.standard_normal((512, 1024), dtype=np.float32).astype(jnp.bfloat16)
  b = rng.standard_normal((1024, 512), dtype=np.float32).astype(jnp.bfloat16)
  return _run(trn, lambda x, y: x @ y, a, b)


@pytest.fixture(scope="module")
def scale(trn):
  x = np.arange(2 * 1024 * 1024, dtype=np.float32).reshape(2048, 1024)
  return _run(trn, lambda v: v * 2.0, x)


def test_peak_is_the_whole_jax_device():
  """trn2 at LNC=2: two physical cores of 2*128*128 FLOPs per cycle at 2.4 GHz (the published
  79 bf16 TFLOPS each), and two eighths of the chip's 2.9 TB/s HBM."""
  lnc = config.current().resolved_lnc()
  peak = roofline.device_peak("trn2", lnc)
  assert lnc == 2 and peak.physical_cores == 2
  assert _close(peak.tflops, 2 * 2 * 128 * 128 * 2.4 / 1e3)
  spec = _native.target_spec("trn2")
  assert _close(peak.hbm_bytes_per_ns, spec["hbm_bytes_per_ns_per_chip"] * 2 / 8)
  assert _close(roofline.device_peak("trn1", 1).tflops, 2 * 128 * 128 * 2.8 / 1e3)


def test_execution_mfu_hfu_mbu_follow_their_definitions(matmul):
  peak = matmul.peak()
  u = matmul.device_utilization()
  capacity = matmul.device_time_ns * peak.bf16_flops_per_ns
  assert matmul.matmul_flops == 2 * 512 * 1024 * 512 and matmul.fp8_matmul_flops == 0
  assert _close(u.mfu, matmul.matmul_flops / capacity)
  assert _close(u.hfu, (matmul.matmul_flops + matmul.transpose_flops) / capacity)
  assert u.hfu >= u.mfu > 0
  assert _close(u.mbu, matmul.hbm_bytes / (matmul.device_time_ns * peak.hbm_bytes_per_ns))
  # Both bf16 inputs are read and the bf16 output written at least once.
  assert matmul.hbm_bytes >= (512 * 1024 + 1024 * 512 + 512 * 512) * 2


def test_always_on_figures_match_the_timeline(matmul, scale):
  for p in (matmul, scale):
    assert p.hbm_bytes == sum(r["hbm_bytes"] for r in p.timeline)
    assert p.transpose_flops == sum(r["flops"] for r in p.timeline if r["opcode"] == "transpose")
    ops = p.by_op()
    assert sum(o.hbm_bytes for o in ops) == p.hbm_bytes
    assert sum(o.transpose_flops for o in ops) == p.transpose_flops
    assert sum(o.flops for o in ops) == p.matmul_flops


def test_elementwise_moves_its_tensor_through_hbm_once_each_way(scale):
  """x * 2 reads x and writes the result: exactly 2 * 8 MiB cross HBM, and nothing else."""
  assert scale.hbm_bytes == 2 * 2048 * 1024 * 4
  assert scale.matmul_flops == scale.transpose_flops == 0
  u = scale.device_utilization()
  assert u.mfu == u.hfu == 0 and 0 < u.mbu <= 1.0
  (op,) = [o for o in scale.by_op() if o.op == "stablehlo.multiply"]
  assert op.bottleneck in ("HBM-bandwidth-bound", "DMA-bandwidth-bound", "DMA-bound"), op.why
  assert 0 < op.utilization.mbu <= 1.0 and op.active_ns <= scale.device_time_ns + 1e-6


def test_per_op_figures_are_over_the_ops_active_time(matmul):
  (dot,) = [o for o in matmul.by_op() if o.op == "stablehlo.dot_general"]
  peak = matmul.peak()
  assert 0 < dot.active_ns <= matmul.device_time_ns + 1e-6
  assert _close(dot.utilization.mfu, dot.flops / (dot.active_ns * peak.bf16_flops_per_ns))
  assert _close(dot.utilization.mbu, dot.hbm_bytes / (dot.active_ns * peak.hbm_bytes_per_ns))
  assert dot.utilization.mfu >= matmul.device_utilization().mfu
  assert dot.bottleneck and dot.why
  assert "MFU" in matmul.format() and "MBU" in matmul.format()
  report = matmul.report()
  assert dot.bottleneck in report and "what to fix first:" in report


def test_fp8_flops_count_half_against_the_bf16_peak(trn):
  rng = np.random.default_rng(1)
  a = rng.standard_normal((256, 256), dtype=np.float32).astype(jnp.float8_e4m3fn)
  b = rng.standard_normal((256, 256), dtype=np.float32).astype(jnp.float8_e4m3fn)
  p = _run(trn, lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.float32), a, b)
  assert p.fp8_matmul_flops == p.matmul_flops == 2 * 256 ** 3
  capacity = p.device_time_ns * p.peak().bf16_flops_per_ns
  assert _close(p.device_utilization().mfu, p.matmul_flops / 2 / capacity)


def test_gpsimd_general_path_is_named_and_first_to_fix(trn):
  x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
  p = _run(trn, lambda v, i: jax.lax.dynamic_slice(v, (i, i), (8, 8)) * 3.0, x, np.int32(5))
  (op,) = [o for o in p.by_op() if o.op == "stablehlo.dynamic_slice"]
  assert op.lowering == "gpsimd" and op.bottleneck == "GpSimd general path"
  advice = profile_advice.fix_first(p)
  assert any(a.op.op == "stablehlo.dynamic_slice" for a in advice)
  assert all(0 < a.share <= 1 + 1e-9 for a in advice)


def test_bottleneck_names_the_resource_that_held_the_op():
  b = roofline.bottleneck
  assert b("native", {"PE": 10.0, "DVE": 2.0}, {}, 0.0, 0.0, 0.0)[0] == "TensorE-bound"
  assert b("fused", {"ACT": 1.0, "DMA": 9.0}, {}, 0.0, 0.9, 0.9)[0] == "HBM-bandwidth-bound"
  assert b("fused", {"ACT": 1.0, "DMA": 9.0}, {}, 0.0, 0.5, 0.99)[0] == "DMA-bandwidth-bound"
  assert b("native", {"ACT": 1.0, "DMA": 9.0}, {}, 0.0, 0.1, 0.2)[0] == "DMA-bound"
  assert b("native", {"PE": 2.0}, {"DMA": 5.0, "ACT": 1.0}, 5.5, 0.0, 0.0)[0] == "waiting on DMA"
  assert b("native", {"PE": 6.0}, {"DMA": 5.0, "ACT": 1.0}, 5.5, 0.0, 0.0)[0] == "TensorE-bound"
  assert b("native", {"DVE": 4.0, "ACT": 3.0}, {}, 0.0, 0.0, 0.0)[0] == "VectorE-bound"
  assert b("gpsimd", {"POOL": 1.0}, {}, 0.0, 0.0, 0.0)[0] == "GpSimd general path"
