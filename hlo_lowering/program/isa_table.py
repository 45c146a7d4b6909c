"""GENERATED from pjrt_plugin/sim/isa.def by `python -m hlo_lowering.gen_isa`:
do not edit. The program format's numbered vocabularies; enums.py builds its IntEnums
from them."""

DTYPES = {
    'PRED': {'code': 1, 'size': 1, 'cls': 'unsigned'},
    'S8': {'code': 2, 'size': 1, 'cls': 'signed'},
    'S16': {'code': 3, 'size': 2, 'cls': 'signed'},
    'S32': {'code': 4, 'size': 4, 'cls': 'signed'},
    'S64': {'code': 5, 'size': 8, 'cls': 'signed'},
    'U8': {'code': 6, 'size': 1, 'cls': 'unsigned'},
    'U16': {'code': 7, 'size': 2, 'cls': 'unsigned'},
    'U32': {'code': 8, 'size': 4, 'cls': 'unsigned'},
    'U64': {'code': 9, 'size': 8, 'cls': 'unsigned'},
    'F16': {'code': 10, 'size': 2, 'cls': 'float'},
    'F32': {'code': 11, 'size': 4, 'cls': 'float'},
    'F64': {'code': 12, 'size': 8, 'cls': 'float'},
    'BF16': {'code': 13, 'size': 2, 'cls': 'float'},
    'C64': {'code': 14, 'size': 8, 'cls': 'complex'},
    'F8E5M2': {'code': 16, 'size': 1, 'cls': 'float'},
    'F8E4M3FN': {'code': 17, 'size': 1, 'cls': 'float'},
    'S4': {'code': 21, 'size': 1, 'cls': 'signed'},
    'U4': {'code': 22, 'size': 1, 'cls': 'unsigned'},
}

ALU_OPS = {
    'COPY': {'code': 0, 'arity': 1, 'data': 'any'},
    'NEG': {'code': 1, 'arity': 1, 'data': 'any'},
    'ABS': {'code': 2, 'arity': 1, 'data': 'any'},
    'EXP': {'code': 3, 'arity': 1, 'data': 'float'},
    'EXPM1': {'code': 4, 'arity': 1, 'data': 'float'},
    'LOG': {'code': 5, 'arity': 1, 'data': 'float'},
    'LOG1P': {'code': 6, 'arity': 1, 'data': 'float'},
    'TANH': {'code': 7, 'arity': 1, 'data': 'float'},
    'LOGISTIC': {'code': 8, 'arity': 1, 'data': 'float'},
    'SQRT': {'code': 9, 'arity': 1, 'data': 'float'},
    'RSQRT': {'code': 10, 'arity': 1, 'data': 'float'},
    'CBRT': {'code': 11, 'arity': 1, 'data': 'float'},
    'SIN': {'code': 12, 'arity': 1, 'data': 'float'},
    'COS': {'code': 13, 'arity': 1, 'data': 'float'},
    'TAN': {'code': 14, 'arity': 1, 'data': 'float'},
    'FLOOR': {'code': 15, 'arity': 1, 'data': 'float'},
    'CEIL': {'code': 16, 'arity': 1, 'data': 'float'},
    'ROUND_NEAREST_EVEN': {'code': 17, 'arity': 1, 'data': 'float'},
    'ROUND_NEAREST_AFZ': {'code': 18, 'arity': 1, 'data': 'float'},
    'SIGN': {'code': 19, 'arity': 1, 'data': 'any'},
    'NOT': {'code': 20, 'arity': 1, 'data': 'int'},
    'POPCNT': {'code': 21, 'arity': 1, 'data': 'int'},
    'CLZ': {'code': 22, 'arity': 1, 'data': 'int'},
    'IS_FINITE': {'code': 23, 'arity': 1, 'data': 'float'},
    'RECIPROCAL': {'code': 24, 'arity': 1, 'data': 'float'},
    'ERF': {'code': 25, 'arity': 1, 'data': 'float'},
    'SQUARE': {'code': 26, 'arity': 1, 'data': 'float'},
    'ADD': {'code': 32, 'arity': 2, 'data': 'any'},
    'SUB': {'code': 33, 'arity': 2, 'data': 'any'},
    'MUL': {'code': 34, 'arity': 2, 'data': 'any'},
    'DIV': {'code': 35, 'arity': 2, 'data': 'any'},
    'REM': {'code': 36, 'arity': 2, 'data': 'any'},
    'MAX': {'code': 37, 'arity': 2, 'data': 'any'},
    'MIN': {'code': 38, 'arity': 2, 'data': 'any'},
    'POW': {'code': 39, 'arity': 2, 'data': 'any'},
    'ATAN2': {'code': 40, 'arity': 2, 'data': 'float'},
    'AND': {'code': 41, 'arity': 2, 'data': 'int'},
    'OR': {'code': 42, 'arity': 2, 'data': 'int'},
    'XOR': {'code': 43, 'arity': 2, 'data': 'int'},
    'SHIFT_LEFT': {'code': 44, 'arity': 2, 'data': 'int'},
    'SHIFT_RIGHT_LOGICAL': {'code': 45, 'arity': 2, 'data': 'int'},
    'SHIFT_RIGHT_ARITHMETIC': {'code': 46, 'arity': 2, 'data': 'int'},
    'EQ': {'code': 48, 'arity': 2, 'data': 'any'},
    'NE': {'code': 49, 'arity': 2, 'data': 'any'},
    'LT': {'code': 50, 'arity': 2, 'data': 'any'},
    'LE': {'code': 51, 'arity': 2, 'data': 'any'},
    'GT': {'code': 52, 'arity': 2, 'data': 'any'},
    'GE': {'code': 53, 'arity': 2, 'data': 'any'},
    'SELECT': {'code': 64, 'arity': 3, 'data': 'any'},
    'CLAMP': {'code': 65, 'arity': 3, 'data': 'any'},
}

