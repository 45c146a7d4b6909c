"""stablehlo.convolution as one gp_convolution (every form, any dtype).

`ConvForm` reads the op's attributes into the canonical order gp_convolution uses: lhs
[N, C, X...], rhs [O, I, K...], result [N / batch_groups, O, Y...]. Any dimension_numbers layout
(NCHW, NHWC, OIHW, HWIO, ...) is a permuted view of the operands' places, and window_reversal a
reversed one, so no data moves before the instruction. The precision config is ignored: float
convolutions accumulate in fp32 (docs/numerics.md); a pred convolution (AND products, OR sum)
runs on u8 copies of its operands. The native TensorE rule (lowering/convolution.py) takes the
common float forms first.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hlo_lowering.ir import Op
from hlo_lowering.lowering.context import LoweringContext
from hlo_lowering.lowering.places import Place
from hlo_lowering.lowering.registry import register_lowering
from hlo_lowering.program import DType, Scalar


@dataclasses.dataclass(frozen=True)
class ConvForm:
  """A convolution's attributes in canonical order (spatial dims in dimension_numbers order)."""
  lhs_perm: tuple[int, ...]
  rhs_perm: tuple[int, ...]
  out_perm: tuple[int, ...]
  strides: tuple[int, ...]
  padding: tuple[tuple[int, int], ...]
  lhs_dilation: tuple[int, ...]
  rhs_dilation: tuple[int, ...]
  reversal: tuple[bool, ...]
  feature_groups: int
  batch_groups: int

  @classmethod
  def of(cls, op: Op) -> "ConvForm":
    attrs, dn = op.attrs, op.attrs["dimension_numbers"]
    spatial = len(dn["input_spatial_dimensions"])
    padding = attrs.get("padding")
    padding = (np.zeros((spatial, 2), np.int64) if padding is None
               else np.asarray(padding).reshape(spatial, 2))

    def per_dim(name, default):
      value = attrs.get(name)
      return tuple(value) if value is not None else (default,) * spatial

    return cls(
        lhs_perm=(dn["input_batch_dimension"], dn["input_feature_dimension"],
                  *dn["input_spatial_dimensions"]),
        rhs_perm=(dn["kernel_output_feature_dimension"], dn["kernel_input_feature_dimension"],
                  *dn["kernel_spatial_dimensions"]),
        out_perm=(dn["output_batch_dimension"], dn["output_feature_dimension"],
                  *dn["output_spatial_dimensions"]),
        strides=tuple(int(s) for s in per_dim("window_strides", 1)),
        padding=tuple((int(lo), int(hi)) for lo, hi in padding),
        lhs_dilation=tuple(int(d) for d in per_dim("lhs_dilation", 1)),
        rhs_dilation=tuple(int(d) for d in per_dim("rhs_dilation", 1)),
        reversal=tuple(bool(r) for r in per_dim("window_reversal", False)),
        feature_groups=int(attrs.get("feature_group_count", 1)),
        batch_groups=int(attrs.get("batch_group_count", 1)))

  @property
  def spatial(self) -> int:
    return len(self.strides)

  def lhs(self, place: Place) -> Place:
    """The lhs place as [N, C, X...]."""
    return place.permuted(self.lhs_perm)

  def rhs(self, place: Place) -> Place:
    """The rhs place as [O, I, K...], kernel dims reversed where window_reversal says."""
    rhs = place.permuted(self.rhs_perm)
    flipped = [2 + d for d, r in enumerate(self.reversal) if r]
    return rhs.reversed(flipped) if flipped else rhs

  def out(self, place: Place) -> Place:
    """The result place as [N / batch_groups, O, Y...]."""
    return place.permuted(self.out_perm)


@register_lowering("stablehlo.convolution", kind="gpsimd", reads_views=True,
                   describe="always (any dtype and form: layouts, strides, padding, dilations, "
                            "feature and batch groups, window reversal)")
def lower_convolution(ctx: LoweringContext, op: Op) -> None:
  form = ConvForm.of(op)
  lhs, rhs = (ctx.place(v) for v in op.operands)
  out_place = ctx.new_result(op.result)
  if not out_place.size:
    return
  out = form.out(out_place)
  if not lhs.size or not rhs.size:  # an empty contraction: every element is 0
    ctx.builder.gp_fill(out_place.ap(), Scalar(out_place.dtype, 0), debug=ctx.debug_id)
    return
  if lhs.dtype == DType.PRED:
    # gp_convolution takes no pred operands: a pred convolution (XLA: AND for the product, OR
    # for the sum) is the u8 one of the 0/1 values, stored into the pred result as sum != 0.
    lhs, rhs = (_as_u8(ctx, place) for place in (lhs, rhs))
  window = [(s, lo, ld, rd) for s, (lo, _), ld, rd in
            zip(form.strides, form.padding, form.lhs_dilation, form.rhs_dilation)]
  ctx.builder.gp_convolution(out.ap(), form.lhs(lhs).ap(), form.rhs(rhs).ap(), window,
                             feature_groups=form.feature_groups,
                             batch_groups=form.batch_groups, debug=ctx.debug_id)


def _as_u8(ctx: LoweringContext, place: Place) -> Place:
  """A dense u8 copy (0 or 1 per element) of a pred place."""
  copy = Place.dense(ctx.builder.tensor("temporary", DType.U8, place.shape,
                                        name=f"t{len(ctx.builder.tensors)}"),
                     place.shape, DType.U8)
  ctx.builder.gp_copy(copy.ap(), place.ap(), debug=ctx.debug_id)
  return copy
