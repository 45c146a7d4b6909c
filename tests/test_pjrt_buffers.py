"""Client, devices, memories and buffers of libpjrt_trn.so, through the real C entry points
(pypjrt builds the *_Args structs), with no JAX and no compiler involved."""

import ctypes
import os
import pathlib

import ml_dtypes
import numpy as np
import pytest
from pypjrt import errors
from pypjrt._loader import Plugin
from pypjrt.client import Buffer, Client, Device, Event, Memory
from jax_trn import plugin

REPO = pathlib.Path(__file__).resolve().parents[1]
LIBRARY = os.environ.get("TRN_PJRT_LIBRARY", str(plugin.library_path()))

# PJRT_Buffer_Type codes (pjrt_c_api.h) of the dtypes a NeuronCore holds.
DEVICE_DTYPES = {
    1: np.dtype(np.bool_), 2: np.dtype(np.int8), 3: np.dtype(np.int16), 4: np.dtype(np.int32),
    5: np.dtype(np.int64), 6: np.dtype(np.uint8), 7: np.dtype(np.uint16),
    8: np.dtype(np.uint32), 9: np.dtype(np.uint64), 10: np.dtype(np.float16),
    11: np.dtype(np.float32), 13: np.dtype(ml_dtypes.bfloat16), 14: np.dtype(np.complex64),
    16: np.dtype(ml_dtypes.float8_e5m2), 17: np.dtype(ml_dtypes.float8_e4m3fn),
}
F32, F64, C64, C128 = 11, 12, 14, 15


@pytest.fixture(scope="module")
def plugin():
  p = Plugin(LIBRARY)
  p.initialize()
  return p


@pytest.fixture
def make_client(plugin):
  clients = []

  def make(**options):
    client = Client(plugin, options=options)
    clients.append(client)
    return client

  yield make
  for client in clients:
    client.close()


def devices(client) -> list[Device]:
  return [Device(client._plugin, ptr) for ptr in client._addressable()]


def memory_of_kind(device: Device, kind: str) -> Memory:
  return next(m for m in device.memories() if m.kind == kind)


def random_array(dtype: np.dtype, shape, seed=0) -> np.ndarray:
  rng = np.random.default_rng(seed)
  if dtype == np.bool_:
    return rng.integers(0, 2, shape).astype(np.bool_)
  if dtype.kind in "iu":
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
  if dtype.kind == "c":
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
  return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def put(client, array: np.ndarray, code: int, *, device=None, memory=None) -> Buffer:
  """BufferFromHostBuffer with the array's own byte strides, as JAX calls it."""
  plugin = client._plugin
  dims = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
  strides = (ctypes.c_int64 * max(array.ndim, 1))(*array.strides)
  data = array.__array_interface__["data"][0] if array.size else 0
  a = plugin.args(
      "PJRT_Client_BufferFromHostBuffer_Args", client=client.address, data=data, type=code,
      dims=ctypes.cast(dims, ctypes.c_void_p), num_dims=array.ndim,
      byte_strides=ctypes.cast(strides, ctypes.c_void_p), num_byte_strides=array.ndim,
      host_buffer_semantics=plugin.abi.PJRT_HostBufferSemantics_kImmutableZeroCopy,
      device=device.address if device is not None else None,
      memory=memory.address if memory is not None else None)
  plugin.call("PJRT_Client_BufferFromHostBuffer", a)
  assert a.done_with_host_buffer, "done_with_host_buffer must be returned"
  Event(plugin, a.done_with_host_buffer).consume()
  return Buffer(plugin, a.buffer)


def fetch(buffer: Buffer, dtype: np.dtype, shape, layout=None) -> np.ndarray:
  """ToHostBuffer into a preallocated array, optionally through a host layout."""
  plugin = buffer._plugin
  out = np.empty(shape, dtype)
  a = plugin.args("PJRT_Buffer_ToHostBuffer_Args", src=buffer.address,
                  host_layout=ctypes.addressof(layout) if layout is not None else None,
                  dst=out.__array_interface__["data"][0] if out.size else None,
                  dst_size=out.nbytes)
  plugin.call("PJRT_Buffer_ToHostBuffer", a)
  if a.event:
    Event(plugin, a.event).consume()
  return out


# -- client and devices --------------------------------------------------------------------


