"""The backward pass: everything between a cotangent entering ``backward()`` and a
leaf's ``.grad``.

The backward pass is iterative (nodes in decreasing creation order), so graph
depth is bounded by memory, not by Python's recursion limit. It calls each
node's rule, fits the gradient to its input (broadcasting undone, dtype cast
back: once, here, for every op), sums fan-out, accumulates into leaves and
forms deferred weight gradients (:class:`~autodiff.engine.node.Outer`). Each node
frees what it saved as soon as its rule has run, unless ``retain_graph=True``.

What it needs of a namespace comes with the tensors, as their recorder (``t._rec``,
see namespace.py): the raw backend (``backend``), the recording namespace rules get
under ``create_graph`` (``xp``), ``wrap(array) -> Tensor`` and ``raw(value, what)``.
"""

from __future__ import annotations

from heapq import heappop, heappush

from .. import checks
from .anomaly import anomaly, check_backward, in_rule
from .errors import add_context
from .grad_mode import enable_grad
from .hooks import hooked_nodes, node_hooks, run_hooks
from .node import Freed, Meta, Outer, Zeros, attach, check_node

__all__ = ["backward", "gradients", "Pass", "cotangent", "to_internal"]


# -- the backward pass -------------------------------------------------------------------
def backward(t, grad=None, retain_graph=False, create_graph=False):
    """``t.backward(grad)``: accumulate d(t)/d(leaf) into ``leaf.grad`` for every leaf."""
    checks.flag("backward", "create_graph", create_graph)
    if retain_graph is None:  # torch's default: keep the graph a recorded pass needs
        retain_graph = create_graph
    checks.flag("backward", "retain_graph", retain_graph)
    if not t._rg:
        raise RuntimeError(
            "backward: the tensor does not require grad (no input of it requires "
            "grad, or it was computed under no_grad)"
        )
    rec = t._rec
    B = rec.backend
    if grad is None:
        if B.size_of(t.data) != 1:
            raise RuntimeError(
                f"backward: grad can be implied only for a scalar, this tensor has "
                f"shape {t.shape}; pass grad= of that shape"
            )
        if rec.is_complex(t.dtype):
            raise RuntimeError(
                "backward: grad can be implied only for a real scalar; this one is "
                f"complex ({t.dtype}): pass grad=, or take a real loss (abs, real)"
            )
        g = B.ones_like(t.data)
    else:
        g = to_internal(rec, cotangent(rec, grad, t.data, "backward"), B)
    run = Pass(rec, create_graph)
    run.handed[id(g)] = g  # the caller's array: never a leaf's grad as it is
    g = run.lift(g)
    if t._node is None:
        run.accumulate_leaf(t, g)
        run.commit()
    elif create_graph:  # as in torch, the recorded backward keeps the graph it uses
        with enable_grad():
            run.run([(t._node, t._index)], [g], retain_graph=True)
    else:
        run.run([(t._node, t._index)], [g], retain_graph=retain_graph)


def to_internal(rec, g, xp):
    """A cotangent between PyTorch's convention (users, leaves, transforms) and the
    rules' (JAX's: the transpose): the conjugate, for complex values; both ways."""
    return xp.conj(g) if rec.is_complex(g.dtype) else g


def cotangent(rec, g, like, what):
    """``g`` as a raw array of ``like``'s shape (a Tensor, an array or a scalar)."""
    B = rec.backend
    g = rec.raw(g, what)
    if not B.is_array(g):
        g = B.asarray(g, dtype=like.dtype, device=B.device_of(like))
    if g.shape != like.shape:
        raise ValueError(f"{what}: grad has shape {g.shape}, the tensor has {like.shape}")
    if rec.is_complex(g.dtype) and not rec.is_complex(like.dtype):
        raise TypeError(
            f"{what}: grad is complex ({g.dtype}) but the tensor is real ({like.dtype}); "
            "its imaginary part would be dropped: pass a real grad"
        )
    return g


