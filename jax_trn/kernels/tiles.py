"""Splitting a dim into hardware-sized tiles (the last one may be partial)."""


def tiles(total: int, size: int) -> list[tuple[int, int]]:
  """(start, count) of each tile of at most `size` covering range(total)."""
  return [(start, min(size, total - start)) for start in range(0, total, size)]


def as_rows(tensor):
  """A dense HBM tensor [..., C] viewed as [rows, C]."""
  cols = tensor.shape[-1]
  return tensor.reshape((tensor.size // cols, cols))