@pytest.mark.parametrize("options, count", [
    ({}, 4), ({"lnc": 1}, 8), ({"target": "trn1"}, 2), ({"target": "trn3"}, 8),
    ({"chips": 2}, 8), ({"target": "trn2", "chips": 3, "lnc": 2}, 12)])
def test_device_count_follows_chips_and_lnc(make_client, options, count):
  client = make_client(**options)
  assert client.device_count == count
  assert [d.id for d in devices(client)] == list(range(count))


@pytest.mark.parametrize("options, message", [
    ({"lnc": 3}, "LNC=3 is not supported on trn2; use 1 or 2"),
    ({"target": "trn1", "lnc": 2}, "LNC=2 is not supported on trn1; use 1"),
    ({"target": "trn3", "lnc": 2}, "LNC=2 is not supported on trn3; use 1"),
    ({"chips": 0}, "chips must be between 1 and 64 on trn2 \\(one Trn2 UltraServer\\), got 0"),
    ({"target": "trn1", "chips": 17}, "between 1 and 16 on trn1 \\(one trn1.32xlarge\\), got 17"),
    ({"target": "trn9"}, "unknown trn target 'trn9'"),
    ({"chip": 2}, "unknown trn create option 'chip'"),
    ({"chips": "2"}, "'chips' must be an integer"),
    ({"float64_scalars": 2}, "float64_scalars must be 0 or 1, got 2")])
def test_bad_create_options_are_invalid_argument(plugin, options, message):
  with pytest.raises(errors.InvalidArgument, match=message):
    Client(plugin, options=options)


def test_platform_and_device_description(make_client):
  client = make_client(chips=2)
  assert client.platform_name == "trn"
  a = client._plugin.args("PJRT_Client_PlatformVersion_Args", client=client.address)
  client._plugin.call("PJRT_Client_PlatformVersion", a)
  version = ctypes.string_at(a.platform_version, a.platform_version_size).decode()
  assert "trn2" in version and "simulated" in version
  device = devices(client)[5]
  assert device.kind == "NeuronCore-v3 (trn2, LNC=2, simulated)"
  assert device.debug_string == "TRN_5"
  assert device.local_hardware_id == 5 and device.process_index == 0
  assert device.attributes == {"coords": (1, 0, 0), "core_on_chip": 1, "chip_index": 1,
                               "lnc": 2, "target": "trn2"}
  with pytest.raises(errors.NotFound, match="no trn device with id 8"):
    client.lookup_device(8)
  assert client.lookup_device(3).id == 3


def test_each_device_has_hbm_and_pinned_host_memory(make_client):
  client = make_client(hbm_bytes=1 << 20)
  for device in devices(client):
    kinds = {m.kind: m for m in device.memories()}
    assert set(kinds) == {"device", "pinned_host"}
    assert device.default_memory().kind == "device"
    assert device.default_memory().id == 2 * device.id
    assert [d.id for d in kinds["pinned_host"].addressable_by()] == [device.id]
  stats = devices(client)[0].memory_stats()
  assert stats["bytes_limit"] == 1 << 20 and stats["bytes_in_use"] == 0


def test_default_hbm_is_the_chip_share(make_client):
  client = make_client()  # trn2: 96 GiB per chip, 4 devices
  assert devices(client)[0].memory_stats()["bytes_limit"] == 24 << 30


def test_default_device_assignment(make_client):
  client = make_client()
  assert client.default_device_assignment(2, 2) == [0, 1, 2, 3]
  with pytest.raises(errors.InvalidArgument, match="need 8 devices; this client has 4"):
    client.default_device_assignment(8, 1)


# -- buffers -------------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(DEVICE_DTYPES))
def test_every_device_dtype_round_trips(make_client, code):
  client = make_client()
  dtype = DEVICE_DTYPES[code]
  array = random_array(dtype, (3, 5), seed=code)
  buffer = put(client, array, code, device=devices(client)[1])
  assert buffer.element_type == code and buffer.dimensions == (3, 5)
  assert buffer.device().id == 1 and buffer.memory().kind == "device"
  assert not buffer.is_on_cpu()
  np.testing.assert_array_equal(fetch(buffer, dtype, (3, 5)).view(np.uint8),
                                array.view(np.uint8))
  buffer.close()


