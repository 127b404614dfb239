"""The names of the Python Array API standard (2025.12), by chapter of the spec.

A wrapped namespace exposes each of these that its backend has, and nothing
else. The chapters also name the files of ``autodiff/vjps/``.
"""

CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")
DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
)  # fmt: skip
CREATION = (
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
)  # fmt: skip
DATA_TYPE = ("astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type")
ELEMENTWISE = (
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_left_shift", "bitwise_invert", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "conj", "copysign", "cos",
    "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater",
    "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal",
    "log", "log1p", "log2", "log10", "logaddexp", "logical_and", "logical_not",
    "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder",
    "round", "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan",
    "tanh", "trunc",
)  # fmt: skip
INDEXING = ("take", "take_along_axis")
LINEAR_ALGEBRA = ("matmul", "matrix_transpose", "tensordot", "vecdot")
MANIPULATION = (
    "broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "expand_dims",
    "flip", "moveaxis", "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack",
    "tile", "unstack",
)  # fmt: skip
SEARCHING = ("argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where")
SET = ("unique_all", "unique_counts", "unique_inverse", "unique_values")
SORTING = ("argsort", "sort")
STATISTICAL = (
    "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var",
)  # fmt: skip
UTILITY = ("all", "any", "diff", "isin")
INSPECTION = ("__array_namespace_info__",)

MAIN = (
    CONSTANTS + DTYPES + CREATION + DATA_TYPE + ELEMENTWISE + INDEXING + LINEAR_ALGEBRA
    + MANIPULATION + SEARCHING + SET + SORTING + STATISTICAL + UTILITY + INSPECTION
)  # fmt: skip

LINALG = (
    "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
    "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer",
    "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
    "vector_norm",
)  # fmt: skip
FFT = (
    "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
    "fftfreq", "rfftfreq", "fftshift", "ifftshift",
)  # fmt: skip
