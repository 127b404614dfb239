"""The standard's signatures: ``_standard.SIGNATURES`` covers every function of the
standard, parses, and matches array_api_strict's; the wrapped namespaces report them."""

import importlib
import inspect

import array_api_strict
import pytest

import autodiff as ad
from autodiff.engine import standard as _standard

P = inspect.Parameter
NOT_FUNCTIONS = set(_standard.CONSTANTS + _standard.DTYPES + _standard.INSPECTION)
STANDARD_FUNCTIONS = (
    [n for n in _standard.MAIN if n not in NOT_FUNCTIONS]
    + [f"linalg.{n}" for n in _standard.LINALG]
    + [f"fft.{n}" for n in _standard.FFT]
)
CREATION = {
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "ones", "ones_like", "zeros", "zeros_like", "fft.fftfreq", "fft.rfftfreq",
}  # fmt: skip


def lookup(mod, name):
    """``mod.linalg.det`` for ``"linalg.det"`` (None where ``mod`` lacks it)."""
    for part in name.split("."):
        mod = getattr(mod, part, None)
    return mod


def strict_functions():
    """The functions array_api_strict exports, less its flag helpers and
    ``__array_namespace_info__`` (which the table leaves out)."""
    out = []
    for prefix, mod in (("", array_api_strict), ("linalg.", array_api_strict.linalg),
                        ("fft.", array_api_strict.fft)):  # fmt: skip
        for n in mod.__all__:
            if n in NOT_FUNCTIONS or "array_api_strict" in n:  # not in the table
                continue
            if inspect.isfunction(getattr(mod, n)):
                out.append(prefix + n)
    return out


def is_sentinel(default):
    """Whether a default of strict's is its internal sentinel (e.g. ``Undef.UNDEF``)."""
    return type(default).__module__.startswith("array_api_strict")


# -- the table -----------------------------------------------------------------------
def test_every_standard_function_has_an_entry_and_nothing_else():
    assert set(_standard.SIGNATURES) == set(STANDARD_FUNCTIONS)
    assert len(STANDARD_FUNCTIONS) == len(set(STANDARD_FUNCTIONS)) == 174


@pytest.mark.parametrize("name", sorted(_standard.SIGNATURES))
def test_entry_parses(name):
    sig = _standard.signature(name)
    assert str(sig) == f"({_standard.SIGNATURES[name]})"  # the text, written canonically
    assert sig.return_annotation is inspect.Signature.empty
    assert all(p.annotation is P.empty for p in sig.parameters.values())
    assert _standard.signature(name) is sig  # cached


def test_strict_functions_are_standard():
    names = strict_functions()
    assert {"sum", "linalg.det", "fft.fft"} <= set(names)
    assert sorted(set(names) - set(_standard.SIGNATURES)) == []


@pytest.mark.parametrize("name", strict_functions())
def test_matches_strict(name):
    def params(sig, ref):
        """(name, kind, repr of the default): only whether there is one where ``ref``'s
        default is strict's sentinel."""
        out = []
        for p, r in zip(sig.parameters.values(), ref.parameters.values()):
            default = repr(p.default)
            if is_sentinel(r.default):
                default = "<no default>" if p.default is P.empty else "<some default>"
            out.append((p.name, p.kind.name, default))
        return out

    ours = _standard.signature(name)
    ref = inspect.signature(lookup(array_api_strict, name))
    assert list(ours.parameters) == list(ref.parameters)
    assert params(ours, ref) == params(ref, ref)


# -- the parser ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, expected",
    [
        ("sum", [("x", P.POSITIONAL_ONLY, P.empty), ("axis", P.KEYWORD_ONLY, None),
                 ("dtype", P.KEYWORD_ONLY, None), ("keepdims", P.KEYWORD_ONLY, False)]),
        ("meshgrid", [("arrays", P.VAR_POSITIONAL, P.empty),
                      ("indexing", P.KEYWORD_ONLY, "xy")]),
        ("eye", [("n_rows", P.POSITIONAL_ONLY, P.empty), ("n_cols", P.POSITIONAL_ONLY, None),
                 ("k", P.KEYWORD_ONLY, 0), ("dtype", P.KEYWORD_ONLY, None),
                 ("device", P.KEYWORD_ONLY, None)]),
        ("full", [("shape", P.POSITIONAL_OR_KEYWORD, P.empty),
                  ("fill_value", P.POSITIONAL_OR_KEYWORD, P.empty),
                  ("dtype", P.KEYWORD_ONLY, None), ("device", P.KEYWORD_ONLY, None)]),
        ("clip", [("x", P.POSITIONAL_ONLY, P.empty), ("min", P.POSITIONAL_OR_KEYWORD, None),
                  ("max", P.POSITIONAL_OR_KEYWORD, None)]),
        ("isdtype", [("dtype", P.POSITIONAL_OR_KEYWORD, P.empty),
                     ("kind", P.POSITIONAL_OR_KEYWORD, P.empty)]),
        ("result_type", [("arrays_and_dtypes", P.VAR_POSITIONAL, P.empty)]),
        ("add", [("x1", P.POSITIONAL_ONLY, P.empty), ("x2", P.POSITIONAL_ONLY, P.empty)]),
        ("linalg.matrix_norm", [("x", P.POSITIONAL_ONLY, P.empty),
                                ("keepdims", P.KEYWORD_ONLY, False),
                                ("ord", P.KEYWORD_ONLY, "fro")]),
    ],
)  # fmt: skip
def test_signature_kinds_and_defaults(name, expected):
    got = [(p.name, p.kind, p.default) for p in _standard.signature(name).parameters.values()]
    assert got == expected
    assert [type(p[2]) for p in got] == [type(e[2]) for e in expected]  # 0 is not 0.0 or False


