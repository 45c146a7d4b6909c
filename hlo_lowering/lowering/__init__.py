"""Lowering rules: one module per op family, each registering rules with registry.py.

Importing this package imports every rule module so the registry is complete.
"""

from hlo_lowering.lowering import (barrier, collectives, constants,  # noqa: F401
                                   control_flow, convolution, dce_sink, dma_copies, elementwise,
                                   fusion, gpsimd, host_callback, kernel_call, matmul, matmul_pair,
                                   reduce, row_fusion, views)
