"""stablehlo.convolution on TensorE: a float 1-D/2-D convolution as matmuls, one per kernel tap.

For one image and a block of output rows (R rows x a column block, ≤ 512 pixels: one fp32 PSUM
bank), every kernel tap (kh, kw) and every Cin tile (≤ 128 channels) contributes

    psum[o, pixel] += Σ_c weight[c, o @ (kh, kw)] · input[c, row·sh + kh·dh, col·sw + kw·dw]

so the stationary operand is the weight slice [Cin_t partitions, Cout_t ≤ 128] of the tap, and
the moving operand is the shifted, strided input window [Cin_t partitions, R, cols], read from
an SBUF *band* (the padded input rows the block needs, zero where padding is) through a 2-D free
access pattern with strides (sh·band_width, sw) — no im2col copy. All taps and Cin tiles
accumulate into one PSUM bank (start on the first, stop on the last); VectorE copies the bank out
in the result dtype and a DMA stores it through the result's place (any output layout).

Layouts: `ConvForm` (gpsimd/convolution.py) views every operand in canonical order, so NCHW,
NHWC, OIHW, HWIO... only change the DMA strides. A 1-D convolution is the 2-D one with H = 1.
The weights of all taps are loaded once ([Cin_t, taps, Cout] per Cin tile, one DMA per tap); bands rotate through
two buffers so the load of the next band overlaps the matmuls of this one. Products and the
accumulation are fp32, in the order (Cin tile, kh, kw) — TensorE sums each tile's channels —
so results differ from the CPU backend by the reordering of an fp32 sum of Cin·KH·KW terms.

Accepted (`accepts`): TensorE input dtypes and a float result, 1 or 2 spatial dims, no lhs
dilation, feature_group_count = batch_group_count = 1, and a band of at least one output row
that fits SBUF. The rest (transposed convs / input gradients, depthwise and grouped convs,
weight gradients of grouped convs, integer and 3-D convs) run as one gp_convolution.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.gpsimd.convolution import ConvForm
from hlo_lowering.lowering.matmul import TENSOR_ENGINE_DTYPES, BufferRing
from hlo_lowering.lowering.matmul_resident import spans
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.program import DType, HbmAP, Memory, TileAP

# SBUF the native convolution may use per partition (all of the rotating slots, like matmul.py).
_OUTPUT_BUFFERS = 4
_BAND_BUFFERS = 2
# PSUM banks in rotation for output tiles, so a bank's copy-out overlaps the next tile's matmuls.
_ACCUMULATION_BANKS = 4


def _pixels_per_tile(target_spec: dict) -> int:
  """Output pixels per tile: what one fp32 PSUM bank holds, within TensorE's moving free max."""
  return min(int(target_spec["psum_bank_bytes"]) // DType.F32.itemsize,
             int(target_spec["matmul_moving_free_max"]))


def _as_2d(place: Place) -> Place:
  """[N, C, W] -> [N, C, 1, W] (a 1-D convolution as a 2-D one); 2-D places unchanged."""
  if len(place.shape) == 4:
    return place
  n, c, w = place.shape
  sn, sc, sw = place.strides
  return dataclasses.replace(place, shape=(n, c, 1, w), strides=(sn, sc, 0, sw))


@dataclasses.dataclass(frozen=True)
class _Plan:
  """The tiling of one convolution (all sizes in elements unless named bytes)."""
  n: int
  c: int
  h: int
  w: int
  o: int
  kh: int
  kw: int
  ho: int
  wo: int
  stride: tuple[int, int]
  dilation: tuple[int, int]
  pad: tuple[int, int]          # low padding (top, left); negative crops
  rows: int                     # output rows per block
  cols: int                     # output columns per block
  band_rows: int
  band_width: int
  partitions: int               # the target's (Cin and Cout tiles)
  pixels_per_tile: int

  @property
  def taps(self) -> int:
    return self.kh * self.kw

  @property
  def cin_tiles(self):
    return spans(self.c, self.partitions)


