"""Nodes of the recorded graph, grad mode, and the backward pass.

The backward pass is iterative (Kahn's algorithm over the nodes reachable from
the outputs), so graph depth is bounded by memory, not by Python's recursion
limit. Each node frees what it saved as soon as its rule has run, unless
``retain_graph=True``.
"""

from __future__ import annotations

import threading

from .registry import Op

__all__ = ["no_grad", "enable_grad", "is_grad_enabled", "Node", "MultiNode", "run_backward"]


class _Mode(threading.local):
    enabled = True


mode = _Mode()


def is_grad_enabled() -> bool:
    return mode.enabled


class _GradMode:
    _value: bool

    def __enter__(self):
        self._prev = mode.enabled
        mode.enabled = self._value

    def __exit__(self, *exc):
        mode.enabled = self._prev

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Context manager (and decorator): operations inside are not recorded."""

    _value = False


class enable_grad(_GradMode):
    """Context manager (and decorator): recording on, even inside ``no_grad``."""

    _value = True


class Node:
    """One recorded call of an op.

    ``edges[i]`` is None for an argument that gets no gradient, else
    ``(parent_node, index, shape, dtype)`` for output ``index`` of another node,
    or ``(None, leaf_tensor, shape, dtype)`` for a leaf. ``args`` holds the
    argument values the rule reads (None where it doesn't); it is None once the
    node has been used and freed.
    """

    __slots__ = ("op", "args", "kwargs", "ans", "edges", "versions")
    outs = None  # multi-output nodes (MultiNode): ((shape, dtype), ...) of the outputs

    def __init__(self, op: Op, args, kwargs, ans, edges, versions):
        self.op = op
        self.args = args
        self.kwargs = kwargs
        self.ans = ans
        self.edges = edges
        self.versions = versions

    def __repr__(self):
        return f"<Node {self.op.name}>"


class MultiNode(Node):
    __slots__ = ("outs",)

    def __init__(self, op, args, kwargs, ans, edges, versions, outs):
        super().__init__(op, args, kwargs, ans, edges, versions)
        self.outs = outs


class Meta:
    """Stands for an argument whose values a rule does not read: shape, dtype, device."""

    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape, dtype, device):
        self.shape, self.dtype, self.device = shape, dtype, device

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


def _toposort(roots, stop):
    """How many edges of reachable nodes point at each node, without recursion."""
    deps = dict.fromkeys(roots, 0)
    stack = list(roots)
    while stack:
        node = stack.pop()
        if stop and node in stop:
            continue
        for e in node.edges:
            if e is not None:
                parent = e[0]
                if parent is not None:
                    if parent in deps:
                        deps[parent] += 1
                    else:
                        deps[parent] = 1
                        stack.append(parent)
    return deps


def _reaching(nodes, targets):
    """The nodes from which some target can be reached (the others need no rule run)."""
    children = {}
    for node in nodes:
        if node in targets:
            continue
        for e in node.edges:
            if e is not None and e[0] is not None:
                children.setdefault(e[0], []).append(node)
    good = set(targets)
    stack = list(targets)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in good:
                good.add(child)
                stack.append(child)
    return good


def run_backward(roots, root_grads, glue, retain_graph=False, create_graph=False, targets=None):
    """Pull ``root_grads`` back from ``roots``, a list of ``(node, output index)``.

    Without ``targets`` the gradients of leaves accumulate into ``leaf.grad``.
    With ``targets`` (a list of nodes) nothing accumulates: the gradient reaching
    each target is returned, and the graph is not walked beyond them.
    ``glue`` adapts values between raw arrays and Tensors (see namespace.py).
    """
    root_nodes = list(dict.fromkeys(node for node, _ in roots))
    stop = set(targets) if targets is not None else ()
    deps = _toposort(root_nodes, stop)
    useful = _reaching(list(deps), stop) if targets is not None else None
    buffers = {}
    for (node, index), g in zip(roots, root_grads):
        _accumulate(buffers, node, index, g, glue)
    ready = [n for n in root_nodes if deps[n] == 0]
    captured = {}
    fit, add, raw = glue.fit, glue.add, not create_graph
    while ready:
        node = ready.pop()
        g = buffers.pop(node, None)
        if stop and node in stop:
            captured[node] = g
            continue
        edges = node.edges
        if g is not None and (useful is None or node in useful):
            op = node.op
            if node.versions or node.args is None:
                _check_node(node)
            try:
                if raw and op.elementwise:
                    # Hot path: element-wise rules on raw arrays, no kwargs.
                    args, xp, ans = node.args, glue.xp, node.ans
                    rules = op.vjp
                    if len(edges) == 1:
                        grads = (rules[0](xp, g, ans, *args),)
                    else:
                        e1, e2 = edges
                        grads = (
                            None if e1 is None else rules[0](xp, g, ans, *args),
                            None if e2 is None else rules[1](xp, g, ans, *args),
                        )
                else:
                    xp, g, ans, args, kwargs = glue.prepare(node, g)
                    if op.joint:
                        grads = op.vjp(xp, g, ans, *args, **kwargs)
                    else:
                        rules = op.vjp
                        grads = [
                            None if e is None else rules[i](xp, g, ans, *args, **kwargs)
                            for i, e in enumerate(edges)
                        ]
            except Exception as exc:
                _add_context(exc, f"in the VJP rule of '{op.name}'")
                raise
        else:
            grads = None
        if not retain_graph:
            node.args = node.kwargs = node.ans = None
            node.versions = ()
        i = -1
        for e in edges:
            i += 1
            if e is None:
                continue
            parent, index, shape, dtype = e
            if grads is not None:
                gi = grads[i]
                if gi is not None and (gi.shape != shape or gi.dtype != dtype):
                    gi = fit(gi, shape, dtype)
            else:
                gi = None
            if parent is None:
                if gi is not None and targets is None:
                    glue.accumulate_leaf(index, gi)
                continue
            if gi is not None:
                if parent.outs is None:
                    old = buffers.get(parent)
                    buffers[parent] = gi if old is None else add(old, gi)
                else:
                    _accumulate(buffers, parent, index, gi, glue)
            d = deps[parent] - 1
            deps[parent] = d
            if d == 0:
                ready.append(parent)
    if targets is not None:
        return [captured.get(t) for t in targets]
    return None


def _accumulate(buffers, node, index, g, glue):
    if node.outs is None:
        old = buffers.get(node)
        buffers[node] = g if old is None else glue.add(old, g)
        return
    slots = buffers.get(node)
    if slots is None:
        slots = buffers[node] = [None] * len(node.outs)
    slots[index] = g if slots[index] is None else glue.add(slots[index], g)


def _check_node(node):
    if node.args is None:
        raise RuntimeError(
            f"backward: trying to backward through the graph a second time (op "
            f"'{node.op.name}'): its saved values were freed after the first backward; "
            "pass retain_graph=True to the first backward to keep them"
        )
    for counter, version in node.versions:
        if counter[0] != version:
            raise RuntimeError(
                f"backward: a tensor saved by '{node.op.name}' was modified in place "
                f"after it was saved (version {counter[0]}, expected {version}); "
                "compute the in-place change on a copy, or do it after backward"
            )


def _add_context(exc, text):
    if exc.args and isinstance(exc.args[0], str) and text not in exc.args[0]:
        exc.args = (f"{exc.args[0]} ({text})",) + exc.args[1:]
