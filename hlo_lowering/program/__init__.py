"""The NeuronCore program format, the compiler side: build (builder.py; symbolic on-chip buffers
in buffers.py), serialize (writer.py), and read back / disassemble (reader.py).
docs/program-format.md is the contract; pjrt_plugin/sim/program_loader.cc is the other side."""

from .builder import ProgramBuilder
from .enums import (Alu, ControlOp, DType, Memory, Opcode, Stream, TensorKind, MAX_STREAMS,
                    NUM_STREAMS, core_of, on_core, stream_name)
from .operands import HbmAP, Scalar, TileAP
from .reader import disassemble, read_program

__all__ = ["ProgramBuilder", "Alu", "ControlOp", "DType", "Memory", "Opcode", "Stream", "TensorKind",
           "MAX_STREAMS", "NUM_STREAMS", "core_of", "on_core", "stream_name", "HbmAP", "Scalar", "TileAP", "disassemble",
           "read_program"]
