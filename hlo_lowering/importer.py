"""Program bytes → the compiler's IR (hlo_lowering.ir).

Accepted inputs: a StableHLO portable artifact (VHLO bytecode, what JAX sends), MLIR bytecode or
text, and an HloModuleProto (fmt "hlo", what torch_xla sends). CHLO ops in text input are
decomposed into StableHLO by a round trip through the portable-artifact serializer, which
legalizes them exactly as JAX does before it hands a program to a plugin.
"""

from __future__ import annotations

import logging

import numpy as np
from jaxlib.mlir import ir

from hlo_lowering import attributes, jaxlib_private, legacy_index_vectors
from hlo_lowering.errors import CompileError, INVALID_ARGUMENT, UNIMPLEMENTED
from hlo_lowering.ir import Block, Function, Module, Op, Region, Value
from hlo_lowering.locations import parse_location
from hlo_lowering.program import DType

logger = logging.getLogger(__name__)

_VHLO_MAGIC = b"ML\xefR"
_PORTABLE_TARGET = "1.0.0"


def _context() -> ir.Context:
  ctx = jaxlib_private.make_ir_context()
  ctx.allow_unregistered_dialects = True
  return ctx


def _parse_mlir(code: bytes, ctx: ir.Context) -> ir.Module:
  from jaxlib.mlir.dialects import stablehlo
  try:
    if code.startswith(_VHLO_MAGIC) and b"StableHLO_v" in code[:32]:
      return stablehlo.deserialize_portable_artifact(ctx, code)
    text_or_bytecode = code if code.startswith(_VHLO_MAGIC) else code.decode("utf-8")
    return ir.Module.parse(text_or_bytecode, context=ctx)
  except (ir.MLIRError, ValueError, UnicodeDecodeError) as e:
    raise CompileError(f"the program is not valid StableHLO/MLIR: {e}", INVALID_ARGUMENT) from e


def _legalize_chlo(module: ir.Module, ctx: ir.Context) -> ir.Module:
  """CHLO → StableHLO via JAX's own serializer (the only CHLO legalization jaxlib exposes)."""
  from jaxlib.mlir.dialects import stablehlo
  artifact = jaxlib_private.serialize_portable_artifact(
      module.operation.get_asm(enable_debug_info=True), stablehlo.get_current_version())
  return stablehlo.deserialize_portable_artifact(ctx, artifact)


# HLO ops with no StableHLO counterpart come out of hlo_to_stablehlo as mhlo ops;
# these have a CHLO twin, which _legalize_chlo decomposes as it does JAX's.
_MHLO_AS_CHLO = {"mhlo.erf": "chlo.erf"}


def _mhlo_as_chlo(module: ir.Module, ctx: ir.Context) -> ir.Module:
  text = module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True)
  if not any(f'"{name}"' in text for name in _MHLO_AS_CHLO):
    return module
  for mhlo, chlo in _MHLO_AS_CHLO.items():
    text = text.replace(f'"{mhlo}"', f'"{chlo}"')
  return ir.Module.parse(text, context=ctx)


def _has_chlo_ops(operation) -> bool:
  for region in operation.regions:
    for block in region.blocks:
      for op in block.operations:
        if op.operation.name.startswith("chlo.") or _has_chlo_ops(op.operation):
          return True
  return False


def _parse_converted_hlo(proto: bytes, stablehlo_bytecode: bytes, ctx: ir.Context) -> ir.Module:
  """The converted HloModuleProto; when it does not verify because of HLO forms StableHLO lacks
  (legacy_index_vectors), the conversion again as text with those forms rewritten."""
  try:
    return _parse_mlir(stablehlo_bytecode, ctx)
  except CompileError as invalid:
    text, rewritten = legacy_index_vectors.scalar_indices(jaxlib_private.hlo_to_generic_mlir(proto))
    if not rewritten:
      raise
    logger.debug("rewrote %d vector-indexed dynamic slices of an HLO module", rewritten)
    try:
      return ir.Module.parse(text, context=ctx)
    except ir.MLIRError:
      raise invalid from None