def test_float_and_negative_defaults():
    assert repr(_standard.signature("std").parameters["correction"].default) == "0.0"
    assert repr(_standard.signature("fft.fftfreq").parameters["d"].default) == "1.0"
    assert _standard.signature("argsort").parameters["axis"].default == -1


def test_parse_handles_commas_in_defaults_and_var_keyword():
    sig = _standard._parse("a, /, sep=', ', axes=(0, 1), *rest, q='\\\\', r=\"it's\", **kw")
    got = [(p.name, p.kind, p.default) for p in sig.parameters.values()]
    assert got == [
        ("a", P.POSITIONAL_ONLY, P.empty),
        ("sep", P.POSITIONAL_OR_KEYWORD, ", "),
        ("axes", P.POSITIONAL_OR_KEYWORD, (0, 1)),
        ("rest", P.VAR_POSITIONAL, P.empty),
        ("q", P.KEYWORD_ONLY, "\\"),
        ("r", P.KEYWORD_ONLY, "it's"),
        ("kw", P.VAR_KEYWORD, P.empty),
    ]
    assert str(_standard._parse("")) == "()"


@pytest.mark.parametrize(
    "text",
    ["/, x", "x, /, /", "x, *, /", "x, *", "*a, *", "*a, *b", "**kw, /", "x=1, y", "x, x",
     "x=f()", "x=", "x,", "a b", "for", "**"],
)  # fmt: skip
def test_parse_rejects_what_python_would(text):
    with pytest.raises(ValueError):
        _standard._parse(text)


@pytest.mark.parametrize("name", ["cholesky", "linalg.sum", "fft", "float64", "pi", "nope"])
def test_unknown_name_raises_key_error(name):
    with pytest.raises(KeyError, match="not a function of the array API standard"):
        _standard.signature(name)


def test_with_requires_grad():
    arange = _standard.signature("arange")
    got = _standard.with_requires_grad(arange)
    text = "start, /, stop=None, step=1, *, dtype=None, device=None"
    assert str(got) == f"({text}, requires_grad=False)"
    assert got.parameters["requires_grad"].kind is P.KEYWORD_ONLY
    assert str(arange) == f"({text})"  # unchanged
    meshgrid = _standard.with_requires_grad(_standard.signature("meshgrid"))
    assert str(meshgrid) == "(*arrays, indexing='xy', requires_grad=False)"
    kwargs = _standard.with_requires_grad(_standard._parse("x, /, **kwargs"))
    assert str(kwargs) == "(x, /, *, requires_grad=False, **kwargs)"
    with pytest.raises(ValueError, match="duplicate"):
        _standard.with_requires_grad(got)


# -- the wrapped namespaces ------------------------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "array_api_strict"])
def test_wrapped_functions_report_the_standard_signature(backend):
    ns = ad.Autodiff(importlib.import_module(backend))
    names = [n for n in STANDARD_FUNCTIONS if lookup(ns, n) is not None]
    assert {"sum", "asarray", "linalg.det", "fft.fft"} <= set(names)
    wrong = []
    for name in names:
        expected = _standard.signature(name)
        if name in CREATION:
            expected = _standard.with_requires_grad(expected)
        try:
            got = inspect.signature(lookup(ns, name))
        except (TypeError, ValueError) as exc:
            wrong.append(f"{name}: no signature ({exc})")
            continue
        if str(got) != str(expected) or got != expected:
            wrong.append(f"{name}{got} should be {name}{expected}")
        # and directly against array_api_strict: the same names and kinds of parameters
        ref = lookup(array_api_strict, name)
        if ref is not None:
            ours = [(p.name, p.kind) for p in got.parameters.values() if p.name != "requires_grad"]
            theirs = [(p.name, p.kind) for p in inspect.signature(ref).parameters.values()]
            if ours != theirs:
                wrong.append(
                    f"{name}{got} differs from array_api_strict's {inspect.signature(ref)}"
                )
    assert not wrong, f"{len(wrong)} of {len(names)} functions:\n" + "\n".join(wrong)
