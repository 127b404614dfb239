"""Nodes: one recorded call of an op each, and what their slots hold.

See :class:`Node` for the node protocol: every slot, each value it may hold, who
writes it and who reads it.
"""

from __future__ import annotations

from itertools import count

__all__ = ["Node", "MultiNode", "Meta", "Outer", "Zeros", "Recompute", "Freed", "edge",
           "attach", "next_seq", "check_node"]  # fmt: skip


next_seq = count().__next__  # creation order of nodes: a topological order


class Node:
    """One recorded call of an op: the engine's real interface.

    The node protocol. Every slot, what it may hold, who writes it (W) and who reads it
    (R). "The recorder" is ``Recorder.record``/``_inputs`` and the ``_unary``/``_binary``
    wrappers of namespace.py; "the transforms" make identity nodes (``transforms/common``:
    ``variable``, ``leaf_variable``, ``barriers``); "passes" are the backward pass
    (``backward.Pass``), the tangent pass (``transforms/forward.Forward``) and the
    reference walker of the tests.

    ============  ==========================================================================
    slot          holds
    ============  ==========================================================================
    ``op``        the registry's ``Op``, or an op made per call (custom_vjp/jvp, chapter
                  "custom"; the transforms' ``IDENTITY``). W: at creation. R: passes (its
                  rules, metadata and name), anomaly mode, checkpoint, viz.
    ``seq``       int, creation order (``next_seq``): every node has a larger ``seq`` than
                  the nodes it reads. W: at creation. R: passes (order), checkpoint
                  (its call's nodes are those after a mark), transforms (``next_seq()``
                  marks where a function's recording starts).
    ``edges``     one entry per positional argument: None (it gets no gradient: not a
                  Tensor, no rule, or no grad required), ``(parent, index, shape, dtype)``
                  (output ``index`` of node ``parent``), or ``(None, leaf, shape, dtype)``
                  (``leaf``: the Tensor itself); so slot 1's meaning depends on slot 0.
                  ``shape``/``dtype``: the input's, what its gradient is fitted to.
                  W: at creation, never changed. R: passes, viz, checkpoint.
    ``args``      one entry per positional argument: the raw array a rule reads (saved);
                  ``Meta`` (shape, dtype, device) for a Tensor argument whose values no
                  rule of the wanted gradients reads; a lazy array of unknown size (dask,
                  after a boolean mask) instead of a Meta; other values as given (Python
                  scalars, None, tuples); None for an argument not saved by the binary
                  wrapper or an identity node (a pass stands a Meta of the edge in for it).
                  The whole slot is None once freed (after a pass without
                  ``retain_graph``) or dropped for recomputation (checkpoint).
                  W: the recorder; passes free it; checkpoint drops and refills it.
                  R: the rules (through passes), check_node, checkpoint.
    ``kwargs``    the keyword arguments (raw), a shared empty dict for element-wise ops;
                  after freeing, the pass's ``Freed`` marker (it names a rule that failed);
                  after checkpoint drops the values, its ``Recompute`` (``fill()`` puts
                  them back). W: the recorder, passes, checkpoint. R: rules, check_node.
    ``ans``       None; the output (a tuple for a MultiNode) when ``op.saves_ans``; the
                  forward's residuals when ``op.residuals``. Under ``create_graph`` passes
                  re-attach the output / recompute the residuals (``Pass.prepare``).
                  W: the recorder; passes and checkpoint as ``args``. R: rules, ``bump``
                  (a write into a saved output invalidates the node).
    ``versions``  ``((counter, version), ...)`` of each saved Tensor (see versions.py),
                  plus ``(versions._MODIFIED, 0)`` once its saved output is overwritten; () once
                  freed. W: the recorder, ``versions.bump``, passes, checkpoint.
                  R: check_node (a mismatch: modified in place after it was saved).
    ``outs``      MultiNode only: ``((shape, dtype), ...)`` per output (None on Node, a
                  class attribute). W: the recorder. R: passes (a tuple of cotangents,
                  zeros for outputs no gradient reached).
    ``where``     unset, or the user's line that called the op (``detect_anomaly``).
                  W: ``anomaly.check_forward``. R: the error messages of anomaly mode.
    ``hooks``     unset, or ``{output index: Hooks}`` once a tensor hook is registered on
                  an output. W: hooks.py. R: ``Pass.intercept``.
    ============  ==========================================================================

    A Tensor points to its node (``_node``, ``_index``); a node points only to its inputs'
    nodes (and to leaf Tensors through ``edges``): the graph is kept alive from its
    outputs, and dropped with them.
    """

    # ``hooks`` ({output index: Hooks}) is unset until a tensor hook is registered on an
    # output: nodes are made without __init__ on the hot paths (see namespace.py).
    __slots__ = ("op", "args", "kwargs", "ans", "edges", "versions", "seq", "where",
                 "hooks", "__weakref__")  # fmt: skip
    outs = None  # multi-output nodes (MultiNode): ((shape, dtype), ...) of the outputs

    def __init__(self, op, args, kwargs, ans, edges, versions):
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