def parse(code: bytes, fmt: str) -> tuple[ir.Module, ir.Context]:
  """The MLIR module of a program in either format, with the context that owns it."""
  ctx = _context()
  if fmt == "hlo":
    try:
      bytecode = jaxlib_private.hlo_to_stablehlo(code)
    except Exception as e:  # jaxlib raises XlaRuntimeError and others for a bad proto
      raise CompileError(f"the HloModuleProto could not be converted to StableHLO: {e}",
                         INVALID_ARGUMENT) from e
    module = _mhlo_as_chlo(_parse_converted_hlo(code, bytes(bytecode), ctx), ctx)
  elif fmt == "mlir":
    module = _parse_mlir(bytes(code), ctx)
  else:
    raise CompileError(f"program format {fmt!r} is not supported (expected 'mlir' or 'hlo')",
                       INVALID_ARGUMENT)
  if _has_chlo_ops(module.operation):
    module = _legalize_chlo(module, ctx)
  return module, ctx


def _attributes(operation) -> dict:
  return {name: attributes.to_python(operation.attributes[name])
          for name in operation.attributes}


# after_all joins tokens, create_token makes one: both are imported as an empty constant.
_TOKEN_PRODUCERS = frozenset({"stablehlo.after_all", "stablehlo.create_token"})


def _dot_as_dot_general(operands: list[Value], attrs: dict) -> tuple[str, dict]:
  """stablehlo.dot (what HLO protos from torch_xla convert to) is the dot_general that contracts
  the lhs's last dimension with the rhs's first, with no batch dimensions."""
  dims = {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
          "lhs_contracting_dimensions": [operands[0].type.rank - 1],
          "rhs_contracting_dimensions": [0]}
  return "stablehlo.dot_general", dict(attrs, dot_dimension_numbers=dims)



def _match_buffer_donors(output_aliases: dict[int, int], arg_attrs: list[dict], arg_types,
                         result_types) -> None:
  """Gives each `jax.buffer_donor` argument (JAX's donation where it leaves the pairing to the
  compiler: a sharded jit) the first output of its type that no argument aliases yet, as XLA
  does; one without such an output is not donated."""
  taken = set(output_aliases.values())
  for i, attrs in enumerate(arg_attrs):
    if not attrs.get("jax.buffer_donor") or i in output_aliases:
      continue
    match = next((o for o, t in enumerate(result_types) if o not in taken and t == arg_types[i]),
                 None)
    if match is not None:
      output_aliases[i] = match
      taken.add(match)

