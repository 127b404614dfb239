"""The reference backward walker: the engine's backward pass in a page. Read it first.

``walk(y, leaves)`` is the obvious reverse mode, written for reading, not speed. The
engine's ``Pass.run`` (autodiff/engine/backward.py) computes the same thing with fast
paths, and tests/test_reference_walker.py checks the two agree on fuzzed programs, first
and second order. The walk:

1. collect the nodes reachable from ``y``'s node and count, for each, the edges that
   point to it (its consumers' sends);
2. start from ``y``'s cotangent; take a node once every consumer has sent to it
   (Kahn's algorithm: a list, no recursion, so a chain of any length is walked);
3. run its VJP rule through ``Op.pull`` (the one home of rule dispatch), fit each
   gradient to its input (the engine's ``Pass.fit``: broadcasting summed back, dtype
   cast back; the one piece shared with the pass) and add it to what is pending for
   that input, or to the leaf's total.

The node protocol fields it reads (the full table is in autodiff/engine/node.py):

- ``op``: the registry's Op; ``op.pull(xp, g, ans, args, kwargs, wanted)`` runs its rules;
- ``edges``: one per positional argument: None (no gradient), ``(parent, index, shape,
  dtype)`` for output ``index`` of node ``parent``, or ``(None, leaf, shape, dtype)`` for
  a leaf Tensor; ``shape``/``dtype`` are what the gradient is fitted to;
- ``args``/``kwargs``/``ans``: the saved values the rules read (``ans``: the output, or
  the forward's residuals); ``check_node`` refuses freed or overwritten ones and refills
  those a checkpoint dropped (``Recompute``);
- ``outs``: set on a MultiNode only, ``(shape, dtype)`` per output: its rule gets one
  cotangent per output, zeros for those no gradient reached.

Conventions: rules are transposes (JAX's); a complex cotangent is conjugated on the way
in and a leaf's complex gradient on the way out (PyTorch's). A rule may hand back
``Zeros`` (a gradient with its structural zeros: the walker keeps the gradient and drops
the mask, which guards ``0 * inf`` upstream of an untaken ``where`` branch: NaN here, 0
in the engine, where that branch is infinite; the fuzzer's are finite) or ``Outer`` (a
weight's gradient as factors: formed at once). ``create_graph=True`` runs the rules on
the recording namespace, under grad mode, on the saved values as Tensors linked into the
graph (``_recorded``): the gradients come back with history, and a second walk over
them gives second derivatives. Not here: tensor hooks and ``retain_grad`` (fuzzed
programs register none), the transforms' ``targets`` (the tests compare ``ad.grad``'s
results instead), anomaly mode, the engine's fast paths (chains off the heap, deferred
broadcasts, structural-zero masks, leaf gradients summed as one matmul) and freeing.
In-place writes, views, custom_vjp and checkpoint need nothing special: they record
ordinary nodes (copy-on-write) or refill them (``check_node``).
"""

from __future__ import annotations

from autodiff.engine.backward import Pass
from autodiff.engine.grad_mode import enable_grad
from autodiff.engine.node import Meta, Outer, Zeros, attach, check_node

__all__ = ["walk"]