class Zeros:
    """A cotangent ``g`` with the mask of its structural zeros: the positions where it
    is zero whatever the forward values (the branch ``where`` does not take, the region
    ``x[key] = v`` overwrote). With ``flip``, the zeros are where ``mask`` is False
    (``where``'s condition as it is, for its second branch: no negation computed).

    ``g`` has the positions of the node's output (before broadcasting is undone). The
    rules of ``where`` and ``__setitem__`` hand them to the backward pass, which
    keeps those positions exactly zero through the element-wise rules upstream, while
    the positions still match one to one: there ``g * f'(x)`` would be ``0 * inf = NaN``
    where the untaken branch computed ``sqrt(-1)`` or ``0 / 0``, and the true gradient
    is 0. The mask is dropped at the first op that is not element-wise, and where the
    gradients of both branches of one ``where`` meet again (no zeros in common).
    """

    __slots__ = ("g", "mask", "flip")

    def __init__(self, g, mask, flip=False):
        self.g, self.mask, self.flip = g, mask, flip


def edge(t):
    """The edge a new node keeps to tensor ``t``: None when ``t`` needs no gradient."""
    if not t._rg:
        return None
    n, d = t._node, t.data
    return (n, t._index if n is not None else t, d.shape, d.dtype)


def attach(t, node, index=0):
    """Make ``t`` output ``index`` of ``node`` (so it requires grad); returns ``t``."""
    t._node = node
    t._index = index
    t._rg = True
    return t


class Freed:
    """The pass that freed a node's saved values, and the op whose rule failed in it."""

    __slots__ = ("failure",)

    def __init__(self):
        self.failure = None


class Recompute:
    """Stands in a node's ``kwargs`` in place of its saved values, which were dropped to be
    recomputed (``autodiff.checkpoint``): ``fill()`` puts them back into this node and the
    others of its function's call, or raises, when the backward pass reaches it."""

    __slots__ = ()

    def fill(self):
        raise NotImplementedError


def check_node(node, what="backward"):
    """Raise if ``node``'s saved values can't be used by a pass (``what``: "backward" or
    "jvp"): freed by an earlier pass, or modified in place since they were saved. Values
    dropped to be recomputed (``Recompute``) are recomputed first."""
    if node.args is None:
        if isinstance(node.kwargs, Recompute):
            node.kwargs.fill()
            return check_node(node, what)  # checked as any node, its versions the new ones
        if what != "backward":
            raise RuntimeError(
                f"{what}: the saved values of '{node.op.name}' were freed by a backward pass "
                "run inside the function; pass retain_graph=True to that backward"
            )
        failure = getattr(node.kwargs, "failure", None)
        if failure is not None:
            # Keeping every saved value until a pass succeeds would raise the backward's
            # peak memory 1.1-1.8x (measured on MLPs and a CNN), so a pass frees as it
            # goes, as torch's does, and says so when it failed.
            raise RuntimeError(
                f"backward: the saved values of '{node.op.name}' were freed by an earlier "
                f"backward that failed later, in the VJP rule of '{failure}'; run the "
                "forward again, or pass retain_graph=True to keep the graph through a "
                "failing backward"
            )
        raise RuntimeError(
            f"backward: trying to backward through the graph a second time (op "
            f"'{node.op.name}'): its saved values were freed after the first backward; "
            "pass retain_graph=True to the first backward to keep them"
        )
    for counter, version in node.versions:
        if counter[0] != version:
            what_ = "backward: a tensor" if what == "backward" else f"{what}: a tensor"
            raise RuntimeError(
                f"{what_} saved by '{node.op.name}' was modified in place after it was "
                f"saved (version {counter[0]}, expected {version})"
                + (
                    "; compute the in-place change on a copy, or do it after backward"
                    if what == "backward"
                    else ""
                )
            )