class _Importer:
  def __init__(self):
    self._values: dict[ir.Value, Value] = {}
    # A custom call with a tuple result (torch_xla's multi-output custom calls) is imported with
    # one result per tuple element; stablehlo.get_tuple_element then names one of them.
    self._tuples: dict[ir.Value, list[Value]] = {}

  def _value(self, mlir_value: ir.Value, what: str) -> Value:
    try:
      return self._values[mlir_value]
    except KeyError:
      raise CompileError(f"{what}: operand is not defined before its use",
                         INVALID_ARGUMENT) from None

  def block(self, mlir_block: ir.Block, what: str) -> Block:
    args = []
    for i, arg in enumerate(mlir_block.arguments):
      value = Value(attributes.tensor_type(arg.type, f"{what} argument {i}"))
      self._values[arg] = value
      args.append(value)
    ops = [self.op(o) for o in mlir_block.operations]
    return Block(args, [op for op in ops if op is not None])

  def _tuple_element(self, operation) -> None:
    """get_tuple_element of a flattened tuple: its result is that element, no op."""
    elements = self._tuples.get(operation.operands[0])
    if elements is None:
      raise CompileError(f"stablehlo.get_tuple_element at {parse_location(str(operation.location))}"
                         ": only the tuple result of a custom call is supported", UNIMPLEMENTED)
    self._values[operation.results[0]] = elements[attributes.to_python(operation.attributes["index"])]

  def op(self, mlir_op) -> Op | None:
    operation = mlir_op.operation
    loc = parse_location(str(operation.location))
    what = f"{operation.name} at {loc}"
    if operation.name == "stablehlo.get_tuple_element":
      return self._tuple_element(operation)
    operands = [self._value(v, what) for v in operation.operands]
    tuple_result = (operation.name == "stablehlo.custom_call" and len(operation.results) == 1
                    and isinstance(operation.results[0].type.maybe_downcast(), ir.TupleType))
    if tuple_result:
      tuple_type = operation.results[0].type.maybe_downcast()
      result_types = [attributes.tensor_type(tuple_type.get_type(i), f"{what} result {i}")
                      for i in range(tuple_type.num_types)]
    else:
      result_types = [attributes.tensor_type(r.type, what) for r in operation.results]
    if (operation.name == "stablehlo.constant" and result_types
        and result_types[0].dtype == DType.C64):
      attrs = {"value": attributes.complex_constant(operation, result_types[0])}
    else:
      attrs = _attributes(operation)
    regions = [Region(self.block(r.blocks[0], what)) for r in operation.regions
               if len(r.blocks)]
    name = operation.name
    if name == "stablehlo.dot":
      name, attrs = _dot_as_dot_general(operands, attrs)
    elif name in _TOKEN_PRODUCERS:
      # A token holds nothing (attributes.TOKEN_TYPE); what orders host callbacks is the data
      # dependence through it and POOL's program order (lowering/host_callback.py).
      name, operands, attrs = "stablehlo.constant", [], {"value": np.zeros((0,), np.bool_)}
    op = Op(name, operands, result_types, attrs, regions, loc)
    if tuple_result:
      self._tuples[operation.results[0]] = list(op.results)
      return op
    for mlir_result, value in zip(operation.results, op.results):
      self._values[mlir_result] = value
    return op

  def function(self, func_op) -> Function:
    operation = func_op.operation
    name = attributes.to_python(operation.attributes["sym_name"])
    what = f"function @{name}"
    body = self.block(operation.regions[0].blocks[0], what)
    function_type = ir.FunctionType(ir.TypeAttr(operation.attributes["function_type"]).value)
    result_types = [attributes.tensor_type(t, f"{what} result {i}")
                    for i, t in enumerate(function_type.results)]
    public = ("sym_visibility" not in operation.attributes
              or attributes.to_python(operation.attributes["sym_visibility"]) == "public")
    result_names = []
    arg_attrs = _per_value_attrs(operation, "arg_attrs", len(body.args))
    result_attrs = _per_value_attrs(operation, "res_attrs", len(result_types))
    if "res_attrs" in operation.attributes:
      result_names = [attrs.get("jax.result_info", "") for attrs in result_attrs]
    output_aliases = {i: int(attrs["tf.aliasing_output"]) for i, attrs in enumerate(arg_attrs)
                      if "tf.aliasing_output" in attrs}
    _match_buffer_donors(output_aliases, arg_attrs, [a.type for a in body.args], result_types)
    function = Function(name, body, result_types, public, result_names=result_names or None,
                        output_aliases=output_aliases)
    function.arg_attrs, function.result_attrs = arg_attrs, result_attrs
    return function


def _per_value_attrs(operation, name: str, count: int) -> list[dict]:
  """A function's argument or result attributes (sdy.sharding, jax.result_info, ...), one dict
  per value."""
  if name not in operation.attributes:
    return [{} for _ in range(count)]
  return [a if isinstance(a, dict) else {}
          for a in attributes.to_python(operation.attributes[name])]


def import_module(module: ir.Module, source_format: str = "mlir") -> Module:
  """Converts every func.func of `module`; the entry is `main` (else the only public function).
  `source_format` is the format the program arrived in ("mlir" or "hlo")."""
  importer = _Importer()
  functions: dict[str, Function] = {}
  meshes: dict[str, str] = {}
  for op in module.body.operations:
    # JAX declares a Shardy mesh in every module; the partitioner reads it (its text).
    if op.operation.name == "sdy.mesh":
      meshes[attributes.to_python(op.operation.attributes["sym_name"])] = str(
          op.operation.attributes["mesh"])
      continue
    if op.operation.name != "func.func":
      raise CompileError(f"top-level op {op.operation.name} is not supported (only func.func)",
                         INVALID_ARGUMENT)
    function = importer.function(op)
    functions[function.name] = function
  attrs = _attributes(module.operation)
  attrs["sdy.meshes"] = meshes
  entry = "main"
  if entry not in functions:
    public = [f.name for f in functions.values() if f.public]
    if len(public) != 1:
      raise CompileError(f"the module has no entry function 'main' (public functions: {public})",
                         INVALID_ARGUMENT)
    entry = public[0]
  source = module.operation.get_asm(enable_debug_info=True)
  return Module(functions, attrs, source=source, entry=entry, source_format=source_format)


def import_program(code: bytes, fmt: str) -> Module:
  mlir_module, ctx = parse(code, fmt)
  with ctx:
    return import_module(mlir_module, fmt)
