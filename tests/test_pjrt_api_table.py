"""The PJRT_Api table of libpjrt_trn.so, read through ctypes, against docs/pjrt-surface.md.

Clients treat a NULL slot as "not offered" and may abort on a non-NULL slot that fails, so the
NULL slots must be exactly the documented ones, each with its reason. Also runs the pypjrt
conformance harness, whose compile and execute checks need the compiler and the runtime.
"""

import ctypes
import importlib.util
import os
import pathlib
import re
import subprocess

import pytest
from jax_trn import plugin

REPO = pathlib.Path(__file__).resolve().parents[1]
# The in-place build (TRN_INPLACE) or an installed package puts the plugin next to jax_trn.
LIBRARY = os.environ.get("TRN_PJRT_LIBRARY", str(plugin.library_path()))


def _header_path() -> pathlib.Path:
  spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
  return pathlib.Path(spec.submodule_search_locations[0]) / "include" / "pjrt_c_api.h"


def _header_slots() -> list[str]:
  """Entry point names of the PJRT_Api struct, in slot order."""
  text = _header_path().read_text()
  body = text[text.index("typedef struct PJRT_Api {"):text.index("} PJRT_Api;")]
  return re.findall(r"_PJRT_API_STRUCT_FIELD\((\w+)\)", body)


def _documented_null_slots() -> dict[str, str]:
  text = (REPO / "docs" / "pjrt-surface.md").read_text()
  section = text[text.index("## Entry points left NULL"):]
  return dict(re.findall(r"^\| `(PJRT_\w+)` \| (.+?) \|$", section, flags=re.MULTILINE))


def _api_table():
  lib = ctypes.CDLL(LIBRARY)
  lib.GetPjrtApi.restype = ctypes.c_void_p
  api = lib.GetPjrtApi()
  assert api, "GetPjrtApi returned NULL"
  struct_size = ctypes.c_size_t.from_address(api).value
  major = ctypes.c_int.from_address(api + 32).value
  minor = ctypes.c_int.from_address(api + 36).value
  first_slot = 40  # struct_size, extension_start, PJRT_Api_Version (24 bytes)
  count = (struct_size - first_slot) // ctypes.sizeof(ctypes.c_void_p)
  slots = (ctypes.c_void_p * count).from_address(api + first_slot)
  return struct_size, (major, minor), list(slots)


def test_version_and_size_match_the_build_header():
  struct_size, version, slots = _api_table()
  assert version == (0, 81)
  assert len(slots) == len(_header_slots())
  assert struct_size == 40 + 8 * len(slots)


def test_null_slots_are_exactly_the_documented_ones():
  _, _, slots = _api_table()
  names = _header_slots()
  null = {name for name, fn in zip(names, slots) if not fn}
  documented = _documented_null_slots()
  assert not (null - documented.keys()), f"NULL but not documented: {sorted(null - documented.keys())}"
  assert not (documented.keys() - null), f"documented NULL but set: {sorted(documented.keys() - null)}"
  assert all(reason.strip() for reason in documented.values())


def test_slots_that_jaxlib_needs_are_set():
  # shared/design/pjrt-contract.md: fatal or a crash in jaxlib 0.10.2 if missing.
  needed = """Plugin_Attributes Client_PlatformVersion Client_Destroy DeviceDescription_Attributes
    DeviceDescription_ProcessIndex DeviceDescription_Kind DeviceDescription_ToString
    DeviceDescription_DebugString Device_IsAddressable Device_LocalHardwareId Memory_Kind
    Memory_AddressableByDevices Buffer_Device Buffer_IsDeleted Buffer_IsOnCpu Buffer_ElementType
    Buffer_Dimensions Buffer_Destroy Event_Destroy LoadedExecutable_GetExecutable
    LoadedExecutable_AddressableDevices LoadedExecutable_GetDeviceAssignment
    LoadedExecutable_Destroy Executable_Destroy Client_AddressableMemories
    Device_AddressableMemories Client_LookupDevice Device_DefaultMemory Event_OnReady
    Buffer_Memory Buffer_ToHostBuffer Buffer_UnpaddedDimensions Executable_OptimizedProgram"""
  _, _, slots = _api_table()
  by_name = dict(zip(_header_slots(), slots))
  missing = [n for n in needed.split() if not by_name["PJRT_" + n]]
  assert not missing


def test_only_get_pjrt_api_is_exported():
  out = subprocess.run(["nm", "-D", "--defined-only", LIBRARY], capture_output=True, text=True,
                       check=True).stdout
  exported = {line.split()[-1] for line in out.splitlines() if line.split()[1] in "TDB"}
  assert exported == {"GetPjrtApi"}


def test_pypjrt_conformance_has_no_failures_and_runs_compile_and_execute():
  from pypjrt import conform
  from pypjrt._loader import Plugin

  report = conform.run(Plugin(LIBRARY))
  results = {c.id: (c.result.value, c.detail) for c in report.checks}
  failures = {k: v for k, v in results.items() if v[0] == "fail"}
  assert not failures
  must_pass = """client.create client.platform_name client.platform_version client.addressable_devices
    client.all_devices client.addressable_memories errors.error_code_reported device.description
    device.is_addressable device.local_hardware_id device.default_memory device.memory_stats
    device.memory_spaces device.attributes device.coords compile.stablehlo_text
    compile.num_outputs compile.output_element_types compile.output_dimensions
    compile.fingerprint compile.compiled_memory_stats compile.cost_analysis compile.serialize
    compile.optimized_program compile.deserialize_and_load buffer.from_host
    buffer.device_and_memory buffer.is_on_cpu buffer.memory_layout buffer.ready_event
    buffer.opaque_device_pointer buffer.external_reference_count execute.single_device
    execute.device_complete_events""".split()
  not_passing = {k: results.get(k) for k in must_pass if results.get(k, ("missing",))[0] != "pass"}
  assert not not_passing


def _implemented_entry_points() -> list[str]:
  _, _, slots = _api_table()
  return [name for name, fn in zip(_header_slots(), slots) if fn]


# Void or resource-creating entry points the sweeps below do not call with empty arguments.
_NOT_SWEPT = {"PJRT_Error_Destroy", "PJRT_Error_Message", "PJRT_Client_Create"}


@pytest.mark.parametrize("name", [n for n in _implemented_entry_points() if n not in _NOT_SWEPT])
def test_short_struct_size_is_a_clean_invalid_argument(name):
  from pypjrt import errors
  from pypjrt._loader import Plugin

  plugin = Plugin(LIBRARY)
  args = plugin.args(f"{name}_Args")
  args.struct_size = 8
  with pytest.raises(errors.InvalidArgument, match=rf"{name}_Args: expected struct_size >= \d+, got 8"):
    plugin.call(name, args)


@pytest.mark.parametrize("name", [n for n in _implemented_entry_points() if n not in _NOT_SWEPT])
def test_null_handles_give_errors_not_crashes(name):
  from pypjrt import errors
  from pypjrt._loader import Plugin

  plugin = Plugin(LIBRARY)
  try:
    plugin.call(name, plugin.args(f"{name}_Args"))
  except errors.InvalidArgument:
    pass
  except errors.Unimplemented:
    assert name == "PJRT_Client_TopologyDescription"  # docs/pjrt-surface.md