# Steps of Pass.run inlined in its loop, and what a method call per node costs instead,
# measured on the backward of the chain benchmark (601 nodes; the median of 7 runs, each
# paired with the inlined loop): the next node 3.9%, pull() of a plain element-wise node
# 5.7%, freeing what the node saved 3.0%, send() of a chain's link (one input, fitted, the
# only pending node) about 4% of the whole benchmark (issue 28's A/B against the tree before
# the engine's split). send() of one fitted gradient to a buffered node, and intercept() of
# a transform's targets, cost 4% and 2.5% of ``ad.vjp`` in benchmarks/forward.py. The other
# steps are calls: each costs about 2.5% there, which is why the loop takes no more than
# one of them (send) per plain node.
def _keeps_zeros(node):
    """Whether ``node``'s rule keeps the structural zeros of its gradient zero: one that
    reads no array (g, -g, g * 0.9) does; one that isn't element-wise keeps the mask only
    where it hands back Zeros."""
    saved = node.args  # of an element-wise op: one or two arguments
    return not node.op.elementwise or (
        node.ans is None and _is_constant(saved[0]) and _is_constant(saved[-1])
    )


_WRAPPED = (Zeros, Outer)  # gradients that send() unwraps


class Pass:
    """One backward pass over raw arrays (``create=False``: rules get the backend) or
    recorded (``create=True``: rules get the recording namespace and Tensors).

    ``run`` is the walk of ``tests/reference_walker.py`` (the obvious backward: read it
    first) with the engine's fast paths. Its steps, in the order the loop takes them:
    the next node (inlined), ``intercept`` (hooks, targets; inlined without hooks),
    ``pull`` (the rule; inlined for plain element-wise nodes), freeing what the node saved
    (inlined), ``send`` (the gradients to the inputs; inlined for one fitted gradient);
    then ``finish`` (``flush``, ``commit``). The state of the walk, made by ``begin``:
    ``heap`` and ``buffers`` (the pending gradients of the nodes waiting their turn),
    ``masks`` (their structural zeros, see node.Zeros), ``short`` (their deferred
    broadcasts, see ``fit``), ``stop``, ``useful`` and ``captured`` (targets), ``freed``
    (what a freed node points to).
    """

    def __init__(self, rec, create: bool):
        self.rec = rec
        self.create = create
        self.xp = rec.xp if create else rec.backend
        # id -> array (kept alive so ids stay unique): arrays given to leaves as their
        # grad, and those of them this pass allocated (safe to add into in place).
        self.handed = {}
        self.mine = {}
        self.deferred = {}  # id(leaf) -> (leaf, [Outer, ...]): formed by flush()
        self.pending = {}  # id(leaf) -> [leaf, gradient]: handed over by commit()

    def lift(self, g):
        """A raw root gradient in this pass's form (a Tensor when recorded)."""
        return self.rec.wrap(g) if self.create else g

    # -- the walk ----------------------------------------------------------------------
    def run(self, roots, root_grads, retain_graph=False, targets=None):
        """Pull ``root_grads`` back from ``roots``, a list of ``(node, output index)``.

        Nodes run in decreasing creation order (``seq``): a node is always created after
        the nodes it reads, so every consumer of a node has run before it, and no
        dependency count is needed. Only nodes a gradient reaches are visited.

        Without ``targets`` the gradients of leaves accumulate into ``leaf.grad``.
        With ``targets`` (a list of nodes) nothing accumulates: the gradient reaching
        each target is returned, and the graph is not walked beyond them.

        Some steps are inlined in the loop (see the comment above the class for what a
        call per node would cost them).
        """
        self.begin(roots, root_grads, targets)
        heap, buffers, short, masks, freed = self.state()
        xp, intercepting, plain = self.xp, self.intercepting, not self.create and not self.watch
        hooking, stop, useful, captured = self.hooking, self.stop, self.useful, self.captured
        nxt = nxt_g = None  # a chain's next node and its gradient: kept off the heap (send)
        while True:
            # the next node: the chain's, else the pending one created last (inlined)
            if nxt is not None:
                node, g, nxt = nxt, nxt_g, None
            elif heap:
                node = heappop(heap)[1]
                g = buffers.pop(node)
            else:
                break
            if intercepting:
                if hooking:
                    g = self.intercept(node, g)
                    if g is None:
                        continue
                elif node in stop:  # intercept() of a transform's targets (inlined)
                    captured[node] = g
                    continue
                elif useful is not None and node not in useful:
                    continue
            if node.versions or node.args is None:
                check_node(node)
            op = node.op
            try:
                lone = None  # (edge, gradient) of a node with one input to send to
                if plain and op.elementwise:
                    # pull() of a plain element-wise node (inlined): its rules on raw
                    # arrays, no kwargs, and for one argument no broadcasting to undo
                    extra = None
                    if short or masks:  # extra_of(node) (inlined)
                        full = short.pop(node, None) if short else None
                        mask = masks.pop(node, None) if masks else None
                        if full is not None or mask is not None:
                            extra = full, mask, mask is not None and _keeps_zeros(node)
                    args, rules = node.args, op.vjp
                    if len(args) == 1:
                        grads = (rules[0](xp, g, node.ans, args[0]),)
                        fitted = op.keeps_dtype and (extra is None or extra[0] is None)
                        if fitted and extra is None:
                            lone = node.edges[0], grads[0]
                    else:
                        a, b = args
                        e1, e2 = node.edges
                        grads = (
                            None if e1 is None else rules[0](xp, g, node.ans, a, b),
                            None if e2 is None else rules[1](xp, g, node.ans, a, b),
                        )
                        fitted = False
                        if extra is None and (e1 is None or e2 is None):  # x * 2.0, if it fits
                            lone = (e2, grads[1]) if e1 is None else (e1, grads[0])
                            gi, e = lone[1], lone[0]
                            if gi.shape != e[2] or gi.dtype != e[3]:
                                lone = None
                else:
                    grads, extra = self.pull(node, g)
                    fitted = False
            except Exception as exc:
                add_context(exc, f"in the VJP rule of '{op.name}'")
                freed.failure = op.name  # see node.check_node
                raise
            if not retain_graph:
                # free what the node saved: its rule has run (inlined)
                node.args = node.ans = None
                node.kwargs = freed
                node.versions = ()
            args = a = b = None  # the saved values die here, not with the next node
            if lone is not None:
                # send() of a gradient, fitted and plain, to a one-output node (inlined):
                # a chain's next link when no other node is pending, else buffered
                parent, gi = lone[0][0], lone[1]
                if parent is not None and parent.outs is None and type(gi) not in _WRAPPED:
                    if not heap:  # then no buffer either: the chain runs on
                        nxt, nxt_g = parent, gi
                    elif parent in buffers:
                        buffers[parent] = buffers[parent] + gi
                        if masks:  # a gradient with no structural zeros joined it
                            masks.pop(parent, None)
                    else:
                        buffers[parent] = gi
                        heappush(heap, (-parent.seq, parent))
                    grads = lone = gi = g = None
                    continue
            nxt, nxt_g = self.send(node, grads, fitted, extra)
            # nor the gradients sent: an array nothing else holds is freed before the next
            # node's rule allocates
            grads = lone = gi = g = None
        return self.finish(targets)

    def begin(self, roots, root_grads, targets):
        """Set up the walk: the roots' gradients pending, and for ``targets`` the nodes
        where the walk stops and those from which a target can be reached."""
        self.heap = []
        self.buffers = {}
        for (node, index), g in zip(roots, root_grads):
            if node not in self.buffers:
                heappush(self.heap, (-node.seq, node))
            self._buffer(node, index, g)
        # node -> mask of the structural zeros of its pending gradient (see Zeros): only
        # while every gradient that reached it so far had one.
        self.masks = {}
        # node -> the output shape its pending gradient stands for, broadcast (see fit)
        self.short = {}
        self.freed = Freed()  # what a node freed by this pass points to (see check_node)
        self.watch = anomaly[0]  # detect_anomaly
        self.hooking = bool(hooked_nodes)  # tensor hooks: see intercept()
        self.targets = targets
        self.stop, self.useful, self.captured = (), None, {}
        if targets is not None:
            self.stop = set(targets)
            self.useful = _reaching(_reachable([n for n, _ in roots], self.stop), self.stop)
        self.intercepting = self.hooking or targets is not None

    def state(self):
        """The walk's containers, as the loop holds them (locals: one load each per pass)."""
        return self.heap, self.buffers, self.short, self.masks, self.freed

    def intercept(self, node, g):
        """The gradient ``node``'s rule gets, or None to not run it: the hooks of its
        outputs run on their complete gradients; a target's gradient is captured (the
        walk stops there); a node from which no target can be reached is passed over."""
        useful = self.useful
        if self.hooking and getattr(node, "hooks", None) is not None:
            if useful is None or node in useful:
                hooked = node_hooks(self, node, g)
                if hooked is not g:  # a hook's gradient: no structural zeros known
                    g = hooked
                    self.masks.pop(node, None)
        if node in self.stop:
            self.captured[node] = g
            return None
        if useful is not None and node not in useful:
            return None
        return g

    def pull(self, node, g):
        """Run ``node``'s rule on its gradient ``g``: (a gradient or None per argument, and
        for ``send``: the shape ``g`` stands for broadcast, its structural zeros and whether
        the rule keeps them zero; None when there is neither)."""
        op, xp = node.op, self.xp
        extra = self.extra_of(node) if self.short or self.masks else None
        raw, watch = not self.create, self.watch
        if watch and not raw:  # the rule's recorded ops: placed at this node's call
            where = getattr(node, "where", None) or "a place recorded before"
            in_rule.where = f"{where} (inside the VJP rule of '{op.name}')"
        try:
            if node.outs is not None:
                g = self.fill(node, g)
            if raw:  # the saved values as they are
                ans, args, kwargs = node.ans, node.args, node.kwargs
            else:
                ans, args, kwargs = self.prepare(node, g)
            grads = op.pull(xp, g, ans, args, kwargs, node.edges)
        finally:
            if watch:
                in_rule.where = None
        if watch:
            check_backward(self.rec.backend, node, grads, raw)
        return grads, extra

    def extra_of(self, node):
        """What ``send`` needs to know of ``node``'s gradient beyond its value, taken out of
        the walk's state: (the shape it stands for broadcast, its structural zeros, whether
        the node's rule keeps them zero), or None when there is neither."""
        full = self.short.pop(node, None) if self.short else None
        mask = self.masks.pop(node, None) if self.masks else None
        if full is None and mask is None:
            return None
        return full, mask, mask is not None and _keeps_zeros(node)

    def send(self, node, grads, fitted, extra):
        """Hand each of the rule's gradients to the input it belongs to: fitted to the
        input (``fit``; not needed where ``fitted``), then added to the pending gradient of
        the node that made it, or to a leaf's; a weight's factors (Outer) reaching a leaf
        are kept for ``flush``. ``extra``: see ``pull``."""
        full, mask, clean = (None, None, False) if extra is None else extra
        masks, buffers, heap = self.masks, self.buffers, self.heap
        nxt = nxt_g = None
        i = -1
        for e in node.edges:
            i += 1
            if e is None:
                continue
            gi = grads[i]
            if gi is None:
                continue
            parent, index, shape, dtype = e
            gm = None
            kind = type(gi)
            if kind is Outer:
                if parent is None and gi.shape == shape and gi.dtype == dtype:
                    if self.targets is None:  # a leaf: summed with its other steps at the end
                        self.defer(index, gi)
                    continue
                gi = gi.value(self.xp)
            elif mask is not None or kind is Zeros:
                gi, gm = _masked(self.xp, gi, mask, mask is not None and clean, shape, node.op)
            if not fitted and (gi.shape != shape or gi.dtype != dtype or full is not None):
                # An element-wise rule broadcasts a smaller gradient (a reduction's) for
                # free: it is broadcast only where a rule, a hook or a leaf needs the full
                # shape. ``short`` holds the output shape of the nodes whose pending
                # gradient is such a smaller one.
                defer = parent is not None and parent.op.elementwise
                if defer and self.hooking:
                    defer = getattr(parent, "hooks", None) is None
                gi = self.fit(gi, shape, dtype, defer, full)
                if defer and gi.shape != shape:
                    self.short[parent] = shape
            if parent is None:
                if self.targets is None:
                    self.accumulate_leaf(index, gi)
            elif parent is nxt:
                nxt_g = nxt_g + gi
                if masks:
                    _merge(masks, parent, gm)
            elif parent.outs is None:
                old = buffers.get(parent)
                if old is not None:
                    buffers[parent] = old + gi
                    if masks:
                        _merge(masks, parent, gm)
                    continue
                if gm is not None:
                    masks[parent] = gm
                if nxt is None and not heap:
                    # the only pending node: a chain runs without the heap or the buffers
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
                self._buffer(parent, index, gi)
        return nxt, nxt_g

    def finish(self, targets):
        """Form the deferred weight gradients, hand every leaf its gradient, and return
        the targets' (None without targets)."""
        self.flush()
        self.commit()
        if targets is not None:
            captured = self.captured
            return [captured.get(t) for t in targets]
        return None

    def _buffer(self, node, index, g):
        """Add ``g`` to the pending gradient of output ``index`` of ``node``."""
        buffers = self.buffers
        if node.outs is None:
            old = buffers.get(node)
            buffers[node] = g if old is None else old + g
            return
        slots = buffers.get(node)
        if slots is None:
            slots = buffers[node] = [None] * len(node.outs)
        slots[index] = g if slots[index] is None else slots[index] + g

    def fit(self, g, shape, dtype, defer=False, full=None):
        """Undo broadcasting (sum back to ``shape``) and cast to the input's dtype.

        A gradient that broadcasts to ``shape`` (a reduction's) is broadcast, unless
        ``defer``: it goes on as it is to an element-wise rule, which broadcasts it.
        ``full``: ``g`` stands for ``g`` broadcast to ``full`` (an element-wise rule's
        result from such a gradient); it is broadcast first if a sum needs it."""
        xp = self.xp
        if full is not None and not _same_shape(shape, full) and not _same_shape(g.shape, full):
            g = xp.broadcast_to(g, full)  # the input was broadcast: its sums need all terms
        if g.shape != shape:
            lead = g.ndim - len(shape)
            if lead > 0:
                g = xp.sum(g, axis=tuple(range(lead)))
            if g.ndim == len(shape):
                axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1)
                if axes:
                    g = xp.sum(g, axis=axes, keepdims=True)
            if g.shape != shape and not defer and not _unknown(g.shape, shape):
                g = xp.broadcast_to(g, shape)
        if g.dtype != dtype:
            if self.rec.is_complex(g.dtype) and not self.rec.is_complex(dtype):
                g = xp.real(g)  # a real input moves along the real axis only
            if g.dtype != dtype:
                g = xp.astype(g, dtype)
        return g

    def accumulate_leaf(self, leaf, g):
        """Add ``g`` to what this pass gives ``leaf``; ``commit`` hands it over at the
        end, so a pass that fails half-way leaves every ``.grad`` as it was."""
        rec = self.rec
        if rec.is_complex(g.dtype):  # PyTorch's convention: z -= lr * z.grad descends
            g = self.xp.conj(g)
        entry = self.pending.get(id(leaf))
        if entry is None:
            self.pending[id(leaf)] = [leaf, g]
            return
        if self.create:
            entry[1] = rec.xp.add(entry[1], g)
            return
        d = entry[1]
        if id(d) in self.mine and d.shape == g.shape and d.dtype == g.dtype:
            d += g  # a sum this pass made: accumulate without a new array
            entry[1] = d  # the same array, but where += makes a new one (dask)
        else:
            d = d + g
            if not rec.backend.is_array(d):  # 0-d numpy sums are scalars
                d = rec.backend.asarray(d)
            self.mine[id(d)] = d
            entry[1] = d

    def commit(self):
        """``leaf.grad += g`` for every leaf this pass reached, into a buffer that belongs
        to the leaf alone (one gradient array can reach two leaves: x + y)."""
        rec = self.rec
        pending, self.pending = self.pending, {}
        for entry in pending.values():
            hooks = getattr(entry[0], "_hooks", None)
            if hooks is not None:  # a leaf's hooks: on its total from this pass
                entry[1] = run_hooks(self, hooks, entry[1], False)
        # ``_grad``: the slot behind ``.grad`` (retained non-leaves are here too)
        for leaf, g in pending.values():
            old = leaf._grad
            if self.create:
                leaf._grad = g if old is None else rec.xp.add(old, g)
                continue
            B = rec.backend
            if old is None:
                if id(g) not in self.mine:  # a rule's result, or the caller's array
                    g = B.asarray(g, copy=True) if id(g) in self.handed else B.own(g)
                self.handed[id(g)] = g
                leaf._grad = rec.wrap(g)
                continue
            d = old.data + g
            if not B.is_array(d):
                d = B.asarray(d)
            leaf._grad = rec.wrap(d)

    def defer(self, leaf, g):
        """Keep a leaf's gradient given as factors (an Outer) for flush()."""
        entry = self.deferred.get(id(leaf))
        if entry is None:
            entry = self.deferred[id(leaf)] = (leaf, [])
        entry[1].append(g)

    def flush(self):
        """Accumulate the deferred gradients: one matmul per leaf over all its factors."""
        if self.deferred:
            # Leaves whose factors start alike (a weight and its bias) one after the
            # other, each list let go once used: a step's factors are freed as soon as
            # every product over them is formed.
            entries = sorted(self.deferred.values(), key=lambda e: id(e[1][0].a))
            self.deferred = {}
            stacked = {}
            while entries:
                leaf, outers = entries.pop()
                self.accumulate_leaf(leaf, Outer.total(self.xp, outers, stacked))

    def prepare(self, node, gs):
        """(ans, args, kwargs) for the node's rule when recorded: the saved arrays as
        Tensors linked into the graph, and the residuals recomputed from them."""
        rec = self.rec
        wrap = rec.wrap
        args = list(node.args)
        edges = node.edges
        for i, a in enumerate(args):
            e = edges[i]
            if a is None:  # not saved (nodes made outside the recorder)
                if e is not None:
                    g0 = gs if node.outs is None else next(x for x in gs if x is not None)
                    args[i] = Meta(e[2], e[3], rec.backend.device_of(g0.data))
            elif e is not None and not isinstance(a, Meta):
                args[i] = e[1] if e[0] is None else attach(wrap(a), e[0], e[1])
            elif rec.backend.is_array(a):
                args[i] = wrap(a)
        kwargs = {k: wrap(v) if rec.backend.is_array(v) else v for k, v in node.kwargs.items()}
        op = node.op
        if op.residuals is not None:
            # recomputed in the graph, so that higher derivatives flow through them
            return op.residuals(self.xp, *args, **kwargs), args, kwargs
        ans = node.ans
        if ans is not None:
            if node.outs is None:
                ans = attach(wrap(ans), node, 0)
            else:
                ans = tuple(attach(wrap(a), node, i) for i, a in enumerate(ans))
        return ans, args, kwargs

    def fill(self, node, gs):
        """Zeros for the outputs of a multi-output node that got no gradient."""
        xp = self.xp
        g0 = next(g for g in gs if g is not None)
        device = self.rec.backend.device_of(g0.data if self.create else g0)
        return tuple(
            xp.zeros(shape, dtype=dtype, device=device) if g is None else g
            for g, (shape, dtype) in zip(gs, node.outs)
        )


