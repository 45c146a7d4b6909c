"""Asynchronous dispatch: a jitted call returns once its execution is queued on its device, the
simulation runs on the device's worker thread, and every consumer of a result (block_until_ready,
np.asarray, the next execution, a copy to another device) waits for it. Errors arrive through
the result; SIGINT cancels a runaway execution and leaves the client usable."""

import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_trn
from fresh_process import run_python


@pytest.fixture(scope="module")
def trn_devices():
  return jax.devices("trn")


@jax.jit
def _iterate(x, n):
  """n sequential steps: host time grows with n, the program does not."""
  return lax.fori_loop(0, n, lambda i, v: v * 0.5 + 1.0, x)


def _iterations_for(seconds: float, x) -> int:
  """The iteration count whose execution takes about `seconds` of host time on this host."""
  n = 200
  _iterate(x, n).block_until_ready()  # compiles
  while True:
    start = time.perf_counter()
    _iterate(x, n).block_until_ready()
    took = time.perf_counter() - start
    if took >= seconds / 4:
      return max(n, int(n * seconds / took))
    n *= 4


def test_a_jitted_call_returns_before_its_execution_ends(trn_devices):
  x = jax.device_put(np.zeros(8, np.float32), trn_devices[0])
  n = _iterations_for(1.0, x)
  start = time.perf_counter()
  y = _iterate(x, n)
  dispatched = time.perf_counter() - start
  y.block_until_ready()
  executed = time.perf_counter() - start
  # Relative to the execution's own duration, so the bound holds on a loaded host.
  assert dispatched < 0.2 * executed, (dispatched, executed)
  np.testing.assert_allclose(np.asarray(y), np.full(8, 2.0), rtol=1e-6)
  # block_until_ready returned after the simulation: its profile is already published.
  assert jax_trn.last_execution(trn_devices[0]).device_time_ns > 0


def test_last_execution_after_block_until_ready_is_that_execution(trn_devices):
  x = jax.device_put(np.zeros(8, np.float32), trn_devices[0])
  _iterate(x, 10).block_until_ready()
  short = jax_trn.last_execution(trn_devices[0]).device_time_ns
  _iterate(x, 1000).block_until_ready()
  assert jax_trn.last_execution(trn_devices[0]).device_time_ns > 10 * short


def test_an_execution_error_arrives_through_the_result_and_the_client_survives(
    trn_devices, monkeypatch):
  runaway = jax.jit(lambda v: lax.while_loop(lambda c: c[0] > -1.0, lambda c: c + 1.0, v))
  x = jax.device_put(np.zeros(4, np.float32), trn_devices[0])
  other = jax.device_put(np.arange(4, dtype=np.float32), trn_devices[0])
  monkeypatch.setenv("TRN_MAX_LOOP_ITERATIONS", "1000")
  y = runaway(x)  # queued: the error is not known yet
  with pytest.raises(Exception, match="iteration cap"):
    y.block_until_ready()
  with pytest.raises(Exception, match="iteration cap"):
    np.asarray(y)
  # A consumer of the failed result fails with the same error (at dispatch once the failure is
  # known, through its own result when queued before); nothing else is affected.
  with pytest.raises(Exception, match="iteration cap"):
    np.asarray(y + 1)
  with pytest.raises(Exception, match="iteration cap"):
    np.asarray(runaway(x) + 1)
  np.testing.assert_array_equal(np.asarray(other * 2), np.arange(4) * 2)
  np.testing.assert_allclose(np.asarray(_iterate(x, 3)), np.full(4, 1.75))


def test_deleting_buffers_while_an_execution_uses_them(trn_devices):
  x = jax.device_put(np.zeros(8, np.float32), trn_devices[0])
  n = _iterations_for(0.3, x)
  argument = jax.device_put(np.zeros(8, np.float32), trn_devices[0])
  y = _iterate(argument, n)
  argument.delete()  # the running execution keeps reading its bytes
  assert argument.is_deleted()
  np.testing.assert_allclose(np.asarray(y), np.full(8, 2.0), rtol=1e-6)
  dropped = jax.device_put(np.zeros(8, np.float32), trn_devices[0])
  z = _iterate(dropped, n)
  del dropped  # the last reference: the buffer is destroyed while the execution reads it
  np.testing.assert_allclose(np.asarray(z), np.full(8, 2.0), rtol=1e-6)
  discarded = _iterate(x, n)
  discarded.delete()  # an output deleted before its execution wrote it
  del discarded
  np.testing.assert_allclose(np.asarray(_iterate(x, 2)), np.full(8, 1.5))


