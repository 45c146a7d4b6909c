"""Running a traced kernel on NumPy arrays outside JAX: the kernel becomes a whole program
(its inputs the parameters, its outputs the outputs), goes through the compiler's back end
(plan-memory, DMA queues, semaphores) and runs on the simulator with the timing model, so the
result comes with the modeled device time and a profile (per engine, per kernel line). It runs
on the device jax_trn is configured for: a kernel launched over both cores (cores.py) uses both
physical cores of an LNC=2 device.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hlo_lowering import pipeline
from hlo_lowering.program import ProgramBuilder
from hlo_lowering.program.kernel_program import INPUT, OUTPUT, KernelProgram
from hlo_lowering.report import CompileReport
from jax_trn import _native
from jax_trn.nki import device_print
from jax_trn.profile import ExecutionProfile, profile_from_raw

KERNEL_OP = "nki.kernel"


@dataclasses.dataclass
class Simulation:
  """A kernel's outputs on the simulator, with the timing model's profile of the run."""
  outputs: list
  profile: ExecutionProfile
  program: bytes  # the program that ran (hlo_lowering.program.disassemble reads it)

  @property
  def device_time_ns(self) -> float:
    return self.profile.device_time_ns


def physical_cores(spec: dict) -> int:
  """The physical cores of the device the kernel runs on: the configured LNC on the configured
  target, the target's default otherwise."""
  from jax_trn import config
  current = config.current()
  return current.resolved_lnc() if spec["name"] == current.target else int(spec["default_lnc"])


def build_program(kernel: KernelProgram, spec: dict) -> bytes:
  """The NeuronCore program that runs `kernel` alone."""
  spec = dict(spec, lnc=physical_cores(spec))
  builder = ProgramBuilder(target=spec)
  inputs = [(builder.tensor("parameter", t.dtype, t.shape, index=t.index, name=t.name), 0)
            for _, t in kernel.of_kind(INPUT)]
  outputs = [(builder.tensor("output", t.dtype, t.shape, index=t.index, name=t.name), 0)
             for _, t in kernel.of_kind(OUTPUT)]
  debug_ids: dict[str, int] = {}

  def debug_for_line(position: str) -> int:
    if position not in debug_ids:
      debug_ids[position] = builder.debug(op=KERNEL_OP, name=kernel.name, location=position,
                                          lowering="native", rule="nki")
    return debug_ids[position]

  kernel.emit(builder, inputs, outputs, debug_for_line, spec["lnc"])
  pipeline.run_backend(builder, spec, CompileReport(module=kernel.name, target=spec["name"]))
  return builder.serialize()


def simulate(kernel: KernelProgram, arrays: list[np.ndarray], spec: dict) -> Simulation:
  """Runs the kernel; prints what its nl.device_print calls captured, in kernel order."""
  program = build_program(kernel, spec)
  outputs, raw = _native.run_program(program, [np.asarray(a, order="C") for a in arrays],
                                     record_timeline=True)
  returned = len(outputs) - len(kernel.prints)
  device_print.show(kernel.prints, outputs[returned:])
  return Simulation(list(outputs[:returned]), profile_from_raw(raw), program)
