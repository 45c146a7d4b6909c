"""The PJRT profiler extension of libpjrt_trn.so, driven through ctypes as jaxlib drives it: found
on PJRT_Api.extension_start by its type, with the table sizes jaxlib 0.10.2 insists on, a
session's lifecycle (create, start, stop, collect data, destroy), both ways of collecting the
data, and clear errors for calls out of order."""

import ctypes

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax_trn import _native, plugin

PJRT_EXTENSION_TYPE_PROFILER = 1  # pjrt_c_api.h: PJRT_Extension_Type
FAILED_PRECONDITION = 9

_Fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)        # PLUGIN_Profiler_Error* f(args)
_VoidFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Extension(ctypes.Structure):
  _fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int), ("next", ctypes.c_void_p),
              ("profiler_api", ctypes.c_void_p), ("traceme_context_id", ctypes.c_int64)]


class _Api(ctypes.Structure):
  _fields_ = [("struct_size", ctypes.c_size_t), ("priv", ctypes.c_void_p),
              ("error_destroy", _VoidFn), ("error_message", _VoidFn), ("error_get_code", _Fn),
              ("create", _Fn), ("destroy", _Fn), ("start", _Fn), ("stop", _Fn),
              ("collect_data", _Fn)]


class _CreateArgs(ctypes.Structure):
  _fields_ = [("struct_size", ctypes.c_size_t), ("options", ctypes.c_char_p),
              ("options_size", ctypes.c_size_t), ("profiler", ctypes.c_void_p)]


class _SessionArgs(ctypes.Structure):
  _fields_ = [("struct_size", ctypes.c_size_t), ("profiler", ctypes.c_void_p)]


class _CollectArgs(ctypes.Structure):
  _fields_ = [("struct_size", ctypes.c_size_t), ("profiler", ctypes.c_void_p),
              ("buffer", ctypes.c_void_p), ("buffer_size_in_bytes", ctypes.c_size_t)]


class _ErrorArgs(ctypes.Structure):  # Error_Destroy, Error_Message, Error_GetCode share a head
  _fields_ = [("struct_size", ctypes.c_size_t), ("priv", ctypes.c_void_p),
              ("error", ctypes.c_void_p), ("message", ctypes.c_void_p),
              ("message_size", ctypes.c_size_t)]


class _GetCodeArgs(ctypes.Structure):
  _fields_ = [("struct_size", ctypes.c_size_t), ("priv", ctypes.c_void_p),
              ("error", ctypes.c_void_p), ("code", ctypes.c_int)]


def _extension() -> _Extension:
  lib = ctypes.CDLL(str(plugin.library_path()))
  lib.GetPjrtApi.restype = ctypes.c_void_p
  api = lib.GetPjrtApi()
  link = ctypes.c_void_p.from_address(api + 8).value  # PJRT_Api.extension_start
  while link:
    extension = _Extension.from_address(link)
    if extension.type == PJRT_EXTENSION_TYPE_PROFILER:
      return extension
    link = extension.next
  raise AssertionError("no profiler extension on PJRT_Api.extension_start")


@pytest.fixture(scope="module")
def api() -> _Api:
  return _Api.from_address(_extension().profiler_api)


def _error(api, error) -> tuple[int, str]:
  """(code, message) of a returned error, which is then destroyed."""
  assert error, "expected an error"
  message = _ErrorArgs(ctypes.sizeof(_ErrorArgs), None, error)
  api.error_message(ctypes.addressof(message))
  text = ctypes.string_at(message.message, message.message_size).decode()
  code = _GetCodeArgs(ctypes.sizeof(_GetCodeArgs), None, error)
  assert not api.error_get_code(ctypes.addressof(code))
  api.error_destroy(ctypes.addressof(_ErrorArgs(ctypes.sizeof(_ErrorArgs), None, error)))
  return code.code, text


def _call(api, fn, args):
  return getattr(api, fn)(ctypes.addressof(args))


def test_the_extension_and_its_table_have_the_sizes_jaxlib_expects():
  extension = _extension()
  assert extension.struct_size == ctypes.sizeof(_Extension) == 40
  assert extension.traceme_context_id == 0
  table = _Api.from_address(extension.profiler_api)
  assert table.struct_size == ctypes.sizeof(_Api) == 80  # jaxlib refuses any other size


def test_a_session_collects_the_executions_between_start_and_stop_both_ways(api, trn):
  x = jax.device_put(np.ones((128, 128), np.float32), trn)
  f = jax.jit(lambda a: jnp.exp(a) + 1.0)
  f(x).block_until_ready()
  # struct_size is left 0, as jaxlib leaves it unset.
  create = _CreateArgs(0, b"", 0, None)
  assert not _call(api, "create", create) and create.profiler
  session = _SessionArgs(0, create.profiler)
  recording_before = _native.record_timeline()
  assert not _call(api, "start", session)
  assert _native.record_timeline()
  f(x).block_until_ready()
  assert not _call(api, "stop", session)
  assert _native.record_timeline() == recording_before
  f(x).block_until_ready()  # after stop: not captured

  collect = _CollectArgs(0, create.profiler, None, 0)
  assert not _call(api, "collect_data", collect)
  assert collect.buffer and collect.buffer_size_in_bytes > 0  # points at the plugin's copy
  plugin_copy = ctypes.string_at(collect.buffer, collect.buffer_size_in_bytes)
  mine = ctypes.create_string_buffer(collect.buffer_size_in_bytes)
  collect.buffer = ctypes.addressof(mine)
  assert not _call(api, "collect_data", collect)
  assert mine.raw == plugin_copy
  space = jax.profiler.ProfileData.from_serialized_xspace(plugin_copy)
  (plane,) = space.planes
  assert plane.name == f"/device:CUSTOM:{trn.id}"
  executions = [line for line in plane.lines if line.name == "Executions"]
  assert len(list(executions[0].events)) == 1
  assert not _call(api, "destroy", session)


def test_calls_out_of_order_are_clear_errors(api):
  recording_before = _native.record_timeline()
  create = _CreateArgs(0, b"", 0, None)
  assert not _call(api, "create", create)
  session = _SessionArgs(0, create.profiler)
  code, message = _error(api, _call(api, "stop", session))
  assert code == FAILED_PRECONDITION and "not running" in message
  assert not _call(api, "start", session)
  code, message = _error(api, _call(api, "start", session))
  assert code == FAILED_PRECONDITION and "started already" in message
  assert "PLUGIN_Profiler_Start" in message
  assert not _call(api, "destroy", session)  # destroying a running session stops it
  assert _native.record_timeline() == recording_before
  code, message = _error(api, _call(api, "start", _SessionArgs(0, None)))
  assert "profiler is NULL" in message
  collect = _CollectArgs(0, None, None, 0)
  code, message = _error(api, _call(api, "collect_data", collect))
  assert "profiler is NULL" in message