def _same_shape(a, b):
    """``a == b`` for shapes, a size unknown until computed (dask's NaN, which is no
    value equal to itself) matching an unknown size."""
    return len(a) == len(b) and all(m == n or (m != m and n != n) for m, n in zip(a, b))


def _unknown(have, shape):
    """Whether ``shape`` has sizes unknown until computed (dask's NaN after a boolean
    mask) where ``have`` is 1: such a gradient can't be broadcast by shape; the rules that
    read it (indexing's) broadcast it against their own arrays."""
    have = (1,) * (len(shape) - len(have)) + tuple(have)  # missing leading axes: size 1
    return any(s != s or s is None for s, h in zip(shape, have) if h == 1)


def gradients(t, g, targets, create_graph=False, retain_graph=False):
    """The gradients reaching the nodes ``targets`` from ``t`` with cotangent ``g`` (a raw
    array, or a Tensor of a recorded pass), each None where none arrives; no leaf's
    ``.grad`` changes. What the transforms read. ``t`` and ``g`` may be lists (several
    outputs pulled back in one pass)."""
    ts, gs = (t, g) if isinstance(t, list) else ([t], [g])
    roots = [(u._node, u._index) for u in ts if u._node is not None]
    if not roots:
        return [None] * len(targets)
    rec = ts[0]._rec
    run = Pass(rec, create_graph)
    lifted = []
    for u, gu in zip(ts, gs):
        if u._node is not None:
            if type(gu) is not rec.cls:
                gu = run.lift(gu)
            lifted.append(to_internal(rec, gu, run.xp))
    grads = run.run(roots, lifted, retain_graph=retain_graph, targets=targets)
    return [None if r is None else to_internal(rec, r, run.xp) for r in grads]