def test_results_chain_into_the_next_execution_and_onto_another_device(trn_devices):
  d0, d1 = trn_devices[0], trn_devices[1]
  x = jax.device_put(np.zeros(8, np.float32), d0)
  n = _iterations_for(0.3, x)
  y = _iterate(x, n)  # still running while the next calls are queued
  same_device = jnp.sin(y) * 3.0
  moved = jax.device_put(y, d1)
  other_device = jnp.cos(moved) + 1.0
  assert other_device.devices() == {d1}
  expected = np.full(8, 2.0, np.float32)
  np.testing.assert_allclose(np.asarray(same_device), np.sin(expected) * 3.0, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(other_device), np.cos(expected) + 1.0, rtol=1e-5)


def test_two_devices_running_at_once_give_the_same_results_and_cycles(trn_devices):
  d0, d1 = trn_devices[0], trn_devices[1]
  x0 = jax.device_put(np.zeros(8, np.float32), d0)
  x1 = jax.device_put(np.zeros(8, np.float32), d1)
  n = _iterations_for(0.3, x0)
  a, b = _iterate(x0, n), _iterate(x1, n)  # both worker threads busy at once
  a.block_until_ready(), b.block_until_ready()
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  # Modeled cycles do not depend on host threads.
  assert (jax_trn.last_execution(d0).device_time_ns ==
          jax_trn.last_execution(d1).device_time_ns)


def test_sigint_interrupts_a_runaway_loop_and_the_client_stays_usable():
  code = textwrap.dedent("""
      import os, signal, threading, time
      from jax_trn import plugin
      plugin.initialize()
      import jax, jax.numpy as jnp, numpy as np
      from jax import lax
      # Python's own handler, whatever the parent left: a job started in the background by a
      # shell without job control (`cmd &`) inherits SIGINT ignored, and Python keeps it so.
      signal.signal(signal.SIGINT, signal.default_int_handler)
      runaway = jax.jit(lambda v: lax.while_loop(lambda c: c[0] > -1.0, lambda c: c + 1.0, v))
      x = jax.device_put(np.zeros(4, np.float32), jax.devices("trn")[0])
      np.asarray(x + 1)  # the client and its worker exist before the clock starts
      threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
      start = time.perf_counter()
      errors = []
      try:
        try:
          runaway(x).block_until_ready()
        except Exception as e:  # the wait fails with CANCELLED, then Python raises the interrupt
          errors.append(str(e))
          time.sleep(0)
      except KeyboardInterrupt:
        print("KeyboardInterrupt after", round(time.perf_counter() - start, 2), flush=True)
      print("errors", errors)
      print("next", np.asarray(jax.jit(lambda v: v * 2 + 1)(jnp.arange(4.0))).tolist())
      """)
  result = run_python(code, env={"TRN_MAX_LOOP_ITERATIONS": "1000000000"}, timeout=120)
  out = result.stdout
  assert result.returncode == 0, result.stderr[-3000:]
  line = next(l for l in out.splitlines() if l.startswith("KeyboardInterrupt after"))
  assert float(line.split()[-1]) < 6.0, out
  # Depending on where Python next runs bytecode, the interrupt arrives before or just after
  # the wait's CANCELLED error.
  errors = next(l for l in out.splitlines() if l.startswith("errors"))
  assert errors == "errors []" or "CANCELLED: interrupted (SIGINT)" in errors, out
  assert "next [1.0, 3.0, 5.0, 7.0]" in out, out


def test_a_sigint_handler_installed_later_still_interrupts_and_is_called():
  """signal.signal after the plugin started replaces the plugin's C-level hook; the next
  execution chains it in front of the new handler again."""
  code = textwrap.dedent("""
      import os, signal, threading, time
      from jax_trn import plugin
      plugin.initialize()
      import jax, jax.numpy as jnp, numpy as np
      from jax import lax
      x = jax.device_put(np.zeros(4, np.float32), jax.devices("trn")[0])
      np.asarray(x + 1)
      class Stop(Exception):
        pass
      def on_sigint(signum, frame):
        raise Stop()
      signal.signal(signal.SIGINT, on_sigint)
      runaway = jax.jit(lambda v: lax.while_loop(lambda c: c[0] > -1.0, lambda c: c + 1.0, v))
      threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
      start = time.perf_counter()
      try:
        try:
          np.asarray(runaway(x))
        except Exception as e:
          if isinstance(e, Stop):
            raise
          time.sleep(0)
      except Stop:
        print("handler after", round(time.perf_counter() - start, 2), flush=True)
      print("next", np.asarray(x + 2).tolist())
      """)
  result = run_python(code, env={"TRN_MAX_LOOP_ITERATIONS": "1000000000"}, timeout=120)
  out = result.stdout
  assert result.returncode == 0, result.stderr[-3000:]
  line = next(l for l in out.splitlines() if l.startswith("handler after"))
  assert float(line.split()[-1]) < 6.0, out
  assert "next [2.0, 2.0, 2.0, 2.0]" in out, out
