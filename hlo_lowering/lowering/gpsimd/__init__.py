"""GpSimd general-purpose lowerings: correct for any shape and dtype, charged at GpSimd cost.

They operate on HBM access patterns directly (gp_copy, gp_fill, gp_iota, gp_bitcast, gp_reduce,
gp_batch_matmul); the compile report lists every op lowered here so users can see the slow path.
"""

from hlo_lowering.lowering.gpsimd import (batch_matmul, bitcast, data_movement,  # noqa: F401
                                          iota, reduce)