def _zeroed(xp, mask, g):
    """``g`` with the structural zeros ``mask = (array, flip)`` set to exactly 0."""
    m, flip = mask
    return xp.where(m, g, 0.0) if flip else xp.where(m, 0.0, g)


def _common(a, b):
    """The structural zeros two gradients have in common (None: none known)."""
    if a is None or b is None:
        return None
    (ma, fa), (mb, fb) = a, b
    if ma is mb:
        return a if fa == fb else None  # the two branches of one where: disjoint
    return ((~ma if fa else ma) & (~mb if fb else mb), False)


def _masked(xp, g, mask, clean, shape, op):
    """(gradient, its structural zeros) for an input of ``shape``: the incoming ``mask``
    kept exactly zero (unless the rule read no values) where positions still match (an
    element-wise op, or a rule that hands back Zeros: the nested where), and joined
    with the rule's own Zeros."""
    own = None
    if type(g) is Zeros:
        g, own = g.g, (g.mask, g.flip)
    elif not op.elementwise:
        mask = None  # positions no longer match one to one
    if mask is not None and not clean and g.shape == mask[0].shape:
        g = _zeroed(xp, mask, g)  # 0, not 0 * f'(x) = 0 * inf
    gm = _union(mask, own)
    if gm is not None and gm[0].shape != shape:  # a broadcast input: summed
        gm = None
    return g, gm


def _union(a, b):
    """The structural zeros of either (a gradient zero where either says)."""
    if a is None or b is None:
        return a if b is None else b
    (ma, fa), (mb, fb) = a, b
    return ((~ma if fa else ma) | (~mb if fb else mb), False)


def _is_constant(a):
    """A saved argument that is not an array: a finite Python scalar, or None (not saved)."""
    return a is None or (isinstance(a, (int, float)) and a - a == 0)


def _merge(masks, node, mask):
    """Another gradient reached ``node``: its structural zeros are those of both."""
    old = masks.get(node)
    if old is not None:
        both = _common(old, mask)
        if both is None:
            del masks[node]
        else:
            masks[node] = both


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