def _plan(op: Op, target_spec: dict, sbuf_bytes: int) -> _Plan | None:
  form = ConvForm.of(op)
  partitions, pixels = int(target_spec["partitions"]), _pixels_per_tile(target_spec)
  lhs, rhs = op.operands
  two_d = form.spatial == 2
  lhs_shape = [lhs.shape[d] for d in form.lhs_perm]
  rhs_shape = [rhs.shape[d] for d in form.rhs_perm]
  out_shape = [op.result.shape[d] for d in form.out_perm]
  if not two_d:
    lhs_shape.insert(2, 1), rhs_shape.insert(2, 1), out_shape.insert(2, 1)
  n, c, h, w = lhs_shape
  o, _, kh, kw = rhs_shape
  _, _, ho, wo = out_shape
  stride = (form.strides[0], form.strides[1]) if two_d else (1, form.strides[0])
  dilation = (form.rhs_dilation[0], form.rhs_dilation[1]) if two_d else (1, form.rhs_dilation[0])
  pad = (form.padding[0][0], form.padding[1][0]) if two_d else (0, form.padding[0][0])
  cols = min(wo, pixels)
  band_width = (wo - 1) * stride[1] + (kw - 1) * dilation[1] + 1
  cin_tiles = math.ceil(c / partitions)
  fixed = (cin_tiles * kh * kw * o * rhs.dtype.itemsize
           + _OUTPUT_BUFFERS * pixels * op.result.dtype.itemsize)
  for rows in range(max(1, min(ho, pixels // cols)), 0, -1):
    band_rows = (rows - 1) * stride[0] + (kh - 1) * dilation[0] + 1
    band = cin_tiles * band_rows * band_width * lhs.dtype.itemsize
    if fixed + _BAND_BUFFERS * band <= sbuf_bytes:
      return _Plan(n, c, h, w, o, kh, kw, ho, wo, stride, dilation, pad, rows, cols, band_rows,
                   band_width, partitions, pixels)
  return None


# SBUF bytes per partition the plan may use at most: 12 slots of 16 KiB (allocators.SbufSlots).
_SBUF_BUDGET = 12 * 16 * 1024


def accepts(op: Op) -> bool:
  """Float 1-D/2-D convolutions without lhs dilation or groups (`fits` checks SBUF)."""
  if op.name != "stablehlo.convolution" or len(op.operands) != 2:
    return False
  lhs, rhs = op.operands
  if (lhs.dtype not in TENSOR_ENGINE_DTYPES or rhs.dtype not in TENSOR_ENGINE_DTYPES
      or not op.result.dtype.is_float):
    return False
  form = ConvForm.of(op)
  if (form.spatial not in (1, 2) or any(d != 1 for d in form.lhs_dilation)
      or form.feature_groups != 1 or form.batch_groups != 1):
    return False
  return bool(lhs.type.size and rhs.type.size)


def fits(target_spec: dict, op: Op) -> bool:
  """The input bands and weights fit the target's SBUF."""
  budget = min(int(target_spec["sbuf_bytes_per_partition"]), _SBUF_BUDGET)
  return _plan(op, target_spec, budget) is not None


class _Convolution:
  """The emission of one native convolution."""

  def __init__(self, ctx: LoweringContext, op: Op, plan: _Plan):
    form = ConvForm.of(op)
    self.ctx, self.plan = ctx, plan
    self.lhs = _as_2d(form.lhs(ctx.place(op.operands[0])))
    self.rhs = _as_2d(form.rhs(ctx.place(op.operands[1])))
    self.out = _as_2d(form.out(ctx.new_result(op.result)))
    self.zero = ctx.constant_tensor(np.zeros((1,), self.lhs.dtype.numpy))
    base = ctx.sbuf.take_arena()
    p = plan
    weights_bytes = len(p.cin_tiles) * p.taps * p.o * self.rhs.dtype.itemsize
    self.band_bytes = p.band_rows * p.band_width * self.lhs.dtype.itemsize
    band_buffer = len(p.cin_tiles) * self.band_bytes
    out_bytes = p.pixels_per_tile * self.out.dtype.itemsize
    self.weights = base
    start = base + weights_bytes
    self.bands = BufferRing([start + i * band_buffer for i in range(_BAND_BUFFERS)])
    start += _BAND_BUFFERS * band_buffer
    self.outputs = BufferRing([start + i * out_bytes for i in range(_OUTPUT_BUFFERS)])
    if (start + _OUTPUT_BUFFERS * out_bytes).offset > ctx.sbuf.arena_bytes:
      raise AssertionError("convolution plan exceeds SBUF")  # fits() checked a smaller budget
    banks = [ctx.psum.take() for _ in range(ctx.psum.count)]
    self.accumulators = BufferRing(banks[:_ACCUMULATION_BANKS])

  def _tile(self, dtype: DType, partitions: int, offset: int, free) -> TileAP:
    return TileAP(Memory.SBUF, dtype, 0, partitions, offset, tuple(free))

  def _load_weights(self) -> None:
    """Per Cin tile and tap: [Cin_t partitions, O] from rhs [O, I, KH, KW] (any layout). One DMA
    per tap spreads the (short-run) weight transfer over the queues, and the first matmuls wait
    only for their own tap."""
    p, rhs = self.plan, self.rhs
    so, si, skh, skw = rhs.strides
    size = rhs.dtype.itemsize
    for t, ct in enumerate(p.cin_tiles):
      for kh in range(p.kh):
        for kw in range(p.kw):
          tap = kh * p.kw + kw
          dst = self._tile(rhs.dtype, ct.count, self.weights + (t * p.taps + tap) * p.o * size,
                           ((1, p.o),))
          src = HbmAP(rhs.tensor, rhs.offset + ct.start * si + kh * skh + kw * skw,
                      ((si, ct.count), (so, p.o)))
          self.ctx.dma(dst, src)

  def _load_band(self, n: int, row0: int, band: int) -> None:
    """The padded input rows output rows [row0, row0 + rows) read, per Cin tile: band row j is
    input row row0·sh + j − pad_top, band column i input column i − pad_left (zero outside)."""
    p, lhs = self.plan, self.lhs
    sn, sc, sh, sw = lhs.strides
    size = lhs.dtype.itemsize
    first_row = row0 * p.stride[0] - p.pad[0]
    r0, r1 = max(0, -first_row), min(p.band_rows, p.h - first_row)
    c0, c1 = max(0, p.pad[1]), min(p.band_width, p.w + p.pad[1])
    for t, ct in enumerate(p.cin_tiles):
      offset = band + t * self.band_bytes
      if r0 >= r1 or c0 >= c1:
        self._zero(ct.count, offset, ((1, p.band_rows * p.band_width),))
        continue
      strips = [(0, r0, 0, p.band_width), (r1, p.band_rows, 0, p.band_width),
                (r0, r1, 0, c0), (r0, r1, c1, p.band_width)]
      for a, b, left, right in strips:
        if a < b and left < right:
          self._zero(ct.count, offset + (a * p.band_width + left) * size,
                     ((p.band_width, b - a), (1, right - left)))
      dst = self._tile(lhs.dtype, ct.count, offset + (r0 * p.band_width + c0) * size,
                       ((p.band_width, r1 - r0), (1, c1 - c0)))
      src = HbmAP(lhs.tensor, lhs.offset + n * sn + ct.start * sc + (first_row + r0) * sh
                  + (c0 - p.pad[1]) * sw, ((sc, ct.count), (sh, r1 - r0), (sw, c1 - c0)))
      self.ctx.dma(dst, src)

  def _zero(self, partitions: int, offset: int, free) -> None:
    count = partitions * math.prod(c for _, c in free)
    self.ctx.dma(self._tile(self.lhs.dtype, partitions, offset, free),
                 HbmAP(self.zero, 0, ((0, count),)))

  def emit(self) -> None:
    p = self.plan
    self._load_weights()
    for n in range(p.n):
      for rows in spans(p.ho, p.rows):
        band = self.bands.take()
        self._load_band(n, rows.start, band)
        for cols in spans(p.wo, p.cols):
          for ot in spans(p.o, p.partitions):
            self._output_tile(n, rows, cols, ot, band)

  def _output_tile(self, n: int, rows, cols, ot, band: int) -> None:
    p, builder, debug = self.plan, self.ctx.builder, self.ctx.debug_id
    lsize, wsize = self.lhs.dtype.itemsize, self.rhs.dtype.itemsize
    pixels = rows.count * cols.count
    bank = self.accumulators.take()
    dst = TileAP(Memory.PSUM, DType.F32, 0, ot.count, bank, ((1, pixels),))
    last = len(p.cin_tiles) * p.taps - 1
    index = 0
    for t, ct in enumerate(p.cin_tiles):
      for kh in range(p.kh):
        for kw in range(p.kw):
          tap = kh * p.kw + kw
          stationary = self._tile(self.rhs.dtype, ct.count,
                                  self.weights + ((t * p.taps + tap) * p.o + ot.start) * wsize,
                                  ((1, ot.count),))
          corner = kh * p.dilation[0] * p.band_width + cols.start * p.stride[1] + kw * p.dilation[1]
          moving = self._tile(self.lhs.dtype, ct.count,
                              band + t * self.band_bytes + corner * lsize,
                              ((p.stride[0] * p.band_width, rows.count),
                               (p.stride[1], cols.count)))
          builder.matmul(dst, stationary, moving, start=index == 0, stop=index == last,
                         debug=debug)
          index += 1
    out = self.out
    tile = self._tile(out.dtype, ot.count, self.outputs.take(), ((1, pixels),))
    builder.tensor_copy(tile, dst, debug=debug)
    so_n, so_c, so_h, so_w = out.strides
    self.ctx.dma(HbmAP(out.tensor, out.offset + n * so_n + ot.start * so_c + rows.start * so_h
                       + cols.start * so_w, ((so_c, ot.count), (so_h, rows.count),
                                             (so_w, cols.count))),
                 self._tile(out.dtype, ot.count, tile.address,
                            ((cols.count, rows.count), (1, cols.count))))


@register_lowering("stablehlo.convolution", kind="native", when=accepts, when_target=fits,
                   reads_views=True,
                   describe="float operands TensorE multiplies (f32, bf16, f16, fp8), 1 or 2 "
                            "spatial dims, no lhs dilation, no feature/batch groups (any "
                            "layout, stride, padding, rhs dilation): one matmul per kernel tap "
                            "and Cin tile into one PSUM bank")
def lower_convolution(ctx: LoweringContext, op: Op) -> None:
  budget = ctx.sbuf.arena_bytes
  plan = _plan(op, ctx.target_spec, min(budget, _SBUF_BUDGET))
  _Convolution(ctx, op, plan).emit()
