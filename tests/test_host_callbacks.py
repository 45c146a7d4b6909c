"""Host callbacks (jax.debug.print / debug.callback, pure_callback, io_callback) run on trn as on
the CPU backend: the same printed lines in the same order, the same results, inside jit, loops and
vmap; errors raised in a callback surface from the execution and leave the client usable; the
timing model charges the host round trip; programs with callbacks bypass the compile cache."""

import gc
import re
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback

import compiler_harness
import fresh_process
import jax_trn
from hlo_lowering.program import reader
from jax_trn import compilation, host_callbacks


def _on(device, fn, *args):
  """fn jitted on `device`, its result fetched (so every callback has run)."""
  args = [jax.device_put(a, device) for a in args]
  return jax.tree.map(np.asarray, jax.block_until_ready(jax.jit(fn)(*args)))


def _printed(capsys, device, fn, *args):
  capsys.readouterr()
  result = _on(device, fn, *args)
  jax.effects_barrier()
  return capsys.readouterr().out, result


def _same_on_both(capsys, trn, cpu, fn, *args):
  """(printed, result) on trn, after checking both equal the CPU backend's."""
  want_out, want = _printed(capsys, cpu, fn, *args)
  got_out, got = _printed(capsys, trn, fn, *args)
  assert got_out == want_out
  jax.tree.map(np.testing.assert_allclose, got, want)
  return got_out, got


def test_debug_print_inside_jit_prints_what_cpu_prints(capsys, trn, cpu):
  def f(x, n):
    jax.debug.print("x = {x}, n = {n}", x=x, n=n)
    y = jnp.sin(x) * n
    jax.debug.print("y = {}", y)
    return y

  out, _ = _same_on_both(capsys, trn, cpu, f, np.arange(4, dtype=np.float32), np.int32(3))
  assert out.count("\n") == 2 and out.startswith("x = [0. 1. 2. 3.], n = 3")


def test_ordered_debug_print_keeps_program_order(capsys, trn, cpu):
  def f(x):
    for i in range(4):
      jax.debug.print("step {i}: {x}", i=i, x=x, ordered=True)
      x = x * 2
    return x

  out, _ = _same_on_both(capsys, trn, cpu, f, np.float32(1.5))
  assert [line.split(":")[0] for line in out.splitlines()] == [f"step {i}" for i in range(4)]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, jnp.bfloat16])
def test_pure_callback_results_match_cpu(trn, cpu, dtype):
  def host(a, b):
    return (np.asarray(a) == np.asarray(b)).astype(np.int8), np.flip(np.asarray(a))

  def f(a, b):
    shapes = (jax.ShapeDtypeStruct(a.shape, jnp.int8), jax.ShapeDtypeStruct(a.shape, a.dtype))
    same, flipped = jax.pure_callback(host, shapes, a, b)
    return same + 1, flipped

  rng = np.random.default_rng(0)
  a = (rng.standard_normal((3, 5)) * 3).astype(dtype)
  b = np.where(rng.random((3, 5)) < 0.5, a, np.zeros_like(a)).astype(dtype)
  got, want = _on(trn, f, a, b), _on(cpu, f, a, b)
  for g, w in zip(got, want):
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_array_equal(g, w)


def test_io_callback_ordered_and_unordered_see_each_value(trn, cpu):
  def record(log):
    def f(x):
      io_callback(lambda v: log.append(("ordered", float(v))), None, x, ordered=True)
      y = io_callback(lambda v: np.float32(v * 10), jax.ShapeDtypeStruct((), jnp.float32), x)
      io_callback(lambda v: log.append(("after", float(v))), None, y, ordered=True)
      return y + 1
    return f

  logs = {}
  for name, device in (("cpu", cpu), ("trn", trn)):
    logs[name] = []
    assert _on(device, record(logs[name]), np.float32(2.0)) == np.float32(21.0)
  assert logs["trn"] == logs["cpu"] == [("ordered", 2.0), ("after", 20.0)]


