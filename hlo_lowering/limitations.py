"""Known gaps, as data: (op, condition, reason) entries (JAX's `Limitation` harness objects).

One table serves two readers: the coverage report (hlo_lowering/coverage.py, docs/coverage.md)
prints it, and tests skip or xfail the cases it names through `marks()` instead of scattered
`pytest.skip` calls. An entry's `kind` says what happens to an op under its condition:
"gpsimd" (compiles, but on the slow GpSimd path) or "unsupported" (CompileError naming the op).

Add an entry when a lowering rule declines or rejects a form, or when an op has a reason beyond
"no lowering rule yet" (which the report says for every op without rules on its own). `op` is a
StableHLO op name or ALL_OPS; `dtypes`, when given, are the numpy dtype names the condition is
about and `form` a tag for other conditions (tests match on either).
"""

from __future__ import annotations

import dataclasses

ALL_OPS = "*"
GPSIMD = "gpsimd"
UNSUPPORTED = "unsupported"


@dataclasses.dataclass(frozen=True)
class Limitation:
  op: str                          # "stablehlo.dot_general", or ALL_OPS
  condition: str                   # "integer operands"; "all" when the whole op is concerned
  reason: str                      # why, in words
  kind: str = UNSUPPORTED          # GPSIMD (slow path) | UNSUPPORTED (CompileError)
  dtypes: tuple[str, ...] = ()     # numpy dtype names the condition is about
  form: str = ""                   # a short tag tests pass to say "my case has this form"

  @property
  def whole_op(self) -> bool:
    return self.op != ALL_OPS and self.condition == "all"

  def applies(self, op: str, dtype: str | None = None, form: str | None = None) -> bool:
    """Whether a test case of `op` with operands of numpy dtype name `dtype` and the form tag
    `form` falls under this entry (conditions that are neither dtypes nor tags never match)."""
    if self.op not in (ALL_OPS, op):
      return False
    return (self.whole_op or (dtype is not None and dtype in self.dtypes)
            or (form is not None and form == self.form))


_INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
_HOST_QUEUES = ("the simulated device has no host queues (infeed/outfeed, send/recv); a program "
                "talks to the host through host callbacks (jax.debug.print, jax.pure_callback, "
                "io_callback: docs/host-callbacks.md)")
_DYNAMIC = "dynamic shapes are rejected at import (every shape must be static)"
_LEGACY = "JAX no longer emits it (legacy/internal op); no lowering rule"

