"""Process replay: every program of tests/golden/corpus/ compiles to the committed disassembly and,
run on the simulator on fixed inputs, gives the committed modeled times and output bytes.

A refactor of the compiler or the simulator must show zero diff here; a deliberate change is
rerun with TRN_UPDATE_GOLDEN=1 and its snapshot diff reviewed. The corpus inputs (<name>.mlir)
come from tests/golden/make_corpus.py; the snapshots are <name>.disasm.txt and <name>.run.json.
"""

import difflib
import hashlib
import json
import os
import pathlib
import zlib

import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering.program import disassemble
from jax_trn import compilation

CORPUS = pathlib.Path(__file__).parent / "golden" / "corpus"
PROGRAMS = sorted(p.stem for p in CORPUS.glob("*.mlir"))
DIFF_LINES = 40
# The simulator's dtype names (program_info) as numpy dtypes.
DTYPES = {"pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
          "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
          "f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16,
          "f8e5m2": ml_dtypes.float8_e5m2, "f8e4m3fn": ml_dtypes.float8_e4m3fn}


def _input(rng: np.random.Generator, dtype: str, shape: tuple) -> np.ndarray:
  """Seeded values per dtype: floats ~ N(0, 1); integers in [0, 8), so that index operands
  (gather, scatter, dynamic_slice, switch) stay in range of every corpus operand."""
  if dtype == "pred":
    return rng.random(shape) < 0.5
  np_dtype = np.dtype(DTYPES[dtype])
  if np.issubdtype(np_dtype, np.integer):
    return rng.integers(0, 8, size=shape).astype(np_dtype)
  return rng.standard_normal(shape).astype(np.float32).astype(np_dtype)


def _run_record(program: bytes, name: str) -> str:
  """Modeled figures of one execution and a sha256 of every output's bytes, as sorted JSON."""
  native = harness.native()
  info = native.program_info(program)
  rng = np.random.default_rng(zlib.crc32(name.encode()))
  inputs = [_input(rng, p["dtype"], tuple(p["shape"])) for p in info["parameters"]]
  outputs, profile = native.run_program(program, inputs, record_timeline=True)
  timeline = json.dumps(profile["timeline"], sort_keys=True).encode()
  record = {
      "device_time_ns": profile["device_time_ns"],
      "matmul_flops": profile["matmul_flops"],
      "streams": profile["streams"],
      "timeline_instructions": len(profile["timeline"]),
      "timeline_sha256": hashlib.sha256(timeline).hexdigest(),
      "temporary_bytes": info["temporary_bytes"],
      "constant_bytes": info["constant_bytes"],
      "outputs": [{"dtype": str(o.dtype), "shape": list(o.shape),
                   "sha256": hashlib.sha256(np.ascontiguousarray(o).tobytes()).hexdigest()}
                  for o in outputs],
  }
  return json.dumps(record, sort_keys=True, indent=1) + "\n"


def _check_snapshot(path: pathlib.Path, actual: str) -> None:
  if os.environ.get("TRN_UPDATE_GOLDEN"):
    path.write_text(actual)
  expected = path.read_text() if path.exists() else ""
  if actual != expected:
    diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                     f"{path.name} (committed)", f"{path.name} (now)",
                                     lineterm="", n=2))
    pytest.fail(f"{path.name} differs from the committed snapshot (rerun with "
                f"TRN_UPDATE_GOLDEN=1 only for a deliberate change):\n"
                + "\n".join(diff[:DIFF_LINES]), pytrace=False)


@pytest.mark.parametrize("name", PROGRAMS)
def test_corpus_program_matches_snapshot(name):
  harness.native()
  program = compilation.compile_text((CORPUS / f"{name}.mlir").read_text(), "trn2")
  _check_snapshot(CORPUS / f"{name}.disasm.txt", disassemble(program))
  _check_snapshot(CORPUS / f"{name}.run.json", _run_record(program, name))


def test_corpus_is_large_enough():
  assert len(PROGRAMS) >= 30, PROGRAMS