def test_callbacks_inside_fori_loop_run_every_iteration_in_order(capsys, trn, cpu):
  def f(x):
    def body(i, carry):
      jax.debug.print("i={i} carry={c}", i=i, c=carry, ordered=True)
      return jax.pure_callback(lambda c: (c * 2 + 1).astype(np.float32),
                               jax.ShapeDtypeStruct((), jnp.float32), carry)
    return lax.fori_loop(0, 5, body, x)

  out, result = _same_on_both(capsys, trn, cpu, f, np.float32(0.0))
  assert result == np.float32(31.0) and len(out.splitlines()) == 5


def test_callbacks_inside_a_run_time_while_loop_run_every_iteration(capsys, trn, cpu):
  def f(x, limit):
    def body(carry):
      i, v = carry
      io_callback(lambda a, b: print(f"iteration {int(a)}: {float(b):.1f}"), None, i, v,
                  ordered=True)
      return i + 1, v * 1.5
    return lax.while_loop(lambda c: c[0] < limit, body, (np.int32(0), x))

  out, (count, _) = _same_on_both(capsys, trn, cpu, f, np.float32(2.0), np.int32(4))
  assert count == 4 and out.splitlines()[-1] == "iteration 3: 6.8"


def test_callbacks_in_cond_branches_scan_bodies_and_under_grad_match_cpu(capsys, trn, cpu):
  def f(x, p):
    y = lax.cond(p > 0, lambda v: (jax.debug.print("pos {}", v), v + 1)[1],
                 lambda v: (jax.debug.print("neg {}", v), v - 1)[1], x)

    def step(c, xi):
      jax.debug.print("scan {} {}", c, xi, ordered=True)
      return c + xi, c * xi
    c, ys = lax.scan(step, y, jnp.arange(3.0))
    g = jax.grad(lambda t: (jax.debug.print("grad at {}", t), jnp.sin(t))[1])(c)
    return c, ys, g

  for p in (np.int32(-1), np.int32(1)):
    out, _ = _same_on_both(capsys, trn, cpu, f, np.float32(2), p)
    assert out.splitlines()[0] == ("pos 2.0" if p > 0 else "neg 2.0") and len(out.splitlines()) == 5


@pytest.mark.parametrize("vmap_method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmapped_pure_callback_matches_cpu(trn, cpu, vmap_method):
  def f(x):
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jax.pure_callback(lambda a: np.cumsum(a, axis=-1).astype(a.dtype), out, x,
                             vmap_method=vmap_method)

  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  np.testing.assert_array_equal(_on(trn, jax.vmap(f), x), _on(cpu, jax.vmap(f), x))


def test_vmapped_debug_print_prints_what_cpu_prints(capsys, trn, cpu):
  def f(x):
    jax.debug.print("row {x}", x=x)
    return x * 2

  out, _ = _same_on_both(capsys, trn, cpu, jax.vmap(f), np.arange(6, dtype=np.float32).reshape(3, 2))
  assert len(out.splitlines()) == 3


def test_pmap_runs_each_cores_callbacks_on_its_own_values(capsys):
  n = 4

  def f(x):
    jax.debug.print("core value {}", x)
    return jax.pure_callback(lambda a: a * 10, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

  x = np.arange(n, dtype=np.float32)
  printed = {}
  for platform in ("cpu", "trn"):
    capsys.readouterr()
    out = jax.pmap(f, devices=jax.devices(platform)[:n])(x)
    np.testing.assert_array_equal(np.asarray(out), x * 10)
    jax.effects_barrier()
    printed[platform] = sorted(capsys.readouterr().out.splitlines())  # cores run concurrently
  assert printed["trn"] == printed["cpu"] == [f"core value {float(v)}" for v in x]


def test_a_jit_over_sharded_arrays_prints_once_as_on_cpu(capsys):
  from jax.sharding import Mesh, NamedSharding, PartitionSpec

  def f(v):
    jax.debug.print("whole {}", v)
    return jax.pure_callback(lambda a: a + 1, jax.ShapeDtypeStruct(v.shape, v.dtype), v)

  printed = {}
  for platform in ("cpu", "trn"):
    mesh = Mesh(np.array(jax.devices(platform)[:4]), ("x",))
    x = jax.device_put(np.arange(8, dtype=np.float32), NamedSharding(mesh, PartitionSpec("x")))
    capsys.readouterr()
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x)), np.arange(8) + 1)
    jax.effects_barrier()
    printed[platform] = capsys.readouterr().out
  assert printed["trn"] == printed["cpu"] == "whole [0. 1. 2. 3. 4. 5. 6. 7.]\n"