@pytest.mark.parametrize("code, message", [
    (F64, "NeuronCores have no float64 type: cannot place a f64\\[2\\] array on TRN_0; use "
          "float32 \\(in JAX: leave jax_enable_x64 off, or set TRN_FLOAT64=float32 to compute "
          "float64 as float32; in PyTorch: \\.float\\(\\)\\)"),
    (C128, "NeuronCores have no float64, so no complex128: cannot place a c128\\[2\\] array on "
           "TRN_0; use complex64")])
def test_unsupported_dtypes_are_invalid_argument(make_client, code, message):
  client = make_client()
  array = np.zeros(2, np.float64 if code == F64 else np.complex128)
  with pytest.raises(errors.InvalidArgument, match=message):
    put(client, array, code, device=devices(client)[0])


def test_float64_scalars_only_for_a_client_that_asks(make_client):
  """torch_xla's client (create option float64_scalars=1, jax_trn/torch_plugin.py) places the
  f64[] arrays Python numbers become, bytes unchanged; arrays of f64 stay refused, and a client
  without the option (JAX's) refuses f64 scalars too."""
  torch_client = make_client(float64_scalars=1)
  number = put(torch_client, np.array(0.1, np.float64), F64, device=devices(torch_client)[0])
  assert number.dimensions == () and fetch(number, np.float64, ()) == 0.1
  with pytest.raises(errors.InvalidArgument, match="cannot place a f64\\[2\\] array"):
    put(torch_client, np.zeros(2, np.float64), F64, device=devices(torch_client)[0])
  jax_client = make_client()
  with pytest.raises(errors.InvalidArgument, match="cannot place a f64\\[\\] array"):
    put(jax_client, np.array(0.1, np.float64), F64, device=devices(jax_client)[0])


def test_scalar_and_zero_size_arrays(make_client):
  client = make_client()
  scalar = put(client, np.array(7.5, np.float32), F32, device=devices(client)[0])
  assert scalar.dimensions == () and fetch(scalar, np.float32, ()) == 7.5
  empty = put(client, np.zeros((0, 3), np.float32), F32, device=devices(client)[0])
  assert empty.dimensions == (0, 3) and empty.nbytes == 0
  assert fetch(empty, np.float32, (0, 3)).shape == (0, 3)


def test_memory_without_device_places_the_buffer_on_the_memory_device(make_client):
  client = make_client()
  memory = devices(client)[2].default_memory()
  buffer = put(client, np.arange(4, dtype=np.float32), F32, memory=memory)
  assert buffer.device().id == 2 and buffer.memory().id == memory.id


@pytest.mark.parametrize("view", [
    lambda a: a[:, ::2], lambda a: a.T, lambda a: a[::2, 1:4], lambda a: a[::-1]],
    ids=["step", "transpose", "window", "reversed"])
def test_non_contiguous_host_arrays_are_copied_correctly(make_client, view):
  client = make_client()
  base = np.arange(6 * 8, dtype=np.int32).reshape(6, 8)
  array = view(base)
  buffer = put(client, array, 4, device=devices(client)[0])
  np.testing.assert_array_equal(fetch(buffer, np.int32, array.shape), array)


def test_to_host_buffer_size_query_and_host_layouts(make_client):
  client = make_client()
  plugin = client._plugin
  array = np.arange(12, dtype=np.float32).reshape(3, 4)
  buffer = put(client, array, F32, device=devices(client)[0])

  a = plugin.args("PJRT_Buffer_ToHostBuffer_Args", src=buffer.address, dst=None)
  plugin.call("PJRT_Buffer_ToHostBuffer", a)
  assert a.dst_size == 48

  column_major = plugin.abi.PJRT_Buffer_MemoryLayout()
  column_major.struct_size = plugin.abi.PJRT_Buffer_MemoryLayout_STRUCT_SIZE
  column_major.type = plugin.abi.PJRT_Buffer_MemoryLayout_Type_Tiled
  minor_to_major = (ctypes.c_int64 * 2)(0, 1)
  column_major.tiled.struct_size = plugin.abi.PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE
  column_major.tiled.minor_to_major = ctypes.cast(minor_to_major, ctypes.c_void_p)
  column_major.tiled.minor_to_major_size = 2
  out = fetch(buffer, np.float32, (4, 3), column_major)
  np.testing.assert_array_equal(out, array.T)

  strided = plugin.abi.PJRT_Buffer_MemoryLayout()
  strided.struct_size = plugin.abi.PJRT_Buffer_MemoryLayout_STRUCT_SIZE
  strided.type = plugin.abi.PJRT_Buffer_MemoryLayout_Type_Strides
  byte_strides = (ctypes.c_int64 * 2)(16, 4)  # a row pitch of 16 bytes: dense
  strided.strides.byte_strides = ctypes.cast(byte_strides, ctypes.c_void_p)
  strided.strides.num_byte_strides = 2
  np.testing.assert_array_equal(fetch(buffer, np.float32, (3, 4), strided), array)

  small = np.empty(2, np.float32)
  a = plugin.args("PJRT_Buffer_ToHostBuffer_Args", src=buffer.address,
                  dst=small.__array_interface__["data"][0], dst_size=small.nbytes)
  with pytest.raises(errors.InvalidArgument, match="destination holds 8 bytes"):
    plugin.call("PJRT_Buffer_ToHostBuffer", a)


