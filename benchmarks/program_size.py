"""Program size and compile time against tensor size, with counted loops and unrolled
(TRN_UNROLL_LOOPS=1): the curve of issue 6 §1.

    python benchmarks/program_size.py [--rows 65536,262144,1048576] [--gemms 1024,2048,4096]
                                      [--seqs 512,1024,2048,4096,8192] [--unroll-max-seq 2048]

For an elementwise chain over [rows, 16] f32 (a row-vector broadcast keeps rows and columns
apart, so every 128 rows are one tile), a layer norm over the same shape, a bf16 GEMM n³ for each
n and the transformer block fwd+bwd of compile_and_execute.py at each sequence length, prints the
stored instructions (and how many of them are loop bodies), the program bytes and the process CPU
seconds `compilation.compile_text` takes (the trn compile only: JAX's lowering is not timed; CPU
time, so that a loaded host does not bend the curve), once with loops and once unrolled (a block
only up to --unroll-max-seq: unrolled at seq 8192 it compiles for minutes). Then the
curve of issue 6 §1: each figure of the looped block at every seq against seq 512's.
Compile only, no cache (TRN_CACHE_DIR is cleared), in this process.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

os.environ["TRN_CACHE_DIR"] = ""
from compile_and_execute import _layer_norm, block_fwd_bwd, block_inputs  # noqa: E402
from hlo_lowering.program.reader import read_program  # noqa: E402
from jax_trn import compilation  # noqa: E402


def _chain(x, b):
  return jnp.tanh(x * b + 1.0) * 0.5 + x


def _measure(text: str, unroll: bool) -> dict:
  if unroll:
    os.environ["TRN_UNROLL_LOOPS"] = "1"
  else:
    os.environ.pop("TRN_UNROLL_LOOPS", None)
  start = time.process_time()
  program = compilation.compile_text(text)
  seconds = time.process_time() - start
  insts = [i for block in read_program(program).blocks for i in block.instructions]
  return {"instructions": len(insts), "in_loops": sum(i.loop is not None for i in insts),
          "bytes": len(program), "seconds": seconds}


def _row(name: str, text: str, unroll: bool) -> dict:
  """Prints one program's row; returns the looped figures."""
  looped = _measure(text, unroll=False)
  line = (f"{name:<28} {looped['instructions']:>8} {looped['in_loops']:>6} "
          f"{looped['bytes']:>10} {looped['seconds']:>8.2f}   ")
  if unroll:
    unrolled = _measure(text, unroll=True)
    line += (f"{unrolled['instructions']:>9} {unrolled['bytes']:>10} "
             f"{unrolled['seconds']:>8.2f}")
  else:
    line += f"{'-':>9} {'-':>10} {'-':>8}"
  print(line, flush=True)
  return looped


def _curve(blocks: dict) -> None:
  """The looped block's figures at each seq as multiples of the smallest seq's."""
  if len(blocks) < 2:
    return
  first = min(blocks)
  print(f"\ntransformer block, looped, against seq {first}: "
        f"{'seq':>6} {'insts':>7} {'bytes':>7} {'CPU s':>7}")
  for seq, figures in sorted(blocks.items()):
    ratios = [figures[key] / blocks[first][key] for key in ("instructions", "bytes", "seconds")]
    print(f"{'':<46}{seq:>6} " + " ".join(f"{r:>6.2f}x" for r in ratios))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", default="65536,262144,1048576")
  parser.add_argument("--gemms", default="1024,2048,4096")
  parser.add_argument("--seqs", default="512,1024,2048,4096,8192")
  parser.add_argument("--unroll-max-seq", type=int, default=2048,
                      help="the longest seq whose block is also compiled unrolled")
  args = parser.parse_args()
  print(f"{'program':<28} {'loops: insts':>8} {'in loops':>6} {'bytes':>10} {'CPU s':>8}   "
        f"{'unrolled: insts':>9} {'bytes':>10} {'CPU s':>8}")
  for rows in map(int, filter(None, args.rows.split(","))):
    x, b = np.ones((rows, 16), np.float32), np.ones((16,), np.float32)
    _row(f"elementwise chain {rows}x16", jax.jit(_chain).lower(x, b).as_text(), True)
    _row(f"layer norm {rows}x16", jax.jit(_layer_norm).lower(x, b).as_text(), True)
  for n in map(int, filter(None, args.gemms.split(","))):
    a = jax.ShapeDtypeStruct((n, n), jnp.bfloat16)
    _row(f"GEMM {n}^3 bf16", jax.jit(jnp.dot).lower(a, a).as_text(), True)
  blocks = {}
  for seq in map(int, filter(None, args.seqs.split(","))):
    text = jax.jit(block_fwd_bwd).lower(*block_inputs(seq)).as_text()
    blocks[seq] = _row(f"transformer block seq {seq}", text, seq <= args.unroll_max_seq)
  _curve(blocks)


if __name__ == "__main__":
  main()