def test_debug_callback_receives_the_arrays(trn, cpu):
  seen = {}

  def f(x):
    jax.debug.callback(lambda a, b: seen.setdefault(len(seen), (np.asarray(a), np.asarray(b))),
                       x, x.sum())
    return x

  x = np.arange(5, dtype=np.int32)
  _on(cpu, f, x)
  _on(trn, f, x)
  jax.effects_barrier()
  (cpu_a, cpu_b), (trn_a, trn_b) = seen[0], seen[1]
  np.testing.assert_array_equal(trn_a, cpu_a)
  assert trn_b == cpu_b == 10


def test_a_raising_callback_fails_the_execution_and_the_client_stays_usable(trn):
  def bad(a):
    raise ValueError("the callback refuses")

  def f(x):
    return jax.pure_callback(bad, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

  with pytest.raises(jax.errors.JaxRuntimeError,
                     match=r"(?s)host callback raised ValueError: the callback refuses.*"
                           r"host_callback"):
    _on(trn, f, np.ones(3, np.float32))
  np.testing.assert_array_equal(_on(trn, lambda x: x * 3, np.ones(3, np.float32)), [3, 3, 3])


def test_a_callback_returning_the_wrong_shape_is_a_clear_error(trn):
  def f(x):
    return jax.pure_callback(lambda a: np.zeros(7, np.float32),
                             jax.ShapeDtypeStruct(x.shape, x.dtype), x)

  with pytest.raises(jax.errors.JaxRuntimeError, match=r"Incorrect output shape"):
    _on(trn, f, np.ones(3, np.float32))


def test_the_timing_model_charges_the_host_round_trip(trn):
  def f(x):
    for _ in range(3):
      x = jax.pure_callback(lambda a: a + 1, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return x

  x = jax.device_put(np.zeros(1024, np.float32), trn)
  jax.block_until_ready(jax.jit(f)(x))
  pool = jax_trn.profile.last_execution(trn).streams["POOL"]
  assert pool.instructions == 3
  # Three round trips of the named estimate (20 us), each moving 8 KiB over the host link.
  assert 3 * 20_000 < pool.busy_ns < 3 * 21_000


def test_programs_with_callbacks_bypass_the_compile_cache(trn):
  def f(x):
    jax.debug.print("{}", x)
    return x + 1

  before = compilation.cache_stats()
  _on(trn, f, np.float32(1))
  after = compilation.cache_stats()
  assert after["bypassed"] == before["bypassed"] + 1
  assert after["hits"] == before["hits"] and after["misses"] == before["misses"]


def test_a_freed_executable_releases_its_callbacks(trn):
  x = jax.device_put(np.float32(1), trn)
  gc.collect()  # other tests' executables: freed now, not while this one is counted
  before = host_callbacks.registered()
  compiled = jax.jit(lambda v: jax.pure_callback(
      lambda a: a, jax.ShapeDtypeStruct((), jnp.float32), v)).lower(x).compile()
  assert host_callbacks.registered() == before + 1
  assert compiled(x) == 1
  del compiled
  gc.collect()
  assert host_callbacks.registered() == before


def test_runs_queued_before_their_executable_is_freed_still_call_back(trn):
  def slow(a):
    time.sleep(0.1)
    return a + 1

  x = jax.device_put(np.float32(1), trn)
  compiled = jax.jit(lambda v: jax.pure_callback(
      slow, jax.ShapeDtypeStruct((), jnp.float32), v)).lower(x).compile()
  results = [compiled(x) for _ in range(3)]
  del compiled
  gc.collect()
  assert [float(r) for r in results] == [2.0, 2.0, 2.0]


def test_the_runtime_alone_refuses_a_program_that_calls_the_host():
  program = compilation.compile_text("""
      func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
        %0 = stablehlo.custom_call @trn_host_callback(%a) {mhlo.backend_config = {callback = 7 : ui64}}
            : (tensor<4xf32>) -> tensor<4xf32>
        return %0 : tensor<4xf32>
      }""")
  assert "host_callback callback=7" in reader.disassemble(program)
  with pytest.raises(Exception, match=r"host_callback.*calls the host.*no host-callback handler"):
    compiler_harness.run_program(program, [np.ones(4, np.float32)])


def test_a_script_that_exits_with_results_pending_exits_cleanly():
  # The queued runs reach their callbacks while the interpreter exits: jax_trn's exit hook lets
  # them finish before finalization (as on the CPU backend), so no thread is ended by Python
  # inside jaxlib (an abort) and none deadlocks.
  result = fresh_process.run_python(textwrap.dedent("""
      from jax_trn import plugin
      plugin.initialize()
      import time
      import jax, jax.numpy as jnp
      def slow(a):
        time.sleep(0.3)
        print("ran", flush=True)
        return a
      f = jax.jit(lambda v: jax.pure_callback(slow, jax.ShapeDtypeStruct(v.shape, v.dtype), v))
      x = jax.device_put(jnp.arange(3.0), jax.devices("trn")[0])
      kept = [f(x) for _ in range(3)]
      print("exiting", flush=True)
      """), timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split() == ["exiting", "ran", "ran", "ran"]


def test_a_run_queued_after_the_exit_hook_has_its_callback_cancelled():
  # An atexit handler registered before jax_trn's runs after it: the plugin calls no Python any
  # more, so the run's callback is cancelled with an error saying why (no abort, no deadlock).
  result = fresh_process.run_python(textwrap.dedent("""
      import atexit
      import jax, jax.numpy as jnp
      def late():
        try:
          print(f(x).block_until_ready())
        except Exception as e:
          print("late run failed:", e, flush=True)
      atexit.register(late)
      from jax_trn import plugin
      plugin.initialize()
      f = jax.jit(lambda v: jax.pure_callback(lambda a: a + 1, jax.ShapeDtypeStruct(v.shape, v.dtype), v))
      x = jax.device_put(jnp.arange(3.0), jax.devices("trn")[0])
      print(f(x), flush=True)
      """), timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "[1. 2. 3.]" in result.stdout
  assert "late run failed:" in result.stdout
  assert "the Python interpreter is exiting: the host callback was not run" in result.stdout
  assert "SIGINT" not in result.stdout


def test_a_script_that_exits_with_a_print_in_flight_prints_and_exits():
  # The execution is still queued (or calling back) when the interpreter exits: the client's
  # teardown must let the callback take the GIL, not deadlock.
  result = fresh_process.run_python(textwrap.dedent("""
      from jax_trn import plugin
      plugin.initialize()
      import jax, jax.numpy as jnp
      f = jax.jit(lambda x: (jax.debug.print("last {}", x), x * 2)[1])
      f(jax.device_put(jnp.arange(3.0), jax.devices("trn")[0]))
      """), timeout=120)
  assert result.returncode == 0, result.stderr
  assert re.search(r"last \[0\. 1\. 2\.\]", result.stdout)
