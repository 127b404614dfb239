"""The names of the Python Array API standard (2025.12), by chapter of the spec.

A wrapped namespace exposes each of these that its backend has, and nothing
else. The chapters also name the files of ``autodiff/vjps/``. ``SIGNATURES``
holds each function's parameters as the spec writes them (no annotations);
:func:`signature` parses them into an :class:`inspect.Signature`.
"""

import ast
import functools
import inspect
import keyword

CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")
DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
)  # fmt: skip
# Dtypes beyond the standard that a backend may have (array-api-compat exposes them):
# its namespace offers them too.
EXTRA_DTYPES = ("float16", "bfloat16")
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

# -- signatures -------------------------------------------------------------------------
# Element-wise functions of one array take ``x, /``; of two arrays, ``x1, x2, /``.
_UNARY = (
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "bitwise_invert", "ceil",
    "conj", "cos", "cosh", "exp", "expm1", "floor", "imag", "isfinite", "isinf", "isnan",
    "log", "log1p", "log2", "log10", "logical_not", "negative", "positive", "real",
    "reciprocal", "round", "sign", "signbit", "sin", "sinh", "square", "sqrt", "tan",
    "tanh", "trunc",
)  # fmt: skip
_BINARY = (
    "add", "atan2", "bitwise_and", "bitwise_left_shift", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "copysign", "divide", "equal", "floor_divide",
    "greater", "greater_equal", "hypot", "less", "less_equal", "logaddexp", "logical_and",
    "logical_or", "logical_xor", "maximum", "minimum", "multiply", "nextafter",
    "not_equal", "pow", "remainder", "subtract",
)  # fmt: skip

