"""Splitting a dim into hardware-sized tiles (the last one may be partial), a launch grid's
programs into shares of them, and the identity tile TensorE's tricks start from."""

import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl


def tiles(total: int, size: int) -> list[tuple[int, int]]:
  """(start, count) of each tile of at most `size` covering range(total)."""
  return [(start, min(size, total - start)) for start in range(0, total, size)]


def program_share(items: list) -> list:
  """The contiguous share of `items` that this program of a 1-d launch grid works on (the
  first programs take one more when they do not divide evenly): with the library's
  `kernel[nl.nc(2)]` launches, each physical core's half."""
  programs, me = nl.num_programs(0), nl.program_id(0)
  base, extra = divmod(len(items), programs)
  start = me * base + min(me, extra)
  return items[start:start + base + (me < extra)]


def three_stage_pipeline(share: list, begin, second, third) -> None:
  """Software-pipelines three stages over `share`'s tiles: at step t, tile t + 2's first stage
  (`begin(*tile)`, which returns the tile's state), tile t + 1's `second(state)` and tile t's
  `third(state)`, so each engine's stream holds work of three different tiles."""
  staged = [begin(*tile) for tile in share[0:2]]
  if staged:
    second(staged[0])
  for t in range(len(share)):
    if t + 2 < len(share):
      staged.append(begin(*share[t + 2]))
    if t + 1 < len(share):
      second(staged[t + 1])
    third(staged[t])


def as_rows(tensor):
  """A dense HBM tensor [..., C] viewed as [rows, C]."""
  cols = tensor.shape[-1]
  return tensor.reshape((tensor.size // cols, cols))


def identity_tile(dtype=nl.bfloat16):
  """The [128, 128] identity (a matmul with it adds its moving operand to a PSUM tile; scaled
  per partition, it scales a moving operand's rows)."""
  pmax = nl.tile_size.pmax
  identity = nl.ndarray((pmax, pmax), dtype=dtype, buffer=nl.sbuf)
  nisa.iota(dst=identity, pattern=[[-1, pmax]], offset=0, channel_multiplier=1)
  nisa.tensor_scalar(dst=identity, data=identity, op0=nl.equal, operand0=0.0)
  return identity
