"""Corrupted programs never crash the host: every mutation of a real compiled program either loads
and runs, or is refused with an error. Runs in a child process so that a crash fails this test
with its signal instead of taking the whole test session down."""

import textwrap

from fresh_process import run_python

_FUZZ = textwrap.dedent("""
    import random
    import jax, jax.numpy as jnp, numpy as np
    from jax_trn import compilation
    from jax_trn import _native

    def model(x, w, idx):
      h = jnp.tanh(x @ w).sum(axis=1)
      return jnp.sort(h)[idx], jnp.argmax(x, axis=0)

    args = (np.ones((130, 70), np.float32), np.ones((70, 9), np.float32), np.int32(3))
    program = compilation.compile_text(jax.jit(model).lower(*args).as_text())
    rng = random.Random(0)
    outcomes = {"ran": 0, "refused": 0}
    for trial in range(__TRIALS__):
      data = bytearray(program)
      for _ in range(rng.choice((1, 2, 8))):
        position = rng.randrange(len(data))
        data[position] = rng.randrange(256)
      if rng.random() < 0.1:
        data = data[:rng.randrange(len(data))]
      try:
        _native.run_program(bytes(data), list(args))
        outcomes["ran"] += 1
      except (ValueError, RuntimeError, MemoryError):  # MemoryError: a huge output shape
        outcomes["refused"] += 1
    print(outcomes["ran"], outcomes["refused"])
""")


def test_mutated_programs_are_refused_or_run_never_crash():
  trials = 400
  result = run_python(_FUZZ.replace("__TRIALS__", str(trials)), timeout=600)
  assert result.returncode == 0, (
      f"the simulator crashed on a corrupted program (exit {result.returncode}):\n"
      f"{result.stderr[-3000:]}")
  ran, refused = map(int, result.stdout.split())
  assert ran + refused == trials
  assert refused > trials // 4  # most corruptions are caught by the loader
