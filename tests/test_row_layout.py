"""The row fusion's block layout (lowering/row_fusion.py RowLayout): tiles live at the same time
never share a byte; without reuse they lie one after another in order of their first step, as
the blocks always took them; with reuse a tile takes the place of one whose last reader ran and
the bank is smaller."""

import itertools

from hlo_lowering.lowering.row_fusion import RowLayout

# key -> (first step, last step, bytes): a loaded fp32 row read until step 3, a bf16 row read by
# the next step, an fp32 row from step 2 to the stores and a bf16 row from step 4.
_SPANS = {"loaded": (-1, 3, 8192), "short": (0, 1, 4096), "long": (2, 5, 8192),
          "late": (4, 5, 4096)}


def _disjoint_while_live(layout: RowLayout) -> bool:
  for a, b in itertools.combinations(layout.spans, 2):
    (fa, la, na), (fb, lb, nb) = layout.spans[a], layout.spans[b]
    if fa <= lb and fb <= la:
      lo_a, lo_b = layout.offsets[a], layout.offsets[b]
      if lo_a < lo_b + nb and lo_b < lo_a + na:
        return False
  return layout.nbytes >= max(layout.offsets[k] + n for k, (_, _, n) in layout.spans.items())


def test_without_reuse_tiles_lie_one_after_another_in_step_order():
  layout = RowLayout(_SPANS, reuse=False)
  assert layout.offsets == {"loaded": 0, "short": 8192, "long": 12288, "late": 20480}
  assert layout.nbytes == 24576 and _disjoint_while_live(layout)


def test_reuse_takes_the_place_of_rows_already_read():
  layout = RowLayout(_SPANS, reuse=True)
  assert _disjoint_while_live(layout)
  assert layout.nbytes == 16384  # the most bytes live at once (steps 2 and 3)
  assert layout.offsets["late"] == layout.offsets["loaded"]


def test_mixed_widths_are_placed_widest_first_when_that_packs_tighter():
  """In step order, the bf16 row live from step 0 lands above the loaded one's place, and the
  two fp32 rows of steps 2-4 must go above it: 24 KiB. Widest first, the fp32 rows take the
  bottom (the loaded row shares it before they arrive) and the other bf16 row goes above them:
  20 KiB, the most live at once."""
  spans = {"loaded": (-1, 0, 4096), "a": (0, 4, 4096), "c": (2, 4, 8192), "d": (3, 4, 8192)}
  assert RowLayout._place(spans, sorted(spans, key=lambda k: spans[k][0]), None)[1] == 24576
  layout = RowLayout(spans, reuse=True)
  assert _disjoint_while_live(layout)
  assert layout.nbytes == 20480