SIGNATURES: dict[str, str] = {
    # creation
    "arange": "start, /, stop=None, step=1, *, dtype=None, device=None",
    "asarray": "obj, /, *, dtype=None, device=None, copy=None",
    "empty": "shape, *, dtype=None, device=None",
    "empty_like": "x, /, *, dtype=None, device=None",
    "eye": "n_rows, n_cols=None, /, *, k=0, dtype=None, device=None",
    "from_dlpack": "x, /, *, device=None, copy=None",
    "full": "shape, fill_value, *, dtype=None, device=None",
    "full_like": "x, /, fill_value, *, dtype=None, device=None",
    "linspace": "start, stop, /, num, *, dtype=None, device=None, endpoint=True",
    "meshgrid": "*arrays, indexing='xy'",
    "ones": "shape, *, dtype=None, device=None",
    "ones_like": "x, /, *, dtype=None, device=None",
    "tril": "x, /, *, k=0",
    "triu": "x, /, *, k=0",
    "zeros": "shape, *, dtype=None, device=None",
    "zeros_like": "x, /, *, dtype=None, device=None",
    # data type
    "astype": "x, dtype, /, *, copy=True, device=None",
    "can_cast": "from_, to, /",
    "finfo": "type, /",
    "iinfo": "type, /",
    "isdtype": "dtype, kind",
    "result_type": "*arrays_and_dtypes",
    # element-wise
    **dict.fromkeys(_UNARY, "x, /"),
    **dict.fromkeys(_BINARY, "x1, x2, /"),
    "clip": "x, /, min=None, max=None",
    # indexing
    "take": "x, indices, /, *, axis=None",
    "take_along_axis": "x, indices, /, *, axis=-1",
    # linear algebra
    "matmul": "x1, x2, /",
    "matrix_transpose": "x, /",
    "tensordot": "x1, x2, /, *, axes=2",
    "vecdot": "x1, x2, /, *, axis=-1",
    # manipulation
    "broadcast_arrays": "*arrays",
    "broadcast_shapes": "*shapes",
    "broadcast_to": "x, /, shape",
    "concat": "arrays, /, *, axis=0",
    "expand_dims": "x, /, axis",
    "flip": "x, /, *, axis=None",
    "moveaxis": "x, source, destination, /",
    "permute_dims": "x, /, axes",
    "repeat": "x, repeats, /, *, axis=None",
    "reshape": "x, /, shape, *, copy=None",
    "roll": "x, /, shift, *, axis=None",
    "squeeze": "x, /, axis",
    "stack": "arrays, /, *, axis=0",
    "tile": "x, repetitions, /",
    "unstack": "x, /, *, axis=0",
    # searching
    "argmax": "x, /, *, axis=None, keepdims=False",
    "argmin": "x, /, *, axis=None, keepdims=False",
    "count_nonzero": "x, /, *, axis=None, keepdims=False",
    "nonzero": "x, /",
    "searchsorted": "x1, x2, /, *, side='left', sorter=None",
    "where": "condition, x1, x2, /",
    # set
    "unique_all": "x, /",
    "unique_counts": "x, /",
    "unique_inverse": "x, /",
    "unique_values": "x, /",
    # sorting
    "argsort": "x, /, *, axis=-1, descending=False, stable=True",
    "sort": "x, /, *, axis=-1, descending=False, stable=True",
    # statistical
    "cumulative_prod": "x, /, *, axis=None, dtype=None, include_initial=False",
    "cumulative_sum": "x, /, *, axis=None, dtype=None, include_initial=False",
    "max": "x, /, *, axis=None, keepdims=False",
    "mean": "x, /, *, axis=None, keepdims=False",
    "min": "x, /, *, axis=None, keepdims=False",
    "prod": "x, /, *, axis=None, dtype=None, keepdims=False",
    "std": "x, /, *, axis=None, correction=0.0, keepdims=False",
    "sum": "x, /, *, axis=None, dtype=None, keepdims=False",
    "var": "x, /, *, axis=None, correction=0.0, keepdims=False",
    # utility
    "all": "x, /, *, axis=None, keepdims=False",
    "any": "x, /, *, axis=None, keepdims=False",
    "diff": "x, /, *, axis=-1, n=1, prepend=None, append=None",
    "isin": "x1, x2, /, *, invert=False",
    # linalg extension
    "linalg.cholesky": "x, /, *, upper=False",
    "linalg.cross": "x1, x2, /, *, axis=-1",
    "linalg.det": "x, /",
    "linalg.diagonal": "x, /, *, offset=0",
    "linalg.eig": "x, /",
    "linalg.eigh": "x, /",
    "linalg.eigvals": "x, /",
    "linalg.eigvalsh": "x, /",
    "linalg.inv": "x, /",
    "linalg.matmul": "x1, x2, /",
    "linalg.matrix_norm": "x, /, *, keepdims=False, ord='fro'",
    "linalg.matrix_power": "x, n, /",
    "linalg.matrix_rank": "x, /, *, rtol=None",
    "linalg.matrix_transpose": "x, /",
    "linalg.outer": "x1, x2, /",
    "linalg.pinv": "x, /, *, rtol=None",
    "linalg.qr": "x, /, *, mode='reduced'",
    "linalg.slogdet": "x, /",
    "linalg.solve": "x1, x2, /",
    "linalg.svd": "x, /, *, full_matrices=True",
    "linalg.svdvals": "x, /",
    "linalg.tensordot": "x1, x2, /, *, axes=2",
    "linalg.trace": "x, /, *, offset=0, dtype=None",
    "linalg.vecdot": "x1, x2, /, *, axis=-1",
    "linalg.vector_norm": "x, /, *, axis=None, keepdims=False, ord=2",
    # fft extension
    "fft.fft": "x, /, *, n=None, axis=-1, norm='backward'",
    "fft.ifft": "x, /, *, n=None, axis=-1, norm='backward'",
    "fft.fftn": "x, /, *, s=None, axes=None, norm='backward'",
    "fft.ifftn": "x, /, *, s=None, axes=None, norm='backward'",
    "fft.rfft": "x, /, *, n=None, axis=-1, norm='backward'",
    "fft.irfft": "x, /, *, n=None, axis=-1, norm='backward'",
    "fft.rfftn": "x, /, *, s=None, axes=None, norm='backward'",
    "fft.irfftn": "x, /, *, s=None, axes=None, norm='backward'",
    "fft.hfft": "x, /, *, n=None, axis=-1, norm='backward'",
    "fft.ihfft": "x, /, *, n=None, axis=-1, norm='backward'",
    "fft.fftfreq": "n, /, *, d=1.0, dtype=None, device=None",
    "fft.rfftfreq": "n, /, *, d=1.0, dtype=None, device=None",
    "fft.fftshift": "x, /, *, axes=None",
    "fft.ifftshift": "x, /, *, axes=None",
}

