"""The buffers of a software-pipelined tile loop (lowering/stage_buffers.py) and the pipeline
they carry (lowering/elementwise.py): a value's ring is as deep as the stages it lives across;
no two buffers share a byte; a small loop takes whole slots, so the next rule's tiles land
elsewhere; and a long chain over both engines keeps both busy with the bits of the CPU backend."""

import itertools

import jax
import ml_dtypes
import numpy as np

import compiler_harness as harness
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.stage_buffers import Lifetime, StageBuffers
from hlo_lowering.program import DType, ProgramBuilder
from hlo_lowering.program.buffers import ARENA, SLOT

_native = harness.native()
F32, BF16 = DType.F32, DType.BF16


def _buffers(lifetimes: dict, cap_free: int = 4096, good_free: int = 2048) -> StageBuffers:
  spec = _native.target_spec("trn2")
  buffers = StageBuffers(LoweringContext(ProgramBuilder(spec), spec).sbuf, lifetimes, cap_free,
                         good_free)
  buffers.take()
  return buffers


def test_a_ring_is_as_deep_as_the_stages_its_value_lives_across():
  assert Lifetime(2, 2, False, False, False, F32).depth == 1  # read in the stage that writes it
  assert Lifetime(2, 4, False, False, False, F32).depth == 4  # 3 stages, rounded up
  assert Lifetime(0, 3, True, False, False, F32).depth == 8   # loaded: a stage ahead, 5 → 8
  assert Lifetime(3, 3, False, True, False, F32).depth == 2   # stored: a slot for its store


def _disjoint(buffers: StageBuffers) -> bool:
  """No two (value, ring index) tiles share a byte, and each lies inside its buffer."""
  extents = []
  for key, l in buffers.lifetimes.items():
    for i in range(l.depth):
      ap = buffers.tile(key, i, 128, buffers.max_free)
      size = l.dtype.itemsize * (1 if l.per_row else buffers.max_free)
      extents.append((ap.buffer, ap.byte_offset, ap.byte_offset + size))
      assert ap.byte_offset + size <= ap.buffer.size
  return all(a[0] is not b[0] or a[2] <= b[1] or b[2] <= a[1]
             for a, b in itertools.combinations(extents, 2))


def test_a_small_loop_takes_whole_slots_and_a_long_chain_the_arena():
  small = {"x": Lifetime(0, 0, True, False, False, F32),
           "y": Lifetime(0, 0, False, True, False, F32)}
  buffers = _buffers(small)
  assert buffers.max_free == 4096 and _disjoint(buffers)
  placements = {buffers.tile(k, i, 128, 8).buffer.placement for k in small for i in range(2)}
  assert placements == {SLOT}
  # 24 bf16 values living across 1–4 stages, a loaded one across 7 and a per-row scale.
  chain = {f"v{k}": Lifetime(k % 6, k % 6 + k % 4, False, k % 5 == 0, False, BF16)
           for k in range(24)}
  chain["x"] = Lifetime(0, 6, True, False, False, BF16)
  chain["scale"] = Lifetime(0, 5, True, False, True, F32)
  buffers = _buffers(chain, cap_free=8192)
  assert buffers.tile("x", 0, 128, 8).buffer.placement == ARENA
  assert 1024 < buffers.max_free < 8192 and buffers.period == 8 and _disjoint(buffers)


def test_a_long_chain_keeps_both_engines_busy_with_the_cpu_bits(cpu):
  # Over 20 bf16 ops a tile, alternating between ScalarE and VectorE 8 times: one stage per
  # engine change keeps each engine on its own tile. (Two stages, before: 1.54× the busier engine.)
  rng = np.random.default_rng(0)
  x, g = (rng.standard_normal((1024, 4096)).astype(ml_dtypes.bfloat16) for _ in range(2))
  program = harness.compile_fn(harness.gelu_forward_and_backward, x, g, lnc=1)
  outputs, profile = _native.run_program(program, [x, g])
  expected = jax.jit(harness.gelu_forward_and_backward)(*(jax.device_put(a, cpu) for a in (x, g)))
  assert [a.tobytes() for a in outputs] == [np.asarray(e).tobytes() for e in expected]
  busiest = max(profile["streams"][s]["busy_ns"] for s in ("ACT", "DVE"))
  assert profile["device_time_ns"] < 1.1 * busiest