def test_hbm_exhaustion_is_resource_exhausted_and_recoverable(make_client):
  client = make_client(hbm_bytes=4096)
  device = devices(client)[0]
  first = put(client, np.zeros(768, np.float32), F32, device=device)  # 3072 bytes
  with pytest.raises(errors.ResourceExhausted,
                     match=r"trn: cannot allocate 2048 bytes on TRN_0 \(HBM\): 3072 of 4096 "
                           r"bytes in use \[trn plugin, PJRT_Client_BufferFromHostBuffer\]"):
    put(client, np.zeros(512, np.float32), F32, device=device)
  other_device = put(client, np.zeros(1024, np.float32), F32, device=devices(client)[1])
  stats = device.memory_stats()
  assert stats["bytes_in_use"] == 3072 and stats["peak_bytes_in_use"] == 3072
  first.delete()
  assert first.is_deleted and device.memory_stats()["bytes_in_use"] == 0
  second = put(client, np.ones(512, np.float32), F32, device=device)
  np.testing.assert_array_equal(fetch(second, np.float32, (512,)), np.ones(512, np.float32))
  first.close()
  other_device.close()


def test_deleted_buffer_reads_fail_cleanly(make_client):
  client = make_client()
  buffer = put(client, np.arange(4, dtype=np.float32), F32, device=devices(client)[0])
  buffer.delete()
  with pytest.raises(errors.FailedPrecondition, match="has been deleted or donated"):
    fetch(buffer, np.float32, (4,))


def test_copies_between_memories_and_devices(make_client):
  client = make_client(hbm_bytes=1 << 16)
  d0, d1 = devices(client)[:2]
  array = np.arange(10, dtype=np.int16)
  buffer = put(client, array, 3, device=d0)
  pinned = buffer.copy_to_memory(memory_of_kind(d0, "pinned_host"))
  assert pinned.memory().kind == "pinned_host" and pinned.device().id == 0
  back = pinned.copy_to_memory(d0.default_memory())
  moved = back.copy_to_device(d1)
  assert moved.device().id == 1 and moved.memory().kind == "device"
  np.testing.assert_array_equal(fetch(moved, np.int16, (10,)), array)
  assert d0.memory_stats()["bytes_in_use"] == 40  # buffer + back: pinned host is not HBM


def test_short_struct_size_is_rejected_with_the_sizes(make_client):
  client = make_client()
  plugin = client._plugin
  a = plugin.args("PJRT_Client_PlatformName_Args", client=client.address)
  a.struct_size = 16
  with pytest.raises(errors.InvalidArgument,
                     match=r"PJRT_Client_PlatformName_Args: expected struct_size >= 40, got 16"):
    plugin.call("PJRT_Client_PlatformName", a)


@pytest.mark.slow
def test_arrays_over_one_gib_round_trip(make_client):
  client = make_client()
  array = np.arange((1 << 30) // 4 + 1024, dtype=np.uint32)
  buffer = put(client, array, 8, device=devices(client)[0])
  assert buffer.nbytes == array.nbytes
  assert devices(client)[0].memory_stats()["bytes_in_use"] == array.nbytes
  out = fetch(buffer, np.uint32, array.shape)
  np.testing.assert_array_equal(out, array)
