"""The plugin as JAX sees it: devices, memories and transfers through public JAX calls."""

import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from fresh_process import run_python

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.float16,
          np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


@pytest.fixture(scope="module")
def trn_devices():
  return jax.devices("trn")


def test_devices_describe_simulated_neuroncores(trn_devices):
  device = trn_devices[1]
  assert device.platform == "trn"
  assert "simulated" in device.device_kind and "NeuronCore" in device.device_kind
  assert str(device) == "TRN_1"
  assert list(device.coords) == [device.chip_index % 4, device.chip_index // 4 % 4,
                                 device.chip_index // 16]  # the chip's place in its torus
  assert device.target in ("trn1", "trn2", "trn3") and device.lnc in (1, 2)
  assert {m.kind for m in device.addressable_memories()} == {"device", "pinned_host"}
  assert device.default_memory().kind == "device"
  stats = device.memory_stats()
  assert stats["bytes_limit"] > 0 and "bytes_in_use" in stats


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_device_put_round_trips_every_dtype(trn_devices, dtype):
  array = (np.arange(24).reshape(4, 6) % 5).astype(dtype)
  on_device = jax.device_put(array, trn_devices[0])
  assert on_device.devices() == {trn_devices[0]} and on_device.dtype == array.dtype
  np.testing.assert_array_equal(np.asarray(on_device).view(np.uint8), array.view(np.uint8))


@pytest.mark.parametrize("view", [lambda a: a[:, ::3], lambda a: a.T, lambda a: a[1::2, 2:5]],
                         ids=["step", "transpose", "window"])
def test_non_contiguous_arrays(trn_devices, view):
  array = view(np.arange(60, dtype=np.float32).reshape(6, 10))
  np.testing.assert_array_equal(np.asarray(jax.device_put(array, trn_devices[2])), array)


def test_scalars_and_empty_arrays(trn_devices):
  scalar = jax.device_put(np.float32(2.5), trn_devices[0])
  assert scalar.shape == () and float(scalar) == 2.5
  empty = jax.device_put(np.zeros((0, 4), np.int32), trn_devices[0])
  assert np.asarray(empty).shape == (0, 4)


def test_pinned_host_memory_round_trip(trn_devices):
  device = trn_devices[0]
  array = np.arange(8, dtype=np.float32)
  pinned = jax.device_put(array, jax.sharding.SingleDeviceSharding(device, memory_kind="pinned_host"))
  assert pinned.sharding.memory_kind == "pinned_host"
  back = jax.device_put(pinned, jax.sharding.SingleDeviceSharding(trn_devices[1]))
  assert back.sharding.memory_kind == "device" and back.devices() == {trn_devices[1]}
  np.testing.assert_array_equal(np.asarray(back), array)


def test_float64_is_refused_with_a_hint(trn_devices):
  with jax.enable_x64(True):
    with pytest.raises(Exception, match=r"INVALID_ARGUMENT: NeuronCores have no float64 type.*"
                                        r"use float32 \(in JAX: leave jax_enable_x64 off, "
                                        r"or set TRN_FLOAT64=float32 .*; in PyTorch: "
                                        r"\.float\(\)\)"):
      jax.device_put(np.ones(3, np.float64), trn_devices[0])


def test_jit_runs_on_the_device_of_its_arguments(trn_devices):
  device = trn_devices[1]
  x = jax.device_put(np.arange(4, dtype=np.float32), device)
  y = jax.jit(lambda a: a + 1.0)(x)
  assert y.devices() == {device}
  np.testing.assert_array_equal(np.asarray(y), np.arange(4, dtype=np.float32) + 1)


def test_hbm_exhaustion_is_resource_exhausted_and_the_client_survives():
  script = textwrap.dedent("""
      import jax, numpy as np
      from jax_trn import plugin
      plugin.initialize()
      device = jax.devices("trn")[0]
      kept = jax.device_put(np.ones(1000, np.float32), device)
      try:
        jax.device_put(np.ones(1 << 20, np.float32), device)
        raise SystemExit("no error")
      except Exception as e:
        print(type(e).__name__, e)
      after = jax.device_put(np.full(10, 3, np.float32), device)
      print(np.asarray(after).sum(), np.asarray(kept).sum(), device.memory_stats()["bytes_in_use"])
  """)
  result = run_python(script, {"TRN_HBM_BYTES": str(1 << 20), "JAX_PLATFORMS": "trn"})
  assert result.returncode == 0, result.stderr[-2000:]
  lines = result.stdout.strip().splitlines()
  assert lines[0].startswith("JaxRuntimeError RESOURCE_EXHAUSTED: trn: cannot allocate 4194304 "
                             "bytes on TRN_0 (HBM): 4000 of 1048576 bytes in use")
  assert lines[1] == "30.0 1000.0 4040"
