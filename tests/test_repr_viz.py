"""Tensor repr and computation-graph drawing (autodiff.viz)."""

import os
import re
import shutil
import stat
import sys

import numpy as np
import pytest

import autodiff as ad
from autodiff import viz


@pytest.fixture
def npx():
    return ad.Autodiff(np)


# -- repr ---------------------------------------------------------------------------------------


def test_repr_leaf(npx):
    t = npx.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert repr(t) == "tensor([[1., 2.],\n        [3., 4.]], dtype=float64, device=cpu)"
    assert str(t) == repr(t)


def test_repr_requires_grad_leaf(npx):
    t = npx.asarray([1.0, 2.5], dtype=npx.float32, requires_grad=True)
    assert repr(t) == "tensor([1. , 2.5], dtype=float32, device=cpu, requires_grad=True)"


def test_repr_computed(npx):
    x = npx.asarray([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert repr(x @ x) == (
        "tensor([[ 7., 10.],\n        [15., 22.]], dtype=float64, device=cpu, grad_fn=<matmul>)"
    )
    assert repr(npx.sum(x)) == "tensor(10., dtype=float64, device=cpu, grad_fn=<sum>)"
    with ad.no_grad():
        assert repr(x * 2) == "tensor([[2., 4.],\n        [6., 8.]], dtype=float64, device=cpu)"


def test_repr_zero_d_int_bool(npx):
    assert repr(npx.asarray(3)) == "tensor(3, dtype=int64, device=cpu)"
    assert repr(npx.asarray([1, 2], dtype=npx.int32)) == "tensor([1, 2], dtype=int32, device=cpu)"
    assert repr(npx.asarray([True, False])) == "tensor([ True, False], dtype=bool, device=cpu)"


def test_repr_honours_print_options_and_summarizes(npx):
    t = npx.ones(100_000)
    assert repr(t) == "tensor([1., 1., 1., ..., 1., 1., 1.], dtype=float64, device=cpu)"
    with np.printoptions(precision=2):
        assert repr(npx.asarray([1 / 3])) == "tensor([0.33], dtype=float64, device=cpu)"


def test_repr_array_api_strict():
    strict = pytest.importorskip("array_api_strict")
    sx = ad.Autodiff(strict)
    x = sx.asarray([1.0, 2.0], requires_grad=True)
    r = repr(sx.exp(x))
    assert r.startswith("tensor([2.71828183, 7.3890561 ], dtype=float64, device=")
    assert "CPU_DEVICE" in r and r.endswith("grad_fn=<exp>)")
    d1 = sx.asarray([1, 2], dtype=sx.int32, device=strict.Device("device1"))
    r = repr(d1)
    assert r.startswith("tensor([1, 2], dtype=int32, device=") and "device1" in r


# -- to_dot -------------------------------------------------------------------------------------


def _boxes(dot):
    return re.findall(r'label="([^"\\]*)[^"]*", shape=box', dot)


def _edges(dot):
    return re.findall(r"^  (n\d+) -> (n\d+)", dot, flags=re.M)


def test_dot_of_a_small_graph(npx):
    x = npx.asarray([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = npx.sum(npx.exp(x) * x)
    dot = viz.to_dot(y)
    assert dot.startswith("digraph autodiff {") and dot.rstrip().endswith("}")
    assert sorted(_boxes(dot)) == ["exp", "multiply", "sum"]
    assert dot.count("shape=ellipse") == 1  # x once, despite its two uses
    edges = _edges(dot)
    assert len(edges) == 4
    ids = {label: i for i, label in re.findall(r'^  (n\d+) \[label="(\w+)', dot, flags=re.M)}
    leaf = ids["leaf"]
    assert (leaf, ids["exp"]) in edges and (leaf, ids["multiply"]) in edges
    assert (ids["exp"], ids["multiply"]) in edges and (ids["multiply"], ids["sum"]) in edges
    # The output is highlighted, and listed first (ids in order of discovery).
    assert re.search(r'^  n0 \[label="sum\\n\(\) float64", shape=box, style=filled', dot, re.M)
    assert "(2, 2) float64\\nrequires_grad" in dot
    assert viz.to_dot(y) == dot  # stable


def test_dot_without_shapes(npx):
    x = npx.asarray([1.0, 2.0], requires_grad=True)
    dot = viz.to_dot(npx.sum(x * x), show_shapes=False)
    assert "float64" not in dot and "(2,)" not in dot
    assert sorted(_boxes(dot)) == ["square", "sum"]  # x * x is recorded as square(x)


def test_dot_of_a_multi_output_op(npx):
    x = npx.asarray([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    a, b = npx.unstack(x)
    dot = viz.to_dot(npx.sum(a * b))
    assert dot.count('label="unstack') == 1
    assert '[label="0"]' in dot and '[label="1"]' in dot


def test_dot_of_a_leaf_and_a_constant(npx):
    x = npx.asarray([1.0], requires_grad=True)
    dot = viz.to_dot(x)
    assert "shape=ellipse, style=filled" in dot and "requires_grad" in dot
    c = viz.to_dot(npx.asarray([1, 2]))
    assert "requires_grad" not in c and "int64" in c
    with pytest.raises(TypeError, match="Tensor"):
        viz.to_dot(np.ones(2))


def test_dot_of_a_deep_chain(npx):
    x = npx.asarray([1.0], requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0
    dot = viz.to_dot(y)
    assert len(_edges(dot)) == 10_000
    assert dot.count("shape=box") == 10_000


def test_dot_after_backward(npx):
    # Backward frees what the nodes saved, not the ops or edges: the graph still draws.
    x = npx.asarray([1.0, 2.0], requires_grad=True)
    y = npx.sum(npx.exp(x) * x)
    before = viz.to_dot(y)
    y.backward()
    assert viz.to_dot(y) == before


def test_labels_are_escaped():
    assert viz._esc('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


# -- draw_graph ---------------------------------------------------------------------------------


def _no_graphviz(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz -> ImportError


def test_draw_without_graphviz(npx, monkeypatch, tmp_path):
    _no_graphviz(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    x = npx.asarray([1.0], requires_grad=True)
    y = npx.sum(x * x)
    assert viz.draw_graph(y) == viz.to_dot(y)
    with pytest.raises(RuntimeError, match="install|Install"):
        viz.draw_graph(y, tmp_path / "g.svg")
    with pytest.raises(ValueError, match="format"):
        viz.draw_graph(y, tmp_path / "g.svg", format="svg; rm")


@pytest.mark.skipif(os.name != "posix", reason="the fake dot program is a shell script")
def test_draw_calls_the_dot_program(npx, monkeypatch, tmp_path):
    # A stand-in for Graphviz's dot: copies its input to the -o file and records -T.
    _no_graphviz(monkeypatch)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dot"
    fake.write_text('#!/bin/sh\necho "$1" > "$3.fmt"\ncat > "$3"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ.get("PATH", ""))
    x = npx.asarray([1.0], requires_grad=True)
    y = npx.exp(x)
    out = tmp_path / "g.png"
    assert viz.draw_graph(y, out, format="png") == viz.to_dot(y)
    assert out.read_text() == viz.to_dot(y)
    assert (tmp_path / "g.png.fmt").read_text().strip() == "-Tpng"


def _renderer():
    try:
        import graphviz  # noqa: F401
    except ImportError:
        graphviz = None
    return shutil.which("dot"), graphviz


@pytest.mark.skipif(
    _renderer()[0] is None, reason="Graphviz's dot program is not installed: rendering untested"
)
def test_draw_renders_svg(npx, tmp_path):
    x = npx.asarray([1.0, 2.0], requires_grad=True)
    y = npx.sum(npx.exp(x) * x)
    out = tmp_path / "graph.svg"
    viz.draw_graph(y, out)
    svg = out.read_text()
    assert "<svg" in svg and "multiply" in svg


@pytest.mark.skipif(_renderer()[1] is None, reason="the graphviz Python package is not installed")
def test_draw_returns_a_source_for_notebooks(npx):
    import graphviz

    x = npx.asarray([1.0], requires_grad=True)
    src = viz.draw_graph(npx.exp(x))
    assert isinstance(src, graphviz.Source) and "exp" in src.source
