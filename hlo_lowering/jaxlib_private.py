"""The compiler's private JAX/jaxlib symbols, gathered in one place (checked against jax and
jaxlib 0.10.2, the one version jax-trn is built for: jax_trn/_compat.py).

Every other module of hlo_lowering uses public API only (`jaxlib.mlir`); a test
(tests/test_import_graph.py) fails if `jax._src` appears anywhere else. Each symbol here is one
JAX has no public spelling for:

- `jax._src.interpreters.mlir.make_ir_context`: an MLIR context with every dialect JAX lowers to
  (stablehlo, chlo, func, sdy, ...) registered and loaded, i.e. the context JAX itself lowers in;
  a bare `jaxlib.mlir.ir.Context()` has none of them loaded.
- `jax._src.lib._jax.mlir.serialize_portable_artifact`: the serializer JAX runs before it hands a
  program to a plugin; the round trip through it is the only CHLO → StableHLO legalization
  jaxlib exposes (importer._legalize_chlo).
- `jax._src.lib._jax.mlir.hlo_to_stablehlo`: HloModuleProto → StableHLO (torch_xla sends HLO).
- `jax._src.lib._jax.mlir.xla_computation_to_mlir_module`: the same conversion as generic-form
  text, printed without verifying it (legacy_index_vectors rewrites what does not verify).

Imported when first used, so importing the compiler does not import JAX's internals.
"""

from __future__ import annotations


def make_ir_context():
  """A fresh MLIR context with JAX's dialects loaded."""
  from jax._src.interpreters import mlir
  return mlir.make_ir_context()


def serialize_portable_artifact(mlir_text: str, target_version: str) -> bytes:
  """`mlir_text` (StableHLO/CHLO, with debug info) as a portable artifact at `target_version`."""
  from jax._src.lib import _jax
  return _jax.mlir.serialize_portable_artifact(mlir_text, target_version, False)


def hlo_to_stablehlo(hlo_module_proto: bytes) -> bytes:
  """A serialized HloModuleProto as StableHLO (MLIR bytecode)."""
  from jax._src.lib import _jax
  return _jax.mlir.hlo_to_stablehlo(hlo_module_proto)


def hlo_to_generic_mlir(hlo_module_proto: bytes) -> str:
  """A serialized HloModuleProto as StableHLO generic-form text, not verified."""
  from jax._src.lib import _jax, xla_client
  return _jax.mlir.xla_computation_to_mlir_module(xla_client.XlaComputation(hlo_module_proto))