_P = inspect.Parameter


def _split(text: str) -> list[str]:
    """``text`` split on its top-level commas (not those in brackets or quotes), stripped."""
    parts, start, depth, quote, escaped = [], 0, 0, None, False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [] if parts == [""] else parts


def _param(name: str, kind, text: str, default=inspect.Parameter.empty) -> inspect.Parameter:
    """One parameter of ``text``; ValueError if ``name`` can't name one."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{name!r} is not a parameter name, in {text!r}")
    return _P(name, kind, default=default)


def _parse(text: str) -> inspect.Signature:
    """The signature a parameter list such as ``"x, /, *, axis=None"`` writes."""
    params: list[inspect.Parameter] = []
    kind = _P.POSITIONAL_OR_KEYWORD
    bare_star = slash = False
    for part in _split(text):
        if part == "/":
            positional = all(p.kind is _P.POSITIONAL_OR_KEYWORD for p in params)
            if slash or kind is not _P.POSITIONAL_OR_KEYWORD or not params or not positional:
                raise ValueError(f"misplaced '/' in {text!r}")
            params = [p.replace(kind=_P.POSITIONAL_ONLY) for p in params]
            slash = True
            continue
        if part == "*" or (part.startswith("*") and not part.startswith("**")):
            if kind is not _P.POSITIONAL_OR_KEYWORD:
                raise ValueError(f"misplaced {part!r} in {text!r}")
            kind = _P.KEYWORD_ONLY
            if part == "*":
                bare_star = True
            else:
                params.append(_param(part[1:], _P.VAR_POSITIONAL, text))
            continue
        if part.startswith("**"):
            params.append(_param(part[2:], _P.VAR_KEYWORD, text))
            continue
        name, eq, default = part.partition("=")
        name = name.strip()
        try:
            value = ast.literal_eval(default.strip()) if eq else _P.empty
        except (ValueError, SyntaxError, TypeError):
            raise ValueError(f"default of {name!r} in {text!r} is not a literal") from None
        params.append(_param(name, kind, text, value))
        bare_star = False
    if bare_star:
        raise ValueError(f"'*' must be followed by a keyword-only parameter in {text!r}")
    return inspect.Signature(params)  # checks names, their order and duplicates


@functools.cache
def signature(name: str) -> inspect.Signature:
    """The spec's signature of function ``name`` (``"linalg.<name>"``, ``"fft.<name>"`` in the
    extensions), without annotations."""
    try:
        text = SIGNATURES[name]
    except KeyError:
        raise KeyError(
            f"{name!r} is not a function of the array API standard 2025.12 (extension "
            "functions are spelt 'linalg.<name>' and 'fft.<name>')"
        ) from None
    return _parse(text)


def with_requires_grad(sig: inspect.Signature) -> inspect.Signature:
    """``sig`` with a keyword-only ``requires_grad=False`` last (before any ``**kwargs``),
    as creation functions take it."""
    params = list(sig.parameters.values())
    extra = _P("requires_grad", _P.KEYWORD_ONLY, default=False)
    at = len(params) - 1 if params and params[-1].kind is _P.VAR_KEYWORD else len(params)
    return sig.replace(parameters=params[:at] + [extra] + params[at:])
