"""Nodes of the recorded graph, grad mode, and the backward pass.

The backward pass is iterative (Kahn's algorithm over the nodes reachable from
the outputs), so graph depth is bounded by memory, not by Python's recursion
limit. Each node frees what it saved as soon as its rule has run, unless
``retain_graph=True``.
"""

from __future__ import annotations

import threading
from heapq import heappop, heappush
from itertools import count

from .registry import Op

__all__ = [
    "no_grad",
    "enable_grad",
    "is_grad_enabled",
    "Node",
    "MultiNode",
    "Outer",
    "run_backward",
]


class _Mode(threading.local):
    enabled = True


mode = _Mode()
# How many threads have recording off. While none has, every thread records and
# the hot paths skip the thread-local read: ``if not grad_off[0] or mode.enabled``.
grad_off = [0]
_lock = threading.Lock()


def is_grad_enabled() -> bool:
    return mode.enabled


def _set_mode(value: bool) -> None:
    with _lock:
        if mode.enabled != value:
            grad_off[0] += -1 if value else 1
            mode.enabled = value


class _GradMode:
    _value: bool

    def __enter__(self):
        self._prev = mode.enabled
        _set_mode(self._value)

    def __exit__(self, *exc):
        _set_mode(self._prev)

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


next_seq = count().__next__  # creation order of nodes: a topological order


class Node:
    """One recorded call of an op.

    ``edges[i]`` is None for an argument that gets no gradient, else
    ``(parent_node, index, shape, dtype)`` for output ``index`` of another node,
    or ``(None, leaf_tensor, shape, dtype)`` for a leaf. ``args`` holds the
    argument values the rule reads (None where it doesn't); it is None once the
    node has been used and freed.
    """

    __slots__ = ("op", "args", "kwargs", "ans", "edges", "versions", "seq", "__weakref__")
    outs = None  # multi-output nodes (MultiNode): ((shape, dtype), ...) of the outputs

    def __init__(self, op: Op, args, kwargs, ans, edges, versions):
        self.seq = next_seq()
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


class Outer:
    """A weight's gradient ``a^T @ b``, handed to the backward pass as its factors
    ``a`` (rows, m) and ``b`` (rows, n); with ``b`` None, a bias's: the column sums of
    ``a`` (``a^T 1``).

    Rules of recurrent cells return them for their weights and biases, which a loop
    reuses at every step: the factors a leaf receives are stacked, and the sum of all
    the products is one matmul (one sum for a bias) at the end of the backward pass,
    instead of a small matmul (a sum) and an addition per step. Flowing anywhere but
    into a leaf, it is formed at once.
    """

    __slots__ = ("a", "b")

    def __init__(self, a, b=None):
        self.a, self.b = a, b

    @property
    def shape(self):
        if self.b is None:
            return (self.a.shape[-1],)
        return (self.a.shape[-1], self.b.shape[-1])

    @property
    def dtype(self):
        return self.a.dtype

    def value(self, xp):
        if self.b is None:
            return xp.sum(self.a, axis=0)
        return xp.matrix_transpose(self.a) @ self.b

    @staticmethod
    def total(xp, outers, stacked):
        """The sum of the products, as one matmul over the stacked factors (one sum for
        a bias). ``stacked`` (a dict) keeps the last stack of ``a`` factors by the ids of
        its parts: a weight and its bias share them, and are formed one after the other."""
        if len(outers) == 1:
            return outers[0].value(xp)
        key = tuple(id(o.a) for o in outers)
        a = stacked.get(key)
        if a is None:
            a = xp.concat([o.a for o in outers], axis=0)
            stacked.clear()  # one stack alive at a time
            stacked[key] = a
        if outers[0].b is None:
            return xp.sum(a, axis=0)
        return xp.matrix_transpose(a) @ xp.concat([o.b for o in outers], axis=0)


