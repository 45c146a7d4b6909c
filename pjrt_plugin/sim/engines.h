// The functional side of each engine: what one instruction does to SBUF, PSUM and HBM. Operands
// were validated by the loader, so these only compute. One file per engine.
#pragma once

#include "machine.h"
#include "program.h"

namespace trn::sim {

// dma_engine.cc
void RunDmaCopy(Machine& machine, const DmaCopy& dma);

// tensor_engine.cc
void RunMatmul(Machine& machine, const Matmul& matmul);
void RunTranspose(Machine& machine, const Transpose& transpose);

// vector_engine.cc: tensor_tensor, tensor_scalar, tensor_reduce, tensor_copy, tensor_ternary,
// tensor_unary.
void RunVectorInstruction(Machine& machine, const Instruction& inst);

// scalar_engine.cc
void RunActivation(Machine& machine, const Activation& activation);
void RunActivationReduce(Machine& machine, const ActivationReduce& activation);

// gpsimd_engine.cc: the gp_* general-purpose ops over HBM.
void RunGpSimdInstruction(Machine& machine, const Instruction& inst);

// gpsimd_indexing.cc: gp_gather and gp_scatter (run-time indices).
void RunGpSimdIndexing(Machine& machine, const Instruction& inst);

// gpsimd_sort.cc: gp_sort and gp_arg_reduce.
void RunGpSimdOrdering(Machine& machine, const Instruction& inst);

// gpsimd_convolution.cc: gp_convolution.
void RunGpConvolution(Machine& machine, const GpConvolution& conv);

// gpsimd_windows.cc: gp_reduce_window and gp_select_and_scatter (sliding windows).
void RunGpSimdWindows(Machine& machine, const Instruction& inst);

}  // namespace trn::sim
