"""LoweringContext: everything a lowering rule needs while it lowers one op.

Rules read operand places (`place`, `dense_place`, `splat`), allocate result tensors
(`new_result`) or give a result a view of existing memory (`set_place`), take symbolic SBUF slots
and PSUM banks (`sbuf`, `psum`: placed later by the back end's plan-memory stage), and emit
through `builder` with `debug=ctx.debug_id` (DMAs through `dma`, whose queue the back end's
assign-dma-queues stage chooses).
docs/compiler.md ("The LoweringContext API") describes it for rule authors.
"""

from __future__ import annotations

import numpy as np

from hlo_lowering.ir import Op, Value
from hlo_lowering.lowering.allocators import PsumBanks, SbufSlots
from hlo_lowering.lowering.places import Place
from hlo_lowering.program import DType, ProgramBuilder, Scalar, TensorKind


class LoweringContext:
  def __init__(self, builder: ProgramBuilder, target_spec: dict,
               users: dict[Value, list[Op]] | None = None):
    self.builder = builder
    self.target_spec = target_spec
    self.partitions = int(target_spec["partitions"])
    self.sbuf = SbufSlots(builder, int(target_spec["sbuf_bytes_per_partition"]))
    self.psum = PsumBanks(builder, target_spec)
    self.op: Op | None = None
    self.debug_id: int | None = None
    self._places: dict[Value, Place] = {}
    self._splats: dict[Value, object] = {}
    self._users = users or {}
    # value -> (output index, output shape): its producer's new_result allocates that output
    # (the shape differs when the value is returned through a reshape view).
    self._pending_outputs: dict[Value, tuple[int, tuple[int, ...]]] = {}
    self._output_tensors: dict[int, int] = {}
    # Output indices bound to complex64 buffers (their values are f32 [..., 2] pairs).
    self.complex_outputs: set[int] = set()
    self.nibble_outputs: set[int] = set()  # outputs bound to int4/uint4 buffers
    self._names: dict[Value, str] = {}
    # Lowers a list of ops in order with the registered rules (set by codegen; control-flow
    # rules lower their regions with it).
    self.lower_ops = None
    # Results placed before their producer runs (lowering/in_place.py): `new_result` returns
    # these; and concatenate operands that those producers compute in their slot.
    self.planned_places: dict[Value, Place] = {}
    self.slots: dict[Value, Place] = {}

  # --- the op being lowered -----------------------------------------------------------------

  def begin_op(self, op: Op) -> None:
    self.op = op
    self.debug_id = self.builder.debug(op=op.name, name=op.loc.name, location=op.loc.position)

  def users(self, value: Value) -> list[Op]:
    """The ops that read `value` (func.return included; nested ops of regions too)."""
    return self._users.get(value, [])

  # --- places of values ---------------------------------------------------------------------

  def place(self, value: Value) -> Place:
    """Where `value` lives (possibly a strided or broadcast view)."""
    try:
      return self._places[value]
    except KeyError:
      raise ValueError(f"{value} has no place: its producer was not lowered") from None

  def has_place(self, value: Value) -> bool:
    return value in self._places

  def set_place(self, value: Value, place: Place) -> None:
    if place.shape != value.shape or place.dtype != value.dtype:
      raise ValueError(f"place {place} does not fit {value}")
    self._places[value] = place

  def dense_place(self, value: Value) -> Place:
    """A row-major place of `value`, copying a view into a new temporary once if needed."""
    place = self.place(value)
    if place.is_dense:
      return place
    dense = Place.dense(self._new_tensor(value, "temporary"), value.shape, value.dtype)
    if place.size:
      self.dma(dense.collapsed_ap(), place.ap())
    self._places[value] = dense
    return dense

  def save_places(self) -> dict:
    """A snapshot of every value's place, for `restore_places` (control-flow regions)."""
    return dict(self._places)

  def restore_places(self, saved: dict) -> None:
    """Back to `saved`, keeping the places of values first placed since (results of the op being
    lowered); values placed in a region are never used outside it."""
    for value, place in saved.items():
      self._places[value] = place

  def new_temporary(self, value: Value) -> Place:
    """A fresh dense temporary of `value`'s type (never the output tensor)."""
    return Place.dense(self._new_tensor(value, "temporary", name=""), value.shape, value.dtype)

  def new_result(self, value: Value) -> Place:
    """A fresh dense tensor for a result: the program output itself when `value` is returned
    (so no copy is needed), a temporary otherwise; a place planned for it (`planned_places`)
    where there is one."""
    planned = self.planned_places.get(value)
    if planned is not None:
      self._places[value] = planned
      return planned
    pending = self._pending_outputs.pop(value, None)
    if pending is None:
      tensor = self._new_tensor(value, "temporary")
    else:
      index, shape = pending
      tensor = self._new_tensor(value, "output", index, shape,
                                complex_pairs=index in self.complex_outputs,
                                nibbles=index in self.nibble_outputs)
      self._output_tensors[index] = tensor
    place = Place.dense(tensor, value.shape, value.dtype)
    self._places[value] = place
    return place

  def _new_tensor(self, value: Value, kind: str, index: int = 0,
                  shape: tuple[int, ...] | None = None, name: str | None = None,
                  complex_pairs: bool = False, nibbles: bool = False) -> int:
    name = name or self._names.get(value) or f"t{len(self.builder.tensors)}"
    return self.builder.tensor(kind=kind, dtype=value.dtype,
                               shape=value.shape if shape is None else shape,
                               index=index, name=name, complex_pairs=complex_pairs,
                               nibbles=nibbles)

  # --- constants known at compile time -------------------------------------------------------

  def set_splat(self, value: Value, scalar) -> None:
    """Records that every element of `value` is `scalar` (a numpy scalar)."""
    self._splats[value] = scalar

  def splat(self, value: Value):
    """The numpy scalar every element of `value` equals, or None if not known at compile time."""
    return self._splats.get(value)

  def splat_scalar(self, value: Value) -> Scalar | None:
    """`splat(value)` as an instruction immediate of `value`'s dtype."""
    scalar = self._splats.get(value)
    if scalar is None:
      return None
    python_value = float(scalar) if value.dtype.is_float else int(scalar)
    return Scalar(value.dtype, python_value)

  # --- program inputs and outputs (used by codegen) -----------------------------------------

  def bind_parameter(self, value: Value, index: int, name: str,
                     complex_pairs: bool = False, nibbles: bool = False) -> None:
    """`complex_pairs`: the caller's buffer is complex64, `value` its f32 [..., 2] pairs;
    `nibbles`: the caller's buffer is int4/uint4, `value` its bytes as int8/uint8."""
    tensor = self.builder.tensor(kind="parameter", dtype=value.dtype, shape=value.shape,
                                 index=index, name=name, complex_pairs=complex_pairs,
                                 nibbles=nibbles)
    self._places[value] = Place.dense(tensor, value.shape, value.dtype)

  def plan_output(self, value: Value, index: int, name: str,
                  shape: tuple[int, ...] | None = None) -> None:
    """`value` is returned as output `index` (of `shape`, when it is returned through dense
    reshapes): its producer may write the output directly."""
    self._pending_outputs[value] = (index, tuple(value.shape if shape is None else shape))
    self._names[value] = name

  def output_planned(self, value: Value) -> bool:
    return value in self._pending_outputs

  def finish_output(self, value: Value, index: int, name: str) -> None:
    """Makes output `index` hold `value`, copying unless its producer wrote it in place."""
    place = self.place(value)
    tensor = self.builder.tensors[place.tensor]
    written_in_place = (tensor.kind == TensorKind.OUTPUT and tensor.index == index and place.is_dense
                        and place.offset == 0)
    if written_in_place:
      return
    out = self._output_tensors.get(index)
    if out is None:
      out = self.builder.tensor(kind="output", dtype=value.dtype, shape=value.shape, index=index,
                                name=name, complex_pairs=index in self.complex_outputs,
                                nibbles=index in self.nibble_outputs)
    if place.size:
      self.dma(Place.dense(out, value.shape, value.dtype).collapsed_ap(), place.ap())

  # --- emission helpers ---------------------------------------------------------------------

  def dma(self, dst, src, steps=None) -> None:
    """One DMA (its queue chosen by the back end), tagged with the current op; `steps` in a
    loop: {"dst" or "src": elements its HBM offset moves per iteration}."""
    self.builder.dma_copy(None, dst, src, debug=self.debug_id, steps=steps)

  def constant_tensor(self, array: np.ndarray, name: str = "") -> int:
    array = np.ascontiguousarray(array)
    return self.builder.constant(DType.from_numpy(array.dtype), array.shape, array.tobytes(),
                                 name=name)