def _reachable(roots, stop):
    """Every node reachable from ``roots`` (not walking past ``stop``), without recursion."""
    seen = dict.fromkeys(roots)
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in stop:
            continue
        for e in node.edges:
            if e is not None and e[0] is not None and e[0] not in seen:
                seen[e[0]] = None
                stack.append(e[0])
    return list(seen)


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

    Nodes run in decreasing creation order (a max-heap on ``seq``): a node is
    always created after the nodes it reads, so every consumer of a node has run
    before it, and no dependency count is needed. Only nodes a gradient reaches
    are visited.

    Without ``targets`` the gradients of leaves accumulate into ``leaf.grad``.
    With ``targets`` (a list of nodes) nothing accumulates: the gradient reaching
    each target is returned, and the graph is not walked beyond them.
    ``glue`` adapts values between raw arrays and Tensors (see namespace.py).
    """
    stop = set(targets) if targets is not None else ()
    useful = None
    if targets is not None:
        useful = _reaching(_reachable([n for n, _ in roots], stop), stop)
    buffers = {}
    heap = []
    for (node, index), g in zip(roots, root_grads):
        if node not in buffers:
            heappush(heap, (-node.seq, node))
        _accumulate(buffers, node, index, g, glue)
    captured = {}
    fit, add, raw, xp = glue.fit, glue.add, not create_graph, glue.xp
    # The next node and its gradient, while it is the only one pending: a chain runs
    # without the heap or the buffers.
    nxt = nxt_g = None
    while True:
        if nxt is not None:
            node, g, nxt = nxt, nxt_g, None
        elif heap:
            node = heappop(heap)[1]
            g = buffers.pop(node)
        else:
            break
        if stop and node in stop:
            captured[node] = g
            continue
        if useful is not None and node not in useful:
            continue
        op = node.op
        edges = node.edges
        if node.versions or node.args is None:
            _check_node(node)
        try:
            if raw and op.elementwise:
                # Hot path: element-wise rules on raw arrays, no kwargs, and for one
                # argument no broadcasting to undo.
                args, ans = node.args, node.ans
                rules = op.vjp
                if len(edges) == 1:
                    grads, fitted = (rules[0](xp, g, ans, args[0]),), True
                else:
                    a, b = args
                    e1, e2 = edges
                    grads = (
                        None if e1 is None else rules[0](xp, g, ans, a, b),
                        None if e2 is None else rules[1](xp, g, ans, a, b),
                    )
                    fitted = False
            else:
                if raw:
                    if node.outs is not None:
                        g = glue.fill(node, g)
                    rxp, ans, args, kwargs = xp, node.ans, node.args, node.kwargs
                else:
                    rxp, g, ans, args, kwargs = glue.prepare(node, g)
                fitted = False
                if op.joint:
                    if op.needs:
                        # an edge is None or a (non-empty) 4-tuple
                        kwargs = dict(kwargs, needs=tuple(map(bool, edges)))
                    grads = op.vjp(rxp, g, ans, *args, **kwargs)
                else:
                    rules = op.vjp
                    grads = [
                        None if e is None else rules[i](rxp, g, ans, *args, **kwargs)
                        for i, e in enumerate(edges)
                    ]
        except Exception as exc:
            _add_context(exc, f"in the VJP rule of '{op.name}'")
            raise
        if not retain_graph:
            node.args = node.kwargs = node.ans = None
            node.versions = ()
        args = ans = None  # saved values die here, not with the next node
        i = -1
        for e in edges:
            i += 1
            if e is None:
                continue
            gi = grads[i]
            if gi is None:
                continue
            parent, index, shape, dtype = e
            if type(gi) is Outer:
                if parent is None and gi.shape == shape and gi.dtype == dtype:
                    if targets is None:  # a leaf: summed with its other steps at the end
                        glue.defer(index, gi)
                    continue
                gi = gi.value(xp)
            if not fitted and (gi.shape != shape or gi.dtype != dtype):
                gi = fit(gi, shape, dtype)
            if parent is None:
                if targets is None:
                    glue.accumulate_leaf(index, gi)
            elif parent is nxt:
                nxt_g = add(nxt_g, gi)
            elif parent.outs is None:
                old = buffers.get(parent)
                if old is not None:
                    buffers[parent] = add(old, gi)
                elif nxt is None and not heap:
                    nxt, nxt_g = parent, gi
                else:
                    if nxt is not None:  # two pending now: back to the heap
                        buffers[nxt] = nxt_g
                        heappush(heap, (-nxt.seq, nxt))
                        nxt = None
                    buffers[parent] = gi
                    heappush(heap, (-parent.seq, parent))
            else:
                if nxt is not None:
                    buffers[nxt] = nxt_g
                    heappush(heap, (-nxt.seq, nxt))
                    nxt = None
                if parent not in buffers:
                    heappush(heap, (-parent.seq, parent))
                _accumulate(buffers, parent, index, gi, glue)
    glue.flush()
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