OPCODES = {
    'DMA_COPY': {'code': 1, 'engine': 'DMA'},
    'MATMUL': {'code': 16, 'engine': 'PE'},
    'TRANSPOSE': {'code': 17, 'engine': 'PE'},
    'TENSOR_TENSOR': {'code': 32, 'engine': 'DVE'},
    'TENSOR_SCALAR': {'code': 33, 'engine': 'DVE'},
    'TENSOR_REDUCE': {'code': 34, 'engine': 'DVE'},
    'TENSOR_COPY': {'code': 35, 'engine': 'DVE'},
    'TENSOR_TERNARY': {'code': 36, 'engine': 'DVE'},
    'TENSOR_UNARY': {'code': 37, 'engine': 'DVE'},
    'SCALAR_TENSOR_TENSOR': {'code': 38, 'engine': 'DVE'},
    'BN_STATS': {'code': 39, 'engine': 'DVE'},
    'BN_AGGR': {'code': 40, 'engine': 'DVE'},
    'ACTIVATION': {'code': 48, 'engine': 'ACT'},
    'ACTIVATION_REDUCE': {'code': 49, 'engine': 'ACT'},
    'GP_ELEMENTWISE': {'code': 64, 'engine': 'POOL'},
    'GP_COPY': {'code': 65, 'engine': 'POOL'},
    'GP_FILL': {'code': 66, 'engine': 'POOL'},
    'GP_IOTA': {'code': 67, 'engine': 'POOL'},
    'GP_BITCAST': {'code': 68, 'engine': 'POOL'},
    'GP_REDUCE': {'code': 69, 'engine': 'POOL'},
    'GP_BATCH_MATMUL': {'code': 70, 'engine': 'POOL'},
    'GP_GATHER': {'code': 71, 'engine': 'POOL'},
    'GP_SCATTER': {'code': 72, 'engine': 'POOL'},
    'GP_ARG_REDUCE': {'code': 73, 'engine': 'POOL'},
    'GP_SORT': {'code': 74, 'engine': 'POOL'},
    'GP_REGION_REDUCE': {'code': 75, 'engine': 'POOL'},
    'GP_REGION_SCATTER': {'code': 76, 'engine': 'POOL'},
    'GP_REGION_SORT': {'code': 77, 'engine': 'POOL'},
    'GP_CONVOLUTION': {'code': 80, 'engine': 'POOL'},
    'GP_REDUCE_WINDOW': {'code': 90, 'engine': 'POOL'},
    'GP_SELECT_AND_SCATTER': {'code': 91, 'engine': 'POOL'},
    'GP_REGION_REDUCE_WINDOW': {'code': 94, 'engine': 'POOL'},
    'IOTA': {'code': 92, 'engine': 'POOL'},
    'AFFINE_SELECT': {'code': 93, 'engine': 'POOL'},
    'COLLECTIVE': {'code': 96, 'engine': 'POOL'},
    'PARTITION_ID': {'code': 97, 'engine': 'POOL'},
    'HOST_CALLBACK': {'code': 98, 'engine': 'POOL'},
}

CONTROL_OPS = {
    'END': {'code': 0},
    'JUMP': {'code': 8},
    'BRANCH': {'code': 9},
    'SWITCH': {'code': 10},
}

MEMORIES = {
    'SBUF': {'code': 1},
    'PSUM': {'code': 2},
}

TENSOR_KINDS = {
    'PARAMETER': {'code': 0},
    'OUTPUT': {'code': 1},
    'TEMPORARY': {'code': 2},
    'CONSTANT': {'code': 3},
    'DONATED_PARAMETER': {'code': 4},
}

ENDPOINT_KINDS = {
    'HBM': {'code': 0},
    'TILE': {'code': 1},
}

SCALAR_KINDS = {
    'IMMEDIATE': {'code': 0},
    'TILE': {'code': 1},
}

ROW_SUMS = {
    'NONE': {'code': 0},
    'WRITTEN': {'code': 1},
    'ACTIVATED': {'code': 2},
}

ENGINE_STREAMS = {
    'SP': {'code': 0},
    'ACT': {'code': 1},
    'PE': {'code': 2},
    'DVE': {'code': 3},
    'POOL': {'code': 4},
}

FIRST_DMA_STREAM = 5
NUM_DMA_STREAMS = 16
MAX_CORES = 2
MATMUL_START = 1
MATMUL_STOP = 2
SCATTER_SKIP_OUT_OF_BOUNDS = 0
SCATTER_CLAMP = 1
SORT_FLOAT_TOTAL_ORDER = 0
SORT_FLOAT_CANONICAL = 1
ARG_REDUCE_COMPARATOR = 0
ARG_REDUCE_SELECT = 1
REGION_CONSTANT = 128
REGION_BITCAST = 129
COLLECTIVE_ALL_REDUCE = 0
COLLECTIVE_ALL_GATHER = 1
COLLECTIVE_REDUCE_SCATTER = 2
COLLECTIVE_ALL_TO_ALL = 3
COLLECTIVE_PERMUTE = 4
COLLECTIVE_BROADCAST = 5
COLLECTIVE_RING = 0
COLLECTIVE_HALVING_DOUBLING = 1
COLLECTIVE_HIERARCHICAL = 2
