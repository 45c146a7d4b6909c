"""Compile a JAX function with hlo_lowering, run it on the simulator, compare with JAX on CPU.

The program reaches the compiler exactly as the plugin receives it from JAX: `jax.jit(f).lower`
→ StableHLO → portable artifact (VHLO) at the current StableHLO version.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from cpu_reference import assert_close
from hlo_lowering import jaxlib_private, pipeline
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.report import CompileReport
from jax_trn import compilation, config


def artifact(f, *args) -> bytes:
  """The portable artifact JAX would hand a plugin for jit(f)(*args)."""
  from jaxlib.mlir.dialects import stablehlo
  text = jax.jit(f).lower(*args).as_text(debug_info=True)
  return jaxlib_private.serialize_portable_artifact(text, stablehlo.get_current_version())


def native():
  """jax_trn._native, or skip the test when the bindings are not built."""
  return pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built",
                             exc_type=ImportError)


def compile_code(code: bytes, fmt: str = "mlir", target: str = "trn2", lnc: int | None = None,
                 **options) -> bytes:
  """Compiles program bytes through the plugin's compile service as PJRT_Client_Compile does;
  `options` are parsed compile options (num_replicas=4). `lnc`: the device's physical cores as
  the PJRT client passes them (None: a description without it, one core)."""
  target_spec = dict(config.target_spec(target))
  if lnc is not None:
    target_spec["lnc"] = lnc
  return compilation.compile_for_pjrt(code, fmt, options, target_spec)


def gelu_forward_and_backward(x, g):
  """jax.nn.gelu and its vjp at cotangent g, the MLP activation of a transformer block's step:
  in bf16 one fused tile loop of about twenty ops alternating between ScalarE and VectorE."""
  y, vjp = jax.vjp(jax.nn.gelu, x)
  return y, vjp(g)[0]


def compile_without(f, args, skipped: tuple[str, ...], lnc: int = 1) -> bytes:
  """The program of jit(f)(*args) compiled by the pipeline without the passes named `skipped`
  (none: the whole pipeline): a reference for what a pass must not change."""
  text = jax.jit(f).lower(*args).as_text()
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(pipeline, "PASSES", tuple(p for p in pipeline.PASSES if p.name not in skipped))
    return compilation.compile_text(text, lnc=lnc)


def compile_fn(f, *args, target: str = "trn2", lnc: int | None = None) -> bytes:
  """The program, validated by the C++ loader (as the plugin's compile path does)."""
  program = compile_code(artifact(f, *args), target=target, lnc=lnc)
  native().program_info(program)
  return program


def through_backend(builder: ProgramBuilder) -> ProgramBuilder:
  """A hand-written program after the back-end stages, as a compiled one: its semaphore waits
  derived (its explicit DMA queues and absolute tile offsets kept), ready to serialize."""
  pipeline.run_backend(builder, config.target_spec(builder.target), CompileReport())
  return builder


def finish(builder: ProgramBuilder) -> bytes:
  """`through_backend(builder)`, serialized."""
  return through_backend(builder).serialize()


def run_program(program: bytes, args) -> list[np.ndarray]:
  outputs, _ = native().run_program(program, [np.asarray(a) for a in args])
  return outputs


def check(f, *args, scale: float = 1.0, target: str = "trn2", bounds=None, lnc: int | None = None):
  """Compiles f, runs it on the simulator and compares with f on the JAX CPU backend
  (cpu_reference.assert_close: per-dtype tolerances times `scale`, or per-element `bounds`)."""
  program = compile_fn(f, *args, target=target, lnc=lnc)
  cpu = jax.devices("cpu")[0]
  expected = jax.jit(f)(*[jax.device_put(a, cpu) for a in args])
  expected_leaves = jax.tree_util.tree_leaves(expected)
  # The inputs as JAX passes them to a device: canonical dtypes (int64 -> int32 without x64).
  inputs = [np.array(jax.device_put(a, cpu)) for a in jax.tree_util.tree_leaves(args)]
  actual = run_program(program, inputs)
  assert_close(list(actual), [np.asarray(e) for e in expected_leaves], scale=scale,
               err_msg=getattr(f, "__name__", "f"), bounds=bounds)
  return program