def walk(y, leaves, grad=None, create_graph=False):
    """d(y)/d(leaf) for each of ``leaves`` with cotangent ``grad`` (default: 1, for a real
    scalar ``y``), in PyTorch's convention as ``leaf.grad``: a raw array each (a Tensor
    with history under ``create_graph``), None where no gradient arrives."""
    rec = y._rec
    B = rec.backend
    xp = rec.xp if create_graph else B
    g = B.ones_like(y.data) if grad is None else B.asarray(rec.raw(grad, "walk"))
    if rec.is_complex(g.dtype):
        g = B.conj(g)  # the rules' convention
    if create_graph:
        g = rec.wrap(g)
    fit = Pass(rec, create_graph).fit
    pending = {}  # node -> [its gradient so far, or None, per output]
    totals = {}  # id(leaf) -> its gradient so far

    def send(parent, index, gi):
        """Add ``gi`` to what output ``index`` of ``parent`` (or the leaf ``index``) has."""
        if parent is None:
            old = totals.get(id(index))
            totals[id(index)] = gi if old is None else old + gi
        else:
            slots = pending.setdefault(
                parent, [None] * (1 if parent.outs is None else len(parent.outs))
            )
            slots[index] = gi if slots[index] is None else slots[index] + gi

    if y._node is None:
        send(None, y, g)
        nodes = []
    else:
        send(y._node, y._index, g)
        nodes = _reachable(y._node)
    consumers = dict.fromkeys(nodes, 0)
    for node in nodes:
        for e in node.edges:
            if e is not None and e[0] is not None:
                consumers[e[0]] += 1
    ready = [y._node] if nodes else []  # the root: nothing reachable consumes it
    with enable_grad():  # records only under create_graph: raw arrays otherwise
        while ready:
            node = ready.pop()
            gs = pending.pop(node, None)
            grads = _pull(rec, xp, node, gs, create_graph) if gs else [None] * len(node.edges)
            for e, gi in zip(node.edges, grads):
                if e is None:
                    continue
                parent, index, shape, dtype = e
                if gi is not None:
                    if type(gi) is Zeros:
                        gi = gi.g
                    elif type(gi) is Outer:
                        gi = gi.value(xp)
                    send(parent, index, fit(gi, shape, dtype))
                if parent is not None:
                    consumers[parent] -= 1
                    if consumers[parent] == 0:
                        ready.append(parent)
        out = []
        for leaf in leaves:
            gl = totals.get(id(leaf))
            if gl is not None and rec.is_complex(gl.dtype):
                gl = xp.conj(gl)  # PyTorch's convention
            out.append(gl)
    return out


def _reachable(root):
    """Every node reachable from ``root`` through edges, without recursion."""
    seen, stack = {root: None}, [root]
    while stack:
        for e in stack.pop().edges:
            if e is not None and e[0] is not None and e[0] not in seen:
                seen[e[0]] = None
                stack.append(e[0])
    return list(seen)


def _pull(rec, xp, node, gs, create):
    """The node's rule on its pending gradients ``gs``: a gradient (or None) per argument."""
    check_node(node)  # freed, modified in place since saved, or dropped for a checkpoint
    first = next(g for g in gs if g is not None)
    device = rec.backend.device_of(first.data if create else first)
    if node.outs is None:
        g = gs[0]
    else:  # a MultiNode: one cotangent per output, zeros where none arrived
        g = tuple(
            xp.zeros(shape, dtype=dtype, device=device) if gi is None else gi
            for gi, (shape, dtype) in zip(gs, node.outs)
        )
    if create:
        ans, args, kwargs = _recorded(rec, node, device)
    else:
        ans, args, kwargs = node.ans, node.args, node.kwargs
    return node.op.pull(xp, g, ans, args, kwargs, node.edges)


def _recorded(rec, node, device):
    """(ans, args, kwargs) as Tensors in the graph, so what a rule computes from them is
    recorded: a saved input is output ``index`` of its ``parent`` (or the leaf itself), the
    saved output is this node's; residuals are recomputed from the args on the recording
    namespace; an input not saved becomes a Meta of its edge."""
    wrap, is_array = rec.wrap, rec.backend.is_array
    args = []
    for a, e in zip(node.args, node.edges):
        if e is not None and a is None:
            a = Meta(e[2], e[3], device)
        elif e is not None and not isinstance(a, Meta):
            a = e[1] if e[0] is None else attach(wrap(a), e[0], e[1])
        elif is_array(a):
            a = wrap(a)  # a constant
        args.append(a)
    kwargs = {k: wrap(v) if is_array(v) else v for k, v in node.kwargs.items()}
    if node.op.residuals is not None:
        return node.op.residuals(rec.xp, *args, **kwargs), args, kwargs
    ans = node.ans
    if ans is not None:
        if node.outs is None:
            ans = attach(wrap(ans), node, 0)
        else:
            ans = tuple(attach(wrap(a), node, i) for i, a in enumerate(ans))
    return ans, args, kwargs