LIMITATIONS: tuple[Limitation, ...] = (
    # Types.
    Limitation(ALL_OPS, "float64 operands or results", "NeuronCores have no float64 "
               "(check-supported rejects it; use float32: in JAX leave jax_enable_x64 off, in "
               "PyTorch .float()); the float64 scalars torch_xla makes of Python numbers run as "
               "float32 (narrow-float64), and TRN_FLOAT64=float32 runs every float64 program "
               "as float32 with a warning",
               dtypes=("float64",)),
    Limitation(ALL_OPS, "complex128 operands or results", "NeuronCores have no float64, so no "
               "complex128 (rejected at import; use complex64)", dtypes=("complex128",)),
    Limitation(ALL_OPS, "int2 or uint2 operands or results",
               "no 2-bit type: the transfer (PJRT S2/U2) and the compile refuse them, naming the "
               "type; widen to int8/uint8, which hold every value (int4/uint4 run: widen-int4, "
               "docs/numerics.md)", dtypes=("int2", "uint2")),
    Limitation(ALL_OPS, "complex64 operands of an op decompose-complex has no rule for (ordered "
               "compares, reduce bodies other than add/subtract/multiply (jnp.max of complex), "
               "reduce_window other than add or a cumulative product, bitcast_convert, custom "
               "calls …)", "complex64 runs as float32 (real, imaginary) pairs; each op "
               "needs its own decomposition (docs/numerics.md lists them)",
               form="complex-unsupported"),
    Limitation(ALL_OPS, "dynamic shapes, tuples", "only ranked tensors of static shape (and "
               "tokens, as zero-size values) are imported"),
    # Slow paths of supported ops.
    Limitation("stablehlo.dot_general", "integer operands or result", "TensorE multiplies floats "
               "only; runs as one gp_batch_matmul", GPSIMD, dtypes=_INTEGERS, form="integer-dot"),
    Limitation("stablehlo.convolution", "integer operands or result", "TensorE multiplies "
               "floats only; runs as one gp_convolution", GPSIMD, dtypes=_INTEGERS,
               form="integer-conv"),
    Limitation("stablehlo.convolution", "lhs_dilation > 1 (transposed convs, input gradients "
               "of strided convs), feature_group_count > 1 (depthwise/grouped), "
               "batch_group_count > 1 (their weight gradients), 3 or more spatial dims",
               "the native rule is one matmul per kernel tap over a dense input band; these "
               "forms run as one gp_convolution", GPSIMD, form="general-conv"),
    Limitation("stablehlo.reduce", "body mul, and, or or xor", "the VectorE/TensorE reduction "
               "implements add, max and min only; runs as one gp_reduce", GPSIMD, form="bitwise-or-mul-reduce"),
    Limitation("stablehlo.reduce", "argmax/argmin (values and indices; JAX's or torch_xla's body)",
               "no native arg-reduction; "
               "runs as one gp_arg_reduce", GPSIMD, form="arg-reduce"),
    Limitation("stablehlo.reduce", "several inputs (other than argmax/argmin with constant inits) "
               "or a body that is no single reducer (lax.reduce over pytrees, jnp.ufunc.reduce)",
               "the body runs as a region program: one gp_region_reduce, folded in XLA's CPU "
               "order", GPSIMD, form="region-reduce"),
    Limitation("stablehlo.sort", "a comparator JAX does not emit for sort/argsort",
               "one gp_region_sort: each comparison runs the comparator as a region program",
               GPSIMD, form="region-sort"),
    Limitation("stablehlo.scatter", "several operands, or an update computation other than "
               "replace, add, max, min, mul or subtract (bools: replace, or, and, max, min); "
               ".at[].apply, .at[].divide", "one gp_region_scatter: the update computation "
               "runs as a region program on each update row in order", GPSIMD,
               form="region-scatter"),
    Limitation("stablehlo.transpose", "a consumer that does not read strided views "
               "(elementwise op, return, GpSimd op)", "the result must be dense: one gp_copy",
               GPSIMD),
    # Rejected forms of supported ops.
    *(Limitation(op, "a body (region) holding an op other than a scalar elementwise one "
                 "(arithmetic, compare, select, clamp, convert, bitcast_convert, bitwise, "
                 "shifts, min/max, the float functions), e.g. reduce_precision or a nested "
                 "region", "region programs are ALU steps over scalars "
                 "(lowering/gpsimd/region_program.py)", form="region-op-without-step")
      for op in ("stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter",
                 "stablehlo.sort", "stablehlo.select_and_scatter")),
    Limitation("stablehlo.reduce_precision", "fp8 operands", "decompose-reduce-precision follows "
               "XLA's IEEE bit decomposition, which fp8 NaN/Inf encodings do not fit; no rule",
               dtypes=("float8_e4m3fn", "float8_e5m2")),
    Limitation("stablehlo.reduce_window", "all", "no native pooling/scan yet: runs as one "
               "gp_reduce_window (pooling, cumsum/cumprod/cummax), or with several inputs (JAX's "
               "jvp of max pooling) or any other body as one gp_region_reduce_window (a region "
               "program)", GPSIMD),
    Limitation("stablehlo.reduce_window", "negative padding", "the window format's paddings "
               "are >= 0 (pad the operand with a slice first)", form="negative-window-padding"),
    Limitation("stablehlo.select_and_scatter", "all", "runs as one gp_select_and_scatter", GPSIMD),
    Limitation("stablehlo.select_and_scatter", "a select region other than one GE/GT/LE/LT "
               "compare of its arguments (or a TOTALORDER float compare), or a scatter region "
               "other than add, max, min or mul", "the regions run as region programs: a "
               "gp_region_reduce_window picks each window's position, a gp_region_scatter "
               "combines the source onto it", GPSIMD, form="region-select-and-scatter"),
    Limitation("stablehlo.rng_bit_generator", "signed or float bits, or a state shape the "
               "algorithm does not take (THREE_FRY: u64[2]; PHILOX/DEFAULT: u64[2] or u64[3])",
               "decompose-rng-bit-generator raises a CompileError naming the algorithm: JAX and "
               "torch_xla only ask for unsigned bits", form="rng-other-types"),
    Limitation("stablehlo.gather", "operand rank 0 or above 7", "an index window [N, S0..Sr-1] "
               "must fit the 8 dims of an access pattern"),
    Limitation("stablehlo.scatter", "operand rank 0 or above 7", "an index window [N, S0..Sr-1] "
               "must fit the 8 dims of an access pattern"),
    Limitation("stablehlo.dynamic_slice", "operand rank 0 or above 7", "an index window "
               "[N, S0..Sr-1] must fit the 8 dims of an access pattern"),
    Limitation("stablehlo.dynamic_update_slice", "operand rank 0 or above 7", "an index window "
               "[N, S0..Sr-1] must fit the 8 dims of an access pattern"),
    # Unsupported ops with a reason beyond "no lowering rule yet".
    *(Limitation(op, "all", _HOST_QUEUES) for op in (
        "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv")),
    Limitation("stablehlo.fft", "an axis longer than 1024", "FFTs run as DFT matmuls whose "
               "twiddle matrices are program constants (complex_fft.MAX_FFT_LENGTH)",
               form="long-fft"),
    *(Limitation(op, "all", _DYNAMIC) for op in (
        "stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_conv", "stablehlo.dynamic_gather",
        "stablehlo.dynamic_iota", "stablehlo.dynamic_pad", "stablehlo.dynamic_reshape",
        "stablehlo.real_dynamic_slice", "stablehlo.get_dimension_size",
        "stablehlo.set_dimension_size")),
    *(Limitation(op, "all", _LEGACY) for op in (
        "stablehlo.broadcast", "stablehlo.einsum", "stablehlo.unary_einsum",
        "stablehlo.torch_index_select", "stablehlo.cross-replica-sum", "stablehlo.map")),
    Limitation("stablehlo.rng", "all", "no lowering rule: JAX no longer emits it; torch_xla's "
               "randperm draws with it (XLA's rng_uniform, whose bits are the backend's own: no "
               "CPU result to match)"),
    *(Limitation(op, "all", "tuples are not a tensor type: the importer rejects any value of tuple "
                 "type, so the message names the first tuple") for op in (
        "stablehlo.tuple", "stablehlo.get_tuple_element")),
    *(Limitation(op, "all", "XLA-internal async ops: the !stablehlo.async_bundle type does not "
                 "parse in jaxlib's MLIR context, so the message names the type") for op in (
        "stablehlo.async_start", "stablehlo.async_done")),
    *(Limitation(op, "all", "quantized element types: jaxlib's MLIR context rejects "
                 "!quant.uniform tensors when parsing, and there is no lowering rule") for op in (
        "stablehlo.uniform_quantize", "stablehlo.uniform_dequantize")),
    Limitation("stablehlo.custom_call", "a call_target_name other than trn_kernel, "
               "trn_host_callback, dce_sink, ApproxTopK (the fallback form: "
               "decompose-approx-top-k sorts), Qr and ProductOfElementaryHouseholderReflectors "
               "(JAX's QR where there is no LAPACK: decompose-householder-qr expands them)",
               "custom calls name host or vendor kernels (LAPACK, cuDNN …) the simulator does "
               "not have; trn_kernel carries a jax_trn.nki kernel (docs/kernels.md), "
               "trn_host_callback a Python callback (docs/host-callbacks.md)",
               form="foreign-custom-call"),
)


