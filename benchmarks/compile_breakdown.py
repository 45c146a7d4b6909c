"""Where the Python compiler spends its time, stage by stage, on issue 6's programs.

    python benchmarks/compile_breakdown.py [--seq 512] [--profile N] [--chain 250,500,1000]

For the transformer block fwd+bwd and the 4-layer GPT AdamW step of
benchmarks/compile_and_execute.py, lowers the jitted function to StableHLO once, then compiles it
for trn2 as hlo_lowering.compiler.compile_program does, timing each step: import, every IR pass
by name, codegen (lowering), every back-end stage by name, serialize. Prints the program's size,
instruction count and sha256 (a speed change to the compiler must leave the hash unchanged).
`--profile N` also prints the N functions with the largest cumulative time under cProfile.
`--chain N,...` instead compiles chains of N elementwise ops (f32[128, 64]) and prints each
step's process CPU time per length and its growth over the range: no step may grow faster than
the op count (no pass quadratic in it). Steps run with the garbage collector paused, as the
plugin's compile service runs them (jax_trn/gc_pause.py); CPU time, not wall time, so that a
loaded host does not distort the curve.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import pstats
import time

import jax
import jax.numpy as jnp
import numpy as np

from compile_and_execute import block_fwd_bwd, block_inputs, gpt_inputs, gpt_step
from hlo_lowering import codegen, importer, pipeline
from hlo_lowering.program.reader import read_program
from hlo_lowering.report import CompileReport
from jax_trn import config, gc_pause


def compile_timed(mlir_text: str,
                  clock=time.perf_counter) -> tuple[bytes, list[tuple[str, float]]]:
  """The trn2 program for `mlir_text` and [(step, seconds of `clock`)] in pipeline order."""
  target = config.target_spec("trn2")
  steps = []

  def timed(name, fn, *args):
    start = clock()
    result = fn(*args)
    steps.append((name, clock() - start))
    return result

  module = timed("import", importer.import_program, mlir_text.encode(), "mlir")
  report = CompileReport(target="trn2")
  for p in pipeline.PASSES:
    timed(f"pass {p.name}", pipeline.run_pipeline, module, "0", (p,))
  builder = timed("lowering (codegen)", codegen.generate, module, "trn2", target, report)
  for stage in pipeline.backend.STAGES:
    timed(f"back end {stage.name}", pipeline.run_backend, builder, target, report, "0", (stage,))
  program = timed("serialize", builder.serialize)
  return program, steps


def _chain(n: int):
  """n elementwise ops in a row, alternating two kinds (each uses the previous result)."""
  def f(x, y):
    for i in range(n):
      x = jnp.tanh(x * y + float(i)) if i % 2 else x * 0.5 + y
    return x
  return f


def chain_growth(lengths: list[int], repeats: int = 2) -> None:
  """Prints each compile step's CPU seconds for chains of `lengths` ops and its growth."""
  operands = (np.ones((128, 64), np.float32),) * 2
  best = {}
  for n in lengths:
    text = jax.jit(_chain(n)).lower(*operands).as_text()
    for _ in range(repeats):
      with gc_pause.paused():
        _, steps = compile_timed(text, time.process_time)
      if n not in best or sum(s for _, s in steps) < sum(s for _, s in best[n]):
        best[n] = steps
  first, last = lengths[0], lengths[-1]
  print(f"chains of {', '.join(map(str, lengths))} elementwise ops: CPU seconds per step, and "
        f"its growth over {last / first:.0f}x the ops")
  totals = [sum(s for _, s in best[n]) for n in lengths]
  rows = [("total", totals)] + [
      (name, [dict(best[n])[name] for n in lengths]) for name, _ in best[first]]
  for name, seconds in rows:
    if seconds[-1] >= 0.005:
      growth = seconds[-1] / max(seconds[0], 1e-6)
      print(f"  {name:<44} " + " ".join(f"{t:7.3f}" for t in seconds) + f"   x{growth:5.1f}")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--seq", type=int, default=512, help="transformer block sequence length")
  parser.add_argument("--profile", type=int, default=0, help="cProfile's top N functions")
  parser.add_argument("--chain", default="", help="op counts of elementwise chains to compile")
  args = parser.parse_args()
  if args.chain:
    chain_growth([int(n) for n in args.chain.split(",")])
    return
  cases = {f"transformer block fwd+bwd, seq {args.seq}": (block_fwd_bwd, block_inputs(args.seq)),
           "4-layer GPT AdamW step": (gpt_step, gpt_inputs())}
  for name, (fn, inputs) in cases.items():
    text = jax.jit(fn).lower(*inputs).as_text()
    program, steps = compile_timed(text)
    instructions = sum(len(b.instructions) for b in read_program(program).blocks)
    total = sum(s for _, s in steps)
    print(f"{name}: {total:.2f} s, {len(program):,d} bytes, {instructions:,d} instructions, "
          f"sha256 {hashlib.sha256(program).hexdigest()[:16]}")
    for step, seconds in steps:
      if seconds >= 0.0005:
        print(f"  {step:<44} {seconds * 1e3:9.1f} ms  {100 * seconds / total:5.1f} %")
    if args.profile:
      profiler = cProfile.Profile()
      profiler.enable()
      compile_timed(text)
      profiler.disable()
      pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
  main()
