"""Drawing the computation graph that produced a Tensor (Graphviz dot).

``to_dot(t)`` gives the dot text: a box per recorded op, an ellipse per leaf
tensor that requires grad, edges from inputs to the op that reads them, and the
op (or leaf) that made ``t`` filled in blue. ``draw_graph(t)`` renders it with the
``graphviz`` package or the ``dot`` program when one is installed.

The graph is walked without recursion, so a graph 10,000 ops deep draws fine.
A graph freed by ``backward()`` still draws: backward drops the values a node
saved, not its op or its edges. Arguments that get no gradient (constants,
integer tensors, anything made under ``no_grad``) were not recorded and are not
drawn.
"""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["to_dot", "draw_graph"]

_OUTPUT_STYLE = 'style=filled, fillcolor="#a6d8ff", penwidth=2'


def _tensor_label(word, t, show_shapes):
    """A tensor's box: ``word``, its shape and dtype, whether it requires grad."""
    label = word
    if show_shapes:
        label += "\n" + _meta(t.shape, t.dtype)
    if t.requires_grad:
        label += "\nrequires_grad"
    return label


def _esc(text: str) -> str:
    """``text`` as the inside of a double-quoted dot string, newlines as line breaks."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _dtype_name(dtype) -> str:
    name = getattr(dtype, "name", None)
    return name if isinstance(name, str) else str(dtype).rsplit(".", 1)[-1]


def _meta(shape, dtype) -> str:
    return f"{tuple(shape)} {_dtype_name(dtype)}"


def to_dot(tensor, *, show_shapes=True) -> str:
    """Graphviz dot text of the graph that produced ``tensor``."""
    from .engine.tensor import Tensor

    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dot: expected an autodiff Tensor, got {type(tensor).__name__}")
    ids: dict = {}  # graph Node or id(leaf) -> dot id, in order of discovery
    out_meta: dict = {}  # single-output Node -> (shape, dtype) of its output
    leaves: dict = {}  # id(leaf) -> leaf Tensor (kept alive so the id stays unique)
    order: list = []  # graph Nodes in order of discovery
    edges: list = []  # (from id, to id, output index or None)

    def node_id(node):
        i = ids.get(node)
        if i is None:
            i = ids[node] = f"n{len(ids)}"
            order.append(node)
            stack.append(node)
        return i

    root = tensor.grad_fn
    stack: list = []
    if root is not None:
        if root.outs is None:
            out_meta[root] = (tensor.shape, tensor.dtype)
        node_id(root)
    while stack:
        node = stack.pop()
        me = ids[node]
        for e in node.edges:
            if e is None:
                continue
            parent, index, shape, dtype = e
            if parent is None:  # a leaf: ``index`` is the leaf tensor itself
                key = id(index)
                src = ids.get(key)
                if src is None:
                    src = ids[key] = f"n{len(ids)}"
                    leaves[key] = index
                edges.append((src, me, None))
                continue
            if parent.outs is None:
                out_meta.setdefault(parent, (shape, dtype))
            src = node_id(parent)
            edges.append((src, me, index if parent.outs is not None else None))

    lines = [
        "digraph autodiff {",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    if root is None:  # the tensor is a leaf, or was made without recording
        label = _tensor_label("tensor", tensor, show_shapes)
        lines.append(f'  n0 [label="{_esc(label)}", shape=ellipse, {_OUTPUT_STYLE}];')
    for node in order:
        label = node.op.name
        if show_shapes:
            if node.outs is not None:
                label += "".join(f"\n{i}: {_meta(s, d)}" for i, (s, d) in enumerate(node.outs))
            elif node in out_meta:
                label += "\n" + _meta(*out_meta[node])
        style = f", {_OUTPUT_STYLE}" if node is root else ""
        lines.append(f'  {ids[node]} [label="{_esc(label)}", shape=box{style}];')
    for key, leaf in leaves.items():
        label = _tensor_label("leaf", leaf, show_shapes)
        lines.append(f'  {ids[key]} [label="{_esc(label)}", shape=ellipse];')
    for src, dst, index in edges:
        attr = "" if index is None else f' [label="{index}"]'
        lines.append(f"  {src} -> {dst}{attr};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw_graph(tensor, path=None, format="svg"):
    """Render the graph of ``tensor``: to ``path``, or as a ``graphviz.Source`` for notebooks.

    With ``path``, the drawing is written there (by the ``graphviz`` package or
    the ``dot`` program) and the dot text is returned. Without ``path``, a
    ``graphviz.Source`` (displayed by notebooks) is returned when the package is
    installed, else the dot text. Raises ``RuntimeError`` when ``path`` is given
    and neither the package nor the ``dot`` program is available.
    """
    if not isinstance(format, str) or not format.replace(":", "").isalnum():
        raise ValueError(f"draw_graph: bad format {format!r} (e.g. 'svg', 'png', 'pdf')")
    dot = to_dot(tensor)
    try:
        import graphviz
    except ImportError:
        graphviz = None
    if path is None:
        return graphviz.Source(dot, format=format) if graphviz is not None else dot
    path = os.fspath(path)
    exe = shutil.which("dot")
    if exe is None:
        if graphviz is not None:
            how = "the graphviz Python package is installed but the 'dot' program is not on PATH"
        else:
            how = "neither the graphviz Python package nor the 'dot' program is available"
        raise RuntimeError(
            f"draw_graph: can't render to a file: {how}. Install Graphviz (e.g. "
            "'apt install graphviz', 'brew install graphviz' or 'conda install graphviz', "
            "and 'pip install graphviz'), or write to_dot(tensor) to a .dot file yourself"
        )
    # The graphviz package runs this same program; calling it directly works with
    # or without the package.
    proc = subprocess.run(
        [exe, f"-T{format}", "-o", path], input=dot.encode("utf-8"), capture_output=True
    )
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"draw_graph: dot failed (exit {proc.returncode}): {err}")
    return dot
