"""PJRT_Client_Compile's call into the Python compiler (pjrt_plugin/compiler_bridge.cc): what
reaches jax_trn.compilation.compile_for_pjrt (the plugin's compile service), and how its results
and exceptions come back as PJRT errors. The compiler is replaced by stand-ins; the plugin is the real one."""

import pytest
from pypjrt import errors
from pypjrt.client import Client
from pypjrt.compile_options import CompileOptions

from hlo_lowering.errors import CompileError
from jax_trn import _native, compilation

from test_pjrt_execute import add_program
from test_pjrt_buffers import plugin  # noqa: F401  (fixture)

TEXT = "module @m { func.func public @main() { return } }"


@pytest.fixture
def client(plugin):  # noqa: F811
  c = Client(plugin, options={"target": "trn2"})
  yield c
  c.close()


def _recording(seen):
  def compile_for_pjrt(code, fmt, options, target):
    seen.update(code=code, fmt=fmt, options=options, target=target)
    return add_program()
  return compile_for_pjrt


def test_the_compiler_receives_code_format_parsed_options_and_target(client, monkeypatch):
  seen = {}
  monkeypatch.setattr(compilation, "compile_for_pjrt", _recording(seen))
  exe = client.compile(TEXT)
  assert seen["code"] == TEXT.encode() and seen["fmt"] == "mlir"
  assert seen["options"] == {"num_replicas": 1, "num_partitions": 1}
  # The client's target description, with its devices' LNC (the compiler splits LNC=2 work).
  assert seen["target"] == {**_native.target_spec("trn2"), "lnc": 2}
  assert exe.num_outputs == 1


def test_the_options_are_parsed_in_cpp_once(client, monkeypatch):
  seen = {}
  monkeypatch.setattr(compilation, "compile_for_pjrt", _recording(seen))
  client.compile(TEXT, options=CompileOptions(num_replicas=4, num_partitions=2))
  assert seen["options"] == {"num_replicas": 4, "num_partitions": 2}


def test_replicated_and_partitioned_programs_are_unimplemented_with_the_compilers_message(client):
  with pytest.raises(errors.Unimplemented, match=r"^replicated and partitioned multi-device "
                                                 r"programs .* \(num_replicas=2, num_partitions=2\)"):
    client.compile(TEXT, options=CompileOptions(num_replicas=2, num_partitions=2))


def test_an_invalid_options_proto_is_invalid_argument(client):
  with pytest.raises(errors.InvalidArgument, match="^compile options: "):
    client.compile(TEXT, options=_Garbage())


class _Garbage(CompileOptions):
  """Compile options whose serialization is not a protobuf message (a truncated field)."""

  def encode(self, abi) -> bytes:
    return b"\x1a\x05ab"


@pytest.mark.parametrize("code, error", [
    ("INVALID_ARGUMENT", errors.InvalidArgument), ("UNIMPLEMENTED", errors.Unimplemented),
    ("RESOURCE_EXHAUSTED", errors.ResourceExhausted)])
def test_compile_errors_keep_their_code_and_message(client, monkeypatch, code, error):
  def compile_for_pjrt(*_):
    raise CompileError("stablehlo.foo on f32[2] at f.py:3 is not supported", code)

  monkeypatch.setattr(compilation, "compile_for_pjrt", compile_for_pjrt)
  with pytest.raises(error, match=r"^stablehlo.foo on f32\[2\] at f.py:3 is not supported "
                                  r"\[trn plugin, PJRT_Client_Compile\]$"):
    client.compile(TEXT)


def test_other_exceptions_are_internal_compiler_errors_with_a_traceback(client, monkeypatch):
  def compile_for_pjrt(*_):
    raise ValueError("boom")

  monkeypatch.setattr(compilation, "compile_for_pjrt", compile_for_pjrt)
  with pytest.raises(errors.Internal) as info:
    client.compile(TEXT)
  message = info.value.message
  assert message.startswith("internal compiler error: ValueError: boom\n")
  assert "test_pjrt_compile_bridge.py" in message and 'raise ValueError("boom")' in message


def test_a_non_bytes_result_is_internal(client, monkeypatch):
  monkeypatch.setattr(compilation, "compile_for_pjrt", lambda *_: "text")
  with pytest.raises(errors.Internal, match="compile_for_pjrt returned str, not bytes"):
    client.compile(TEXT)


def test_a_program_the_runtime_rejects_is_internal(client, monkeypatch):
  monkeypatch.setattr(compilation, "compile_for_pjrt", lambda *_: b"garbage")
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
  monkeypatch.setattr(compilation, "compile_for_pjrt", lambda *_: _program_breaking_a_rule())
  expected = (r"invalid program: .*DVE instruction 0 \(tensor_tensor; stablehlo.and "
              r"\"jit\(f\)/and\" at model.py:12:8\): ALU op and needs integer data")
  with pytest.raises(errors.Internal, match=expected):
    client.compile(TEXT)


def test_the_client_compiles_again_after_failures(client, monkeypatch):
  monkeypatch.setattr(compilation, "compile_for_pjrt", lambda *_: b"garbage")
  with pytest.raises(errors.Internal):
    client.compile(TEXT)
  monkeypatch.setattr(compilation, "compile_for_pjrt", lambda *_: add_program())
  assert client.compile(TEXT).num_outputs == 1
