"""PJRT_Client_Compile's call into the Python compiler (pjrt_plugin/compiler_bridge.cc): what
reaches hlo_lowering.driver.compile_for_pjrt, and how its results and exceptions come back as
PJRT errors. The compiler is replaced by stand-ins; the plugin is the real one."""

import pytest
from pypjrt import errors
from pypjrt.client import Client

import hlo_lowering.driver
from hlo_lowering.errors import CompileError

from test_pjrt_execute import add_program
from test_pjrt_buffers import plugin  # noqa: F401  (fixture)

TEXT = "module @m { func.func public @main() { return } }"


@pytest.fixture
def client(plugin):  # noqa: F811
  c = Client(plugin, options={"target": "trn2"})
  yield c
  c.close()


def test_the_compiler_receives_code_format_options_and_target(client, monkeypatch):
  seen = {}

  def compile_for_pjrt(code, fmt, compile_options, target):
    seen.update(code=code, fmt=fmt, options=compile_options, target=target)
    return add_program()

  monkeypatch.setattr(hlo_lowering.driver, "compile_for_pjrt", compile_for_pjrt)
  exe = client.compile(TEXT)
  assert seen["code"] == TEXT.encode() and seen["fmt"] == "mlir" and seen["target"] == "trn2"
  assert isinstance(seen["options"], bytes) and seen["options"]
  assert exe.num_outputs == 1


@pytest.mark.parametrize("code, error", [
    ("INVALID_ARGUMENT", errors.InvalidArgument), ("UNIMPLEMENTED", errors.Unimplemented),
    ("RESOURCE_EXHAUSTED", errors.ResourceExhausted)])
def test_compile_errors_keep_their_code_and_message(client, monkeypatch, code, error):
  def compile_for_pjrt(*_):
    raise CompileError("stablehlo.foo on f32[2] at f.py:3 is not supported", code)

  monkeypatch.setattr(hlo_lowering.driver, "compile_for_pjrt", compile_for_pjrt)
  with pytest.raises(error, match=r"^stablehlo.foo on f32\[2\] at f.py:3 is not supported "
                                  r"\[trn plugin, PJRT_Client_Compile\]$"):
    client.compile(TEXT)


def test_other_exceptions_are_internal_compiler_errors_with_a_traceback(client, monkeypatch):
  def compile_for_pjrt(*_):
    raise ValueError("boom")

  monkeypatch.setattr(hlo_lowering.driver, "compile_for_pjrt", compile_for_pjrt)
  with pytest.raises(errors.Internal) as info:
    client.compile(TEXT)
  message = info.value.message
  assert message.startswith("internal compiler error: ValueError: boom\n")
  assert "test_pjrt_compile_bridge.py" in message and 'raise ValueError("boom")' in message


def test_a_non_bytes_result_is_internal(client, monkeypatch):
  monkeypatch.setattr(hlo_lowering.driver, "compile_for_pjrt", lambda *_: "text")
  with pytest.raises(errors.Internal, match="compile_for_pjrt returned str, not bytes"):
    client.compile(TEXT)


def test_a_program_the_runtime_rejects_is_internal(client, monkeypatch):
  monkeypatch.setattr(hlo_lowering.driver, "compile_for_pjrt", lambda *_: b"garbage")
  with pytest.raises(errors.Internal, match="the trn compiler produced an invalid program"):
    client.compile(TEXT)


def _program_breaking_a_rule() -> bytes:
  """What a compiler bug could emit: an integer-only ALU op on f32 tiles."""
  from hlo_lowering.program import Alu, DType, Memory, ProgramBuilder, TileAP
  b = ProgramBuilder("trn2")
  debug = b.debug("stablehlo.and", "jit(f)/and", "model.py:12:8")
  tile = TileAP.dense(Memory.SBUF, DType.F32, 0, 128, 0, (64,))
  b.tensor_tensor(Alu.AND, tile, tile, tile, debug=debug)
  return b.serialize()


def test_a_compiler_bug_names_the_instruction_and_its_source_line(client, monkeypatch):
  monkeypatch.setattr(hlo_lowering.driver, "compile_for_pjrt",
                      lambda *_: _program_breaking_a_rule())
  expected = (r"invalid program: .*DVE instruction 0 \(tensor_tensor; stablehlo.and "
              r"\"jit\(f\)/and\" at model.py:12:8\): ALU op and needs integer data")
  with pytest.raises(errors.Internal, match=expected):
    client.compile(TEXT)


def test_the_client_compiles_again_after_failures(client, monkeypatch):
  monkeypatch.setattr(hlo_lowering.driver, "compile_for_pjrt", lambda *_: b"garbage")
  with pytest.raises(errors.Internal):
    client.compile(TEXT)
  monkeypatch.setattr(hlo_lowering.driver, "compile_for_pjrt", lambda *_: add_program())
  assert client.compile(TEXT).num_outputs == 1
