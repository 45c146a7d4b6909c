"""MLIR attributes and types → plain Python for the IR.

Dense elements become numpy arrays (splats as zero-stride `np.broadcast_to` views so a huge
splat costs nothing); dimension-number attributes become dicts of lists; enums become strings.
"""

from __future__ import annotations

import re

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlo_lowering.errors import CompileError, UNIMPLEMENTED
from hlo_lowering.ir import TensorType
from hlo_lowering.program import DType

_ELEMENT_TYPES = {
    "i1": DType.PRED, "i8": DType.S8, "i16": DType.S16, "i32": DType.S32, "i64": DType.S64,
    "ui8": DType.U8, "ui16": DType.U16, "ui32": DType.U32, "ui64": DType.U64,
    "f16": DType.F16, "f32": DType.F32, "f64": DType.F64, "bf16": DType.BF16,
    "f8E5M2": DType.F8E5M2, "f8E4M3FN": DType.F8E4M3FN,
    # Only until decompose-complex splits it into float32 (real, imaginary) pairs.
    "complex<f32>": DType.C64,
    # Only until widen-int4 holds them as int8/uint8.
    "i4": DType.S4, "ui4": DType.U4,
}
# jnp.int2/uint2 arrays: no 2-bit type in the program format, nor a widening of them.
_SUB_BYTE_INTEGERS = {"i2": "int2", "ui2": "uint2"}
_COMPLEX128_HINT = ("NeuronCores have no float64, so no complex128: use complex64 (in JAX: leave "
                    "jax_enable_x64 off; in PyTorch: torch.complex64)")


def element_dtype(element_type: str, what: str) -> DType:
  """The program DType for an MLIR element type name; CompileError for one we cannot hold."""
  dtype = _ELEMENT_TYPES.get(element_type)
  if element_type == "complex<f64>":
    raise CompileError(f"{what}: element type complex<f64>: {_COMPLEX128_HINT}", UNIMPLEMENTED)
  if element_type in _SUB_BYTE_INTEGERS:
    name = _SUB_BYTE_INTEGERS[element_type]
    wide = "int8" if element_type.startswith("i") else "uint8"
    raise CompileError(f"{what}: element type {element_type} ({name}): NeuronCores have no "
                       f"2-bit integers ({name} is not supported; int4 and uint4 are); widen to "
                       f"{wide} (x.astype(jnp.{wide})), which holds every {name} value",
                       UNIMPLEMENTED)
  if dtype is None:
    # f64 parses (check-supported refuses it with its own advice) but NeuronCores do not hold it.
    held = ", ".join(name for name, d in _ELEMENT_TYPES.items() if d != DType.F64)
    raise CompileError(f"{what}: element type {element_type} is not supported on NeuronCores "
                       f"(supported: {held})", UNIMPLEMENTED)
  return dtype


# A token orders side effects (host callbacks) by the data dependence it carries; it holds no
# data, so the program sees a zero-size pred[0] value (JAX passes pred[0] buffers for tokens).
TOKEN_TYPE = TensorType((0,), DType.PRED)


def tensor_type(mlir_type: ir.Type, what: str) -> TensorType:
  mlir_type = mlir_type.maybe_downcast()
  if str(mlir_type) == "!stablehlo.token":
    return TOKEN_TYPE
  if not isinstance(mlir_type, ir.RankedTensorType):
    raise CompileError(f"{what}: type {mlir_type} is not a ranked tensor (tuples and "
                       "dynamic shapes are not supported)", UNIMPLEMENTED)
  ranked = mlir_type
  if not ranked.has_static_shape:
    raise CompileError(f"{what}: dynamic shape {mlir_type} is not supported", UNIMPLEMENTED)
  return TensorType(tuple(ranked.shape), element_dtype(str(ranked.element_type), what))


_HEX_BODY = re.compile(r'^dense<"0x([0-9A-Fa-f]*)">')
_TOKEN = re.compile(r"0x[0-9A-Fa-f]+|true|false|[-+]?(?:inf|nan)|[-+]?[0-9.]+(?:[eE][-+]?\d+)?")