def find(op: str, dtype: str | None = None, form: str | None = None) -> list[Limitation]:
  """The limitations that apply to a case of `op` (operand dtype name `dtype`, form tag `form`)."""
  return [lim for lim in LIMITATIONS if lim.applies(op, dtype, form)]


def for_op(op: str) -> list[Limitation]:
  """The entries about `op` itself (not the ALL_OPS ones)."""
  return [lim for lim in LIMITATIONS if lim.op == op]


def marks(op: str, dtype: str | None = None, form: str | None = None) -> list:
  """pytest marks for a test case of `op` at `dtype`: xfail (strict, raising CompileError) where
  an "unsupported" limitation applies; GpSimd limitations compile, so they add no mark."""
  import pytest
  from hlo_lowering.errors import CompileError
  unsupported = [lim for lim in find(op, dtype, form) if lim.kind == UNSUPPORTED]
  if not unsupported:
    return []
  reason = "; ".join(f"{lim.condition}: {lim.reason}" for lim in unsupported)
  return [pytest.mark.xfail(raises=CompileError, strict=True, reason=reason)]


def param(op: str, *values, dtype: str | None = None, form: str | None = None,
          id: str | None = None):  # noqa: A002
  """pytest.param(*values) with the marks of a case of `op` (see `marks`)."""
  import pytest
  return pytest.param(*values, marks=marks(op, dtype, form), id=id)
