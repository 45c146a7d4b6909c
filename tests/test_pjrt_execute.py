"""Executables of libpjrt_trn.so: programs built with hlo_lowering.program.ProgramBuilder, loaded
through PJRT_Executable_DeserializeAndLoad and run through PJRT_LoadedExecutable_Execute, so the
plugin's execute path is tested independently of the compiler."""

import ctypes
import os
import pathlib
import time

import numpy as np
import pytest
from pypjrt import errors
from pypjrt._loader import Plugin
from pypjrt.client import Client, Device

from hlo_lowering.program import Alu, DType, HbmAP, ProgramBuilder
from jax._src.lib import xla_client

from test_pjrt_buffers import F32, devices, fetch, memory_of_kind, put
from jax_trn import plugin
from compiler_harness import finish

REPO = pathlib.Path(__file__).resolve().parents[1]
LIBRARY = os.environ.get("TRN_PJRT_LIBRARY", str(plugin.library_path()))
SOURCE = "module @my_add {\n  func.func public @main() {\n  }\n}\n"


def add_program(shape=(2, 3), temporary_elements=0, constant=None, target="trn2",
                source=SOURCE) -> bytes:
  """out = x + y (+ constant), optionally holding a temporary of `temporary_elements` f32."""
  b = ProgramBuilder(target=target, source=source)
  x = b.tensor("parameter", DType.F32, shape, index=0, name="x")
  y = b.tensor("parameter", DType.F32, shape, index=1, name="y")
  out = b.tensor("output", DType.F32, shape, index=0, name="out")
  b.gp_elementwise(Alu.ADD, HbmAP.dense(out, shape), [HbmAP.dense(x, shape), HbmAP.dense(y, shape)])
  if temporary_elements:
    t = b.tensor("temporary", DType.F32, (temporary_elements,), name="scratch")
    b.gp_copy(HbmAP.dense(t, shape), HbmAP.dense(out, shape))
  if constant is not None:
    c = b.constant(DType.F32, shape, np.asarray(constant, np.float32).tobytes(), name="c")
    b.gp_elementwise(Alu.ADD, HbmAP.dense(out, shape), [HbmAP.dense(out, shape), HbmAP.dense(c, shape)])
  return finish(b)


ADD_SOURCE = """module @my_add {
  func.func public @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.add %x, %y : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
"""


def test_cost_analysis_counts_the_programs_source_and_needs_one(make_client):
  client = make_client()
  exe = client.deserialize_executable(add_program(source=ADD_SOURCE))
  assert exe.cost_analysis() == {"flops": 6.0, "transcendentals": 0.0, "bytes accessed": 72.0}
  with pytest.raises(errors.Unimplemented, match="carries none"):
    client.deserialize_executable(add_program(source="")).cost_analysis()
  with pytest.raises(errors.InvalidArgument, match="not valid StableHLO"):
    client.deserialize_executable(add_program()).cost_analysis()  # SOURCE has no body
  assert exe.cost_analysis()["flops"] == 6.0  # the client and executables stay usable


@pytest.fixture
def make_client():
  plugin = Plugin(LIBRARY)
  plugin.initialize()
  clients = []

  def make(**options):
    clients.append(Client(plugin, options=options))
    return clients[-1]

  yield make
  for client in clients:
    client.close()


def f32(client, array, device):
  return put(client, np.asarray(array, np.float32), F32, device=device)


def test_loaded_program_runs_and_describes_itself(make_client):
  client = make_client()
  d0 = devices(client)[0]
  program = add_program()
  exe = client.deserialize_executable(program)
  assert exe.num_outputs == 1 and exe.output_types() == [F32]
  assert exe.name == "my_add"
  assert exe.num_replicas == 1 and exe.num_partitions == 1
  assert exe.serialize() == program
  assert exe.fingerprint() == client.deserialize_executable(program).fingerprint()
  assert exe.output_memory_kinds() == ["device"]
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  (out,) = exe(f32(client, x, d0), f32(client, np.ones((2, 3)), d0))
  assert out.device().id == 0 and out.dimensions == (2, 3)
  np.testing.assert_array_equal(fetch(out, np.float32, (2, 3)), x + 1)

  plugin = client._plugin
  program_arg = plugin.args("PJRT_Program")
  a = plugin.args("PJRT_Executable_OptimizedProgram_Args", executable=exe._executable(),
                  program=ctypes.addressof(program_arg))
  plugin.call("PJRT_Executable_OptimizedProgram", a)
  text = ctypes.create_string_buffer(program_arg.code_size)
  program_arg.code = ctypes.cast(text, ctypes.c_void_p)
  plugin.call("PJRT_Executable_OptimizedProgram", a)
  assert text.raw.decode() == SOURCE
  assert ctypes.string_at(program_arg.format, program_arg.format_size) == b"mlir"


@pytest.mark.parametrize("arguments, message", [
    (lambda c, d: [f32(c, np.ones((2, 3)), d)], "the program takes 2 arguments, got 1"),
    (lambda c, d: [f32(c, np.ones((2, 3)), d), f32(c, np.ones((3, 2)), d)],
     r"argument 1 \(y\): expected f32\[2,3\], got f32\[3,2\]"),
    (lambda c, d: [put(c, np.ones((2, 3), np.int32), 4, device=d), f32(c, np.ones((2, 3)), d)],
     r"argument 0 \(x\): expected f32\[2,3\], got s32\[2,3\]"),
    (lambda c, d: [f32(c, np.ones((2, 3)), d), f32(c, np.ones((2, 3)), devices(c)[3])],
     r"argument 1 \(y\) is on TRN_3 but the executable runs on TRN_0"),
    (lambda c, d: [f32(c, np.ones((2, 3)), d),
                   put(c, np.ones((2, 3), np.float32), F32, memory=memory_of_kind(d, "pinned_host"))],
     r"argument 1 \(y\) is in pinned_host memory")])
