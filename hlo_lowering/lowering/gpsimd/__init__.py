"""GpSimd general-purpose lowerings: correct for any shape and dtype, charged at GpSimd cost.

They operate on HBM access patterns directly (gp_copy, gp_fill, gp_iota, gp_bitcast, gp_reduce,
gp_batch_matmul, gp_convolution, and the data-dependent gp_gather, gp_scatter, gp_arg_reduce, gp_sort, and the
sliding-window gp_reduce_window, gp_select_and_scatter, and the gp_region_* ops whose body is a
region program compiled from the StableHLO region: region_program.py); the compile report lists every op lowered here so users can see the slow path.
"""

from hlo_lowering.lowering.gpsimd import (batch_matmul, bitcast, convolution,  # noqa: F401
                                          data_movement, indexing, iota, reduce, sort,
                                          windows)
