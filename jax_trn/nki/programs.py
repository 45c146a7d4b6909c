"""Tracing a launch grid's programs in turn, each up to its next `nisa.core_barrier`.

Without barriers each program is traced whole, one after another. A core barrier is a point
every program must reach before any continues (NKI's `core_barrier`: the two physical cores
signal each other and wait), so the tracer runs each program in its own thread, one at a time
in grid order, and switches to the next program when one reaches a barrier or ends: the traced
instructions come in epochs (everything before a program's first barrier, then everything
between its first and second, ...), the programs' epochs in grid order. Reads of what another
program wrote before a barrier are then traced after that write, as they run on the chip.
"""

from __future__ import annotations

import threading


class _Aborted(BaseException):
  """Unwinds the programs still waiting once another one has failed."""


class ProgramRunner:
  """Runs `body(point)` for every grid point, switching programs at each `barrier()` call."""

  def __init__(self, points: list, enter, leave):
    self._points = points
    self._enter, self._leave = enter, leave  # a program's trace state: installed, saved
    self._turn = 0
    self._done = [False] * len(points)
    self._barriers = [0] * len(points)
    self._failure: BaseException | None = None
    self._ready = threading.Condition()

  @property
  def barriers(self) -> list[int]:
    """How many barriers each program reached."""
    return list(self._barriers)

  def run(self, body) -> list:
    results = [None] * len(self._points)
    threads = [threading.Thread(target=self._program, args=(i, body, results), daemon=True)
               for i in range(len(self._points))]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()
    if self._failure is not None:
      raise self._failure.with_traceback(self._failure.__traceback__)
    return results

  def barrier(self, index: int) -> None:
    """Program `index` reached a barrier: the next program runs; this one resumes at its
    next turn (after every other program reached this barrier or ended)."""
    self._barriers[index] += 1
    with self._ready:
      self._leave(index)
      self._pass_turn()
      self._wait_for_turn(index)
    self._enter(index)

  def _program(self, index: int, body, results: list) -> None:
    try:
      with self._ready:
        self._wait_for_turn(index)
      self._enter(index)
      results[index] = body(index)
    except _Aborted:
      return
    except BaseException as e:  # noqa: BLE001 (re-raised by run)
      with self._ready:
        self._failure = self._failure or e
    with self._ready:
      self._done[index] = True
      if self._failure is None:
        self._leave(index)
      self._pass_turn()

  def _wait_for_turn(self, index: int) -> None:
    while self._turn != index and self._failure is None:
      self._ready.wait()
    if self._failure is not None:
      raise _Aborted

  def _pass_turn(self) -> None:
    """The turn goes to the next program (in grid order, wrapping) that has not ended."""
    pending = [i for i in range(len(self._points)) if not self._done[i]]
    if pending and self._failure is None:
      after = [i for i in pending if i > self._turn]
      self._turn = after[0] if after else pending[0]
    else:
      self._turn = -1
    self._ready.notify_all()