def test_bad_arguments_are_invalid_argument(make_client, arguments, message):
  client = make_client()
  d0 = devices(client)[0]
  exe = client.deserialize_executable(add_program())
  with pytest.raises(errors.InvalidArgument,
                     match=message + r".*\[trn plugin, PJRT_LoadedExecutable_Execute\]"):
    exe(*arguments(client, d0))


def test_deleted_argument_is_refused(make_client):
  client = make_client()
  d0 = devices(client)[0]
  exe = client.deserialize_executable(add_program())
  x, y = f32(client, np.ones((2, 3)), d0), f32(client, np.ones((2, 3)), d0)
  plugin = client._plugin
  plugin.call("PJRT_Buffer_Delete", plugin.args("PJRT_Buffer_Delete_Args", buffer=x.address))
  with pytest.raises(errors.FailedPrecondition, match="argument 0: .* has been deleted"):
    exe(x, y)


def _settled_bytes_in_use(device, expected: int, timeout_s: float = 10.0) -> int:
  """The device's bytes in use once they reach `expected`, or as they are after `timeout_s`."""
  deadline = time.monotonic() + timeout_s
  while (in_use := device.memory_stats()["bytes_in_use"]) != expected:
    if time.monotonic() > deadline:
      break
    time.sleep(0.01)
  return in_use


def test_hbm_for_temporaries_and_constants_is_accounted(make_client):
  client = make_client(hbm_bytes=4096)
  d0 = devices(client)[0]
  with_constant = client.deserialize_executable(add_program(constant=np.full((2, 3), 10)))
  assert d0.memory_stats()["bytes_in_use"] == 24  # the constant, resident while loaded
  x, y = f32(client, np.ones((2, 3)), d0), f32(client, np.ones((2, 3)), d0)
  (out,) = with_constant(x, y)
  np.testing.assert_array_equal(fetch(out, np.float32, (2, 3)), np.full((2, 3), 12))
  out.close()

  big_temporary = client.deserialize_executable(add_program(temporary_elements=1010))
  # Temporaries are reserved when the queued execution starts, after its output is allocated
  # (24 bytes), and the failure arrives through the execution's event.
  with pytest.raises(errors.ResourceExhausted,
                     match=r"reserving the program's temporaries: trn: cannot allocate 4040 "
                           r"bytes on TRN_0 \(HBM\): 96 of 4096 bytes in use"
                           r".*PJRT_Event_Await"):
    big_temporary(x, y)
  # The failed execution left the client, the buffers and the other executable usable; its
  # output goes with its job, which may finish a moment after the event reported the error.
  assert _settled_bytes_in_use(d0, 72) == 72
  (again,) = with_constant(x, y)
  np.testing.assert_array_equal(fetch(again, np.float32, (2, 3)), np.full((2, 3), 12))
  again.close()
  with_constant.close()
  # The constant goes with the executable's last reference, which a finished execution's job on
  # the device queue may hold a moment longer.
  assert _settled_bytes_in_use(d0, 48) == 48


def test_compile_options_pick_the_device(make_client):
  client = make_client()
  options = xla_client.CompileOptions()
  options.device_assignment = xla_client.DeviceAssignment.create(np.array([[2]], np.int32))
  exe = client.deserialize_executable(add_program(),
                                      overridden_options=options.SerializeAsString())
  d2 = devices(client)[2]
  assert exe.addressable_devices() == [d2.address]
  # DeviceAssignmentProto{replica_count: 1, computation_count: 1, computation_devices: [[2]]}
  assert exe.device_assignment_proto() == b"\x08\x01\x10\x01\x1a\x02\x08\x02"
  (out,) = exe(f32(client, np.ones((2, 3)), d2), f32(client, np.ones((2, 3)), d2))
  assert out.device().id == 2


def test_execution_profile_is_recorded_for_the_device(make_client):
  from jax_trn import _native
  client = make_client()
  d1 = devices(client)[1]
  options = xla_client.CompileOptions()
  options.device_assignment = xla_client.DeviceAssignment.create(np.array([[1]], np.int32))
  exe = client.deserialize_executable(add_program(),
                                      overridden_options=options.SerializeAsString())
  exe(f32(client, np.ones((2, 3)), d1), f32(client, np.ones((2, 3)), d1))
  profile = _native.last_execution(1)
  assert profile is not None and profile["device_time_ns"] > 0


def test_program_for_another_target_is_refused(make_client):
  client = make_client(target="trn1")
  with pytest.raises(errors.InvalidArgument,
                     match="compiled for trn2 but this client simulates trn1"):
    client.deserialize_executable(add_program(target="trn2"))


def test_malformed_program_bytes_are_refused(make_client):
  client = make_client()
  with pytest.raises(errors.PjrtError, match=r"\[trn plugin, PJRT_Executable_DeserializeAndLoad\]"):
    client.deserialize_executable(b"not a program")