def _dense_from_text(text: str, ttype: TensorType) -> np.ndarray:
  """Parses `dense<...>` text: used for element types the buffer protocol cannot give (bf16, f8)."""
  np_dtype = ttype.dtype.numpy
  hex_match = _HEX_BODY.match(text)
  if hex_match:
    flat = np.frombuffer(bytes.fromhex(hex_match.group(1)), dtype=np_dtype)
  else:
    body = text[len("dense<"):text.rindex("> :")]
    # complex64 elements are "(re,im)" pairs of float32 tokens.
    token_dtype = np.dtype(np.float32) if ttype.dtype == DType.C64 else np_dtype
    values = []
    for token in _TOKEN.findall(body):
      if token.startswith("0x"):
        bits = np.array([int(token, 16)], dtype=f"u{token_dtype.itemsize}")
        values.append(bits.view(token_dtype)[0])
      elif token in ("true", "false"):
        values.append(token == "true")
      else:
        values.append(np.float64(token))
    flat = np.array(values).astype(token_dtype).view(np_dtype)
  if flat.size == 1:
    return np.broadcast_to(flat.reshape(()), ttype.shape)
  return flat.reshape(ttype.shape)


def complex_constant(operation, ttype: TensorType) -> np.ndarray:
  """The value of a complex64 stablehlo.constant, read from its text: the Python bindings
  cannot hand out a complex DenseElementsAttr (reading the attribute aborts the process)."""
  text = str(operation)
  return _dense_from_text(text[text.index("dense<"):], ttype)


def dense_elements(attr: ir.Attribute) -> np.ndarray:
  shape = tuple(attr.type.shape)
  try:
    array = np.asarray(attr)
  except (BufferError, ValueError, TypeError):
    return _dense_from_text(str(attr), tensor_type(attr.type, "constant"))
  if array.size == 0:  # a zero-size splat (e.g. f16 after CHLO decomposition) has no element
    return np.zeros(shape, dtype=array.dtype)
  if attr.is_splat:
    return np.broadcast_to(array.reshape(-1)[:1].reshape(()), shape)
  return array.reshape(shape)


_DIMENSION_NUMBERS = (
    (stablehlo.DotDimensionNumbers, ("lhs_batching_dimensions", "rhs_batching_dimensions",
                                     "lhs_contracting_dimensions", "rhs_contracting_dimensions")),
    (stablehlo.GatherDimensionNumbers, ("offset_dims", "collapsed_slice_dims",
                                        "operand_batching_dims", "start_indices_batching_dims",
                                        "start_index_map")),
    (stablehlo.ScatterDimensionNumbers, ("update_window_dims", "inserted_window_dims",
                                         "input_batching_dims", "scatter_indices_batching_dims",
                                         "scattered_dims_to_operand_dims")),
)
# Convolution dimension numbers: the *_dimensions fields are lists, the others one dim each.
_CONV_DIMENSION_NAMES = (
    "input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
    "kernel_input_feature_dimension", "kernel_output_feature_dimension",
    "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension",
    "output_spatial_dimensions")
_DENSE_ARRAYS = (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr, ir.DenseI16ArrayAttr,
                 ir.DenseI8ArrayAttr, ir.DenseBoolArrayAttr, ir.DenseF32ArrayAttr,
                 ir.DenseF64ArrayAttr)


def to_python(attr: ir.Attribute):
  """One attribute as plain Python; unknown attribute kinds keep their MLIR text."""
  attr = attr.maybe_downcast()
  if isinstance(attr, _DENSE_ARRAYS):
    return list(attr)
  if isinstance(attr, ir.DenseElementsAttr):
    return dense_elements(attr)
  if isinstance(attr, (ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr, ir.StringAttr,
                       ir.FlatSymbolRefAttr)):
    return attr.value
  if isinstance(attr, ir.UnitAttr):
    return True
  if isinstance(attr, ir.ArrayAttr):
    return [to_python(a) for a in attr]
  if isinstance(attr, ir.DictAttr):
    return {attr[i].name: to_python(attr[i].attr) for i in range(len(attr))}
  if isinstance(attr, ir.TypeAttr):
    return str(attr.value)
  for cls in (stablehlo.ComparisonDirectionAttr, stablehlo.ComparisonTypeAttr,
              stablehlo.PrecisionAttr):
    if cls.isinstance(attr):
      return cls(attr).value
  if stablehlo.ConvDimensionNumbers.isinstance(attr):
    typed = stablehlo.ConvDimensionNumbers(attr)
    return {name: (list(value) if name.endswith("dimensions") else value)
            for name in _CONV_DIMENSION_NAMES for value in [getattr(typed, name)]}
  for cls, names in _DIMENSION_NUMBERS:
    if cls.isinstance(attr):
      typed = cls(attr)
      result = {name: list(getattr(typed, name)) for name in names}
      if hasattr(typed, "index_vector_dim"):
        result["index_vector_dim"] = typed.index_vector_dim
      return result
  return str(attr)
