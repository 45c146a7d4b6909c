"""Symbolic on-chip buffers: what lowering asks for instead of SBUF/PSUM addresses.

A lowering rule takes a `Buffer` (through the LoweringContext's allocators) and addresses its
tiles as `Address(buffer, offset within the buffer)`; `address + n` moves within the buffer, so a
rule's address arithmetic is relative to its buffers. The back end's plan-memory stage gives
every buffer its place in SBUF/PSUM and rewrites each tile to an absolute byte offset.
"""

from __future__ import annotations

import dataclasses

from .enums import Memory

# How plan-memory places a buffer: one rotating slot (an SBUF slot, a PSUM bank), or every slot
# of the memory at once (a rule that carves all of SBUF into its own rings).
SLOT = "slot"
ARENA = "arena"


@dataclasses.dataclass(frozen=True, eq=False)
class Buffer:
  """`size` bytes in every partition of `memory`; `id` is its place in the builder's list."""
  id: int
  memory: Memory
  size: int
  placement: str  # SLOT | ARENA

  def __str__(self) -> str:
    return f"{self.memory.name.lower()}{self.id}"


@dataclasses.dataclass(frozen=True)
class Address:
  """A byte offset inside a buffer (in every partition)."""
  buffer: Buffer
  offset: int = 0

  def __add__(self, n: int) -> "Address":
    return Address(self.buffer, self.offset + int(n))

  __radd__ = __add__

  def __str__(self) -> str:
    return f"{self.buffer}+{self.offset}"
