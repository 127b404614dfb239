"""Forward mode: tangents pushed through a recorded computation, one pass, no reverse pass.

``jvp(f, primals, tangents)`` records ``f`` once, as reverse mode does (so every node
holds the values its rules read), then visits the recorded nodes in creation order
(``seq`` ascending: a node is always made after the nodes it reads) and applies each
node's JVP rule to the tangents of its inputs. Where a rule comes from is the
registry's business (``Op.jvp_kind``: written, linear, bilinear, derived from the VJP
rules of an element-wise op, or the fallback); this module runs them:

- a plain pass (no primal or tangent requires grad, nothing recorded before ``f``
  reaches it) gives rules the raw backend and raw arrays, as a plain backward pass;
- a recorded pass (``grad`` of a ``jvp``, ``jacfwd`` of ``jacfwd``) gives them the
  recording namespace and Tensors linked into the graph (``backward.Pass.prepare``), so
  the tangents are themselves differentiable;
- an op without a JVP rule falls back, at that node alone, to the double-VJP trick: its
  VJP rule is recorded on a zero cotangent variable ``g`` (it is linear in ``g``:
  ``L^T g``) and ``s = <L^T g, t>`` is differentiated with respect to ``g``, giving
  ``L t``.

Complex values: VJP rules are transposes under the bilinear pairing
``<a, b> = Re sum(a b)`` (see registry.py), so the fallback pairs without conjugates and
conjugates the gradient the engine hands back (PyTorch's convention) once. ``jvp``
returns ``J v`` for complex values too (holomorphic or not).

Also here: ``jacfwd`` (one forward pass per input element, over one recording; inside
vmap, ``vmap`` of ``jvp``), ``hvp`` and ``hessian`` (forward over reverse: this module
imports reverse mode, never the other way).
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator

from .. import checks, pytree
from ..engine import backward, grad_mode
from ..engine.batching import Batched, active, depth
from ..engine.errors import add_context, add_op_name
from ..engine.grad_mode import mode
from ..engine.node import Meta, Outer, Zeros, check_node, next_seq
from ..engine.registry import DIFF
from ..engine.tensor import Tensor
from .common import (
    IDENTITY,
    SCALARS,
    barriers,
    calling,
    data,
    in_kind,
    leaf_variable,
    namespace_of,
    on_trees,
    pair,
    plain,
    requires_grad,
    variable,
)
from .reverse import grad, jacobian
from .vmap import batched_variable, levels_of, merge, vmap

__all__ = ["jvp", "jacfwd", "hvp", "hessian", "Forward"]

_SEQ = operator.attrgetter("seq")

# The kinds of JVP the engine runs (resolved once per op, see _kind).
_DERIVED1, _DERIVED2, _DERIVED, _LINEAR, _BILINEAR, _WRITTEN, _PASS, _FALLBACK = range(8)


def _recorded_function(rec, op):
    """``op`` called with its recorded argument layout on Tensors: recorded when one of
    them requires grad (what a linear op's JVP runs in a recorded pass)."""
    raw = op.function(rec.backend)

    def call(*args, **kwargs):
        raws = [a.data if isinstance(a, Tensor) else a for a in args]
        kw = {k: v.data if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        try:
            out = raw(*raws, **kw)
        except Exception as exc:
            add_op_name(exc, op.name)
            raise
        if mode.enabled and any(isinstance(a, Tensor) and a._rg for a in args):
            return rec.record(op, out, args, raws, kw)
        return rec.wrap_out(out)

    return call


# op -> (its jvp and vjp fields when resolved, kind, rules): checked against the fields on
# each use, so a rule attached (or replaced) after the first pass is seen.
_KINDS: dict = {}


def _kind(op):
    """(kind, rules) of ``op``'s JVP for the engine (see registry.Op.jvp_kind)."""
    if op is IDENTITY:
        return _PASS, None  # the variables of the transforms: the tangent passes through
    kind = op.jvp_kind
    if kind == "written":
        return _WRITTEN, op.jvp
    if kind == "linear":
        if isinstance(op.linear, tuple):
            return _LINEAR, op.linear
        return _LINEAR, None  # positions decided per call: those with a rule
    if kind == "bilinear":
        return _BILINEAR, None
    if kind == "derived":
        if op.elementwise:
            return (_DERIVED1 if len(op.vjp) == 1 else _DERIVED2), op.vjp
        return _DERIVED, op.vjp
    if kind is None and op.kind != DIFF:
        raise RuntimeError(f"jvp: '{op.name}' was recorded but carries no gradient")
    return _FALLBACK, None


def _wrap_tree(rec, v):
    """Saved values (residuals) as Tensors without history: arrays wrapped, Tensors kept."""
    if isinstance(v, Tensor) or v is None:
        return v
    if rec.backend.is_array(v):
        return rec.wrap(v)
    if isinstance(v, (tuple, list)):
        items = [_wrap_tree(rec, a) for a in v]
        return type(v)(*items) if hasattr(v, "_fields") else type(v)(items)
    if isinstance(v, dict):
        return {k: _wrap_tree(rec, a) for k, a in v.items()}
    return v


class Forward:
    """A recorded computation ready for tangents: the nodes between ``start`` (the first
    seq of the recording) and ``outputs``, in creation order.

    ``outer`` says whether the recording reaches tensors recorded before it (or leaves
    that require grad): then a pass must be recorded for the result to carry their
    gradient."""

    def __init__(self, rec, outputs, start, seeds=()):
        self.rec = rec
        self.outputs = outputs
        shapes = {}  # node -> (shape, dtype) of its output (single-output nodes)
        seen = set(seeds)
        stack = []
        for o in outputs:
            n = o._node
            if o._rg and n is not None:
                if n.outs is None:
                    shapes[n] = (o.data.shape, o.data.dtype)
                if n not in seen and n.seq >= start:
                    seen.add(n)
                    stack.append(n)
        outer = any(o._rg and (o._node is None or o._node.seq < start) for o in outputs)
        nodes = []
        while stack:
            node = stack.pop()
            nodes.append(node)
            for e in node.edges:
                if e is None:
                    continue
                p = e[0]
                if p is None or p.seq < start:
                    outer = True
                    continue
                if p.outs is None and p not in shapes:
                    shapes[p] = (e[2], e[3])
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        for s in seeds:  # a variable standing for a primal that requires grad
            if s.edges[0] is not None:
                outer = True
        nodes.sort(key=_SEQ)
        self.nodes = nodes
        self.shapes = shapes
        self.outer = outer
        self._calls = {}

    # -- one pass ----------------------------------------------------------------------
    def push(self, seeds, record=False):
        """The tangent of every node a seed reaches: ``seeds`` maps nodes to tangents (raw
        arrays, or Tensors when ``record``); a dict node -> tangent (a tuple for a
        multi-output node; None entries are zeros)."""
        rec = self.rec
        B = rec.backend
        xp = rec.xp if record else B
        run = backward.Pass(rec, True) if record else None
        tan = dict(seeds)
        get = tan.get
        kinds = _KINDS
        fit = self._fit
        with grad_mode.enable_grad() if record else contextlib.nullcontext():
            for node in self.nodes:
                edges = node.edges
                ts = None
                i = -1
                for e in edges:
                    i += 1
                    if e is None:
                        continue
                    p = e[0]
                    if p is None:
                        continue
                    t = get(p)
                    if t is None:
                        continue
                    if p.outs is not None:
                        t = t[e[1]]
                        if t is None:
                            continue
                    if t.shape != e[2] or t.dtype != e[3]:
                        t = fit(xp, t, e[2], e[3])
                    if ts is None:
                        ts = [None] * len(edges)
                    ts[i] = t
                if ts is None:
                    continue
                op = node.op
                kr = kinds.get(op)
                if kr is None or kr[0] is not op.jvp or kr[1] is not op.vjp:
                    kr = (op.jvp, op.vjp) + _kind(op)
                    if op.chapter != "custom":  # made per call: not kept beyond this pass
                        kinds[op] = kr
                _, _, kind, rules = kr
                if kind is _PASS:
                    tan[node] = ts[0]
                    continue
                if node.versions or node.args is None:
                    check_node(node, "jvp")
                try:
                    if not record and kind is _DERIVED1:
                        # hot path: an element-wise op of one argument on raw arrays
                        tan[node] = rules[0](B, ts[0], node.ans, node.args[0])
                        continue
                    if not record and kind is _DERIVED2:
                        a, b = node.args
                        t1, t2 = ts
                        r = None if t1 is None else rules[0](B, t1, node.ans, a, b)
                        if t2 is not None:
                            r2 = rules[1](B, t2, node.ans, a, b)
                            r = r2 if r is None else r + r2
                        tan[node] = r
                        continue
                    if record:
                        first = next(t for t in ts if t is not None)
                        ans, args, kwargs = run.prepare(
                            node, first if node.outs is None else [first]
                        )
                    else:
                        ans, args, kwargs = node.ans, node.args, node.kwargs
                    tan[node] = self._apply(node, op, kind, rules, xp, ts, ans, args, kwargs,
                                            record)  # fmt: skip
                except Exception as exc:
                    add_context(exc, f"in the JVP of '{op.name}'")
                    raise
        return tan

    def _apply(self, node, op, kind, rules, xp, ts, ans, args, kwargs, record):
        if kind is _WRITTEN:
            r = rules(xp, tuple(ts), ans, *args, **kwargs)
            if r is not NotImplemented:
                return tuple(r) if isinstance(r, list) else r
            kind = _FALLBACK
        if kind is _DERIVED1 or kind is _DERIVED2 or kind is _DERIVED:
            r = None
            for i, t in enumerate(ts):
                if t is None or i >= len(rules) or rules[i] is None:
                    continue
                c = rules[i](xp, t, ans, *args, **kwargs)
                r = c if r is None else r + c
            return r
        if kind is _LINEAR:
            return self._linear(op, rules, xp, ts, args, kwargs, record)
        if kind is _BILINEAR:
            call = self._call(op, record)
            a0, a1 = args[0], args[1]
            t0, t1 = ts[0], ts[1]
            r = None if t0 is None else call(t0, a1, *args[2:], **kwargs)
            if t1 is not None:
                c = call(a0, t1, *args[2:], **kwargs)
                r = c if r is None else r + c
            return r
        return self._fallback(node, op, ts, ans, args, kwargs, record)

    def _call(self, op, record):
        key = (op, record)
        call = self._calls.get(key)
        if call is None:
            rec = self.rec
            call = _recorded_function(rec, op) if record else op.function(rec.backend)
            self._calls[key] = call
        return call

    def _linear(self, op, positions, xp, ts, args, kwargs, record):
        """The op applied to the tangents: zeros for the other arguments it is linear in."""
        if positions is None:
            rules = op.vjp
            positions = range(len(args)) if op.joint else [
                i for i, r in enumerate(rules) if r is not None
            ]  # fmt: skip
        new = list(args)
        B = self.rec.backend
        for i in positions:
            if i >= len(new):
                continue
            t = ts[i]
            if t is not None:
                new[i] = t
                continue
            a = new[i]
            if a is None:
                continue
            if isinstance(a, SCALARS):
                new[i] = type(a)(0)
                continue
            device = a.device if isinstance(a, Meta) else B.device_of(data(a))
            new[i] = B.zeros(tuple(a.shape), dtype=a.dtype, device=device)
        return self._call(op, record)(*new, **kwargs)

    def _fit(self, xp, t, shape, dtype):
        """A tangent fitted to the input it flows into: broadcast to its shape (a rule
        may give an argument's tangent unbroadcast: ``add``), cast to its dtype (a real
        input keeps the real part, as the backward pass fits gradients)."""
        rec = self.rec
        if t.shape != shape:
            t = xp.broadcast_to(t, shape)
        if t.dtype != dtype:
            if rec.is_complex(t.dtype) and not rec.is_complex(dtype):
                t = xp.real(t)
            if t.dtype != dtype:
                t = xp.astype(t, dtype)
        return t

    def _fallback(self, node, op, ts, ans, args, kwargs, record):
        """The double-VJP trick on one node: the VJP rule recorded on a zero cotangent
        ``g`` is ``L^T g``; the gradient of ``<L^T g, t>`` with respect to ``g`` is ``L t``."""
        rec = self.rec
        B = rec.backend
        xp = rec.xp
        wrap = rec.wrap
        first = next(t for t in ts if t is not None)
        device = B.device_of(data(first))
        stops = []
        if record:
            # the graph before this node is not walked: targets stop the pass there
            args = barriers(rec, list(args), stops)
            kwargs = barriers(rec, dict(kwargs), stops)
            ans = barriers(rec, ans, stops)
            ts = barriers(rec, list(ts), stops)
        else:
            edges = node.edges
            args = [
                Meta(edges[i][2], edges[i][3], device) if a is None and edges[i] is not None
                else wrap(a) if B.is_array(a) else a
                for i, a in enumerate(args)
            ]  # fmt: skip
            kwargs = {k: wrap(v) if B.is_array(v) else v for k, v in kwargs.items()}
            ans = _wrap_tree(rec, ans)
            ts = [None if t is None else wrap(t) for t in ts]
        outs = node.outs if node.outs is not None else (self.shapes[node],)
        gs, gnodes = [], []
        for shape, dtype in outs:
            g, gnode = leaf_variable(rec, B.zeros(shape, dtype=dtype, device=device))
            gs.append(g)
            gnodes.append(gnode)
        g = gs[0] if node.outs is None else tuple(gs)
        with grad_mode.enable_grad():
            grads = op.pull(xp, g, ans, args, kwargs, ts)  # ts[i] None: no tangent
            s = None
            for gi, t in zip(grads, ts):
                if gi is None or t is None:
                    continue
                if isinstance(gi, Outer):
                    gi = gi.value(xp)
                elif isinstance(gi, Zeros):
                    gi = gi.g
                term = pair(xp, rec, gi, t)
                s = term if s is None else s + term
            if s is None or not isinstance(s, Tensor) or not s._rg:
                return None
            found = backward.gradients(s, B.ones_like(s.data), gnodes + stops,
                                    create_graph=record, retain_graph=record)  # fmt: skip
        out = []
        for r in found[: len(gnodes)]:
            if r is None:
                out.append(None)
                continue
            r = backward.to_internal(rec, r, xp if record else B)  # back to the rules' convention
            out.append(r if record else data(r))
        return out[0] if node.outs is None else tuple(out)

    # -- results -----------------------------------------------------------------------
    def tangent(self, o, tan, record):
        """The tangent of output tensor ``o`` (zeros where no seed reaches it), as a Tensor."""
        rec = self.rec
        B = rec.backend
        xp = rec.xp if record else B
        t = None
        n = o._node
        if o._rg and n is not None:
            t = tan.get(n)
            if t is not None and n.outs is not None:
                t = t[o._index]
        if t is None:
            t = B.zeros(o.shape, dtype=o.dtype, device=B.device_of(o.data))
            return rec.wrap(t)
        if t.shape != o.shape or t.dtype != o.dtype:
            with grad_mode.enable_grad() if record else grad_mode.no_grad():
                t = self._fit(xp, t, o.shape, o.dtype)
        if isinstance(t, Tensor):
            return t
        return rec.wrap_out(t)


# -- the transforms ----------------------------------------------------------------------


def _seed(rec, t, primal, i, record):
    """Tangent ``t`` of ``primal`` as the pass carries it: raw, or a Tensor when recorded;
    in the primal's dtype (a real primal takes no complex tangent)."""
    B = rec.backend
    if isinstance(t, Tensor):
        if type(t) is not rec.cls:
            raise rec._mix_error("jvp", t)
    elif not B.is_array(t):
        t = B.asarray(t, dtype=primal.dtype, device=B.device_of(primal.data))
    dtype = t.dtype
    if dtype != primal.dtype:
        if rec.is_complex(dtype) and not rec.is_complex(primal.dtype):
            raise TypeError(
                f"jvp: tangents[{i}] is complex ({dtype}) but its primal is real "
                f"({primal.dtype}): a real input moves along the real axis only"
            )
        with grad_mode.enable_grad() if record else contextlib.nullcontext():
            t = (rec.xp if isinstance(t, Tensor) else B).astype(t, primal.dtype)
    if record:
        return t if isinstance(t, Tensor) else rec.wrap(t)
    return t.data if isinstance(t, Tensor) else t


def _flat_pairs(primals, tangents):
    """The leaves of ``primals`` and ``tangents`` (tuples of pytrees of the same
    structure, leaf shapes alike) and the primals' structure."""
    for what, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, (tuple, list)):
            raise TypeError(f"jvp: {what} must be a tuple or list, got {type(v).__name__}")
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError("jvp: primals and tangents must have the same length")
    p_leaves, p_td = pytree.flatten(primals)
    t_leaves, t_td = pytree.flatten(tangents)
    if p_td != t_td:
        raise ValueError(
            f"jvp: tangents have the structure {pytree.describe(t_td)}, primals "
            f"{pytree.describe(p_td)}"
        )
    if not p_leaves:
        raise ValueError("jvp: primals hold no array: nothing to differentiate")
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        ps, ts = tuple(getattr(p, "shape", ())), tuple(getattr(t, "shape", ()))
        if ps != ts:  # a Python number has shape ()
            raise ValueError(f"jvp: tangents[{i}] has shape {ts}, its primal {ps}")
    return p_leaves, t_leaves, p_td


def _jvp(f, primals, tangents):
    """``(f(*primals), J @ tangents)`` by one forward pass carrying tangents (JAX's
    ``jax.jvp``): ``f`` is recorded once, then each recorded op's JVP rule maps the
    tangents of its inputs to that of its output; no reverse pass.

    ``primals`` and ``tangents`` are tuples of pytrees of the same structure (arrays,
    Tensors or Python numbers in dicts, lists, tuples); the tangent returned has the
    structure of ``f``'s output. Complex values: ``J v`` whether ``f`` is holomorphic or
    not. Primals or tangents that require grad (``grad`` of a ``jvp``), or tensors
    recorded before that ``f`` reads, make the pass recorded, so the result
    differentiates again."""
    p_leaves, t_leaves, p_td = _flat_pairs(primals, tangents)
    rec = namespace_of(p_leaves + t_leaves, "jvp")
    levels = ()
    if depth[0] and active():
        # inside vmap: primals and tangents batched over every running vmap (as
        # transforms._Inputs does), so the full-batch graph keeps examples apart
        def wrap(x):
            if isinstance(x, SCALARS) and not isinstance(x, bool):
                x = rec.backend.asarray(x)
            return x if isinstance(x, Tensor) else rec.wrap(x)

        pairs = [batched_variable(a, wrap) for a in p_leaves]
        levels = pairs[0][1] if pairs else ()
        p_leaves = [x for x, _ in pairs]
        t_leaves = [batched_variable(a, wrap)[0] for a in t_leaves]
    nested = mode.enabled and any(map(requires_grad, p_leaves + t_leaves))
    start = next_seq()
    variables, nodes = [], []
    for p in p_leaves:
        if isinstance(p, SCALARS) and not isinstance(p, bool):
            p = rec.backend.asarray(p)  # a Python number: a 0-d array of the namespace
        v, node = variable(p, "jvp")
        variables.append(v)
        nodes.append(node)
    given = [Batched(v, levels) for v in variables] if levels else variables
    with calling():  # an inner grad closing over a primal records its backward pass
        result = f(*pytree.unflatten(p_td, given))
    leaves, out_td = pytree.flatten(result)
    if levels:
        out_levels = [levels_of(o) for o in leaves]
        leaves = [plain(o) for o in leaves]
    outs = []
    for o in leaves:
        if isinstance(o, Tensor):
            outs.append(o)
        elif rec.backend.is_array(o):
            outs.append(rec.wrap(o))  # a constant: zero tangent
        elif isinstance(o, SCALARS) and not isinstance(o, bool):
            outs.append(rec.wrap(rec.backend.asarray(o)))
        else:
            raise TypeError(
                f"jvp: the function must return Tensors (in dicts, lists, tuples, "
                f"dataclasses, registered nodes), got "
                f"{type(o).__name__}"
            )
    fwd = Forward(rec, outs, start, nodes)
    record = mode.enabled and (fwd.outer or nested)
    seeds = {n: _seed(rec, t, v, i, record) for i, (n, t, v) in
             enumerate(zip(nodes, t_leaves, variables))}  # fmt: skip
    tan = fwd.push(seeds, record)
    tangent_outs = [fwd.tangent(o, tan, record) for o in outs]
    values = [o if record else o.detach() for o in outs]
    if levels:  # back to one example per level
        values = [merge(v, lv) for v, lv in zip(values, out_levels)]
        tangent_outs = [merge(t, lv) for t, lv in zip(tangent_outs, out_levels)]
    return pytree.unflatten(out_td, values), pytree.unflatten(out_td, tangent_outs)


def _refuse_complex(rec, i, p):
    if rec.is_complex(p.dtype):
        raise TypeError(
            f"jacfwd: argument {i} is complex ({p.dtype}); the Jacobian of a function "
            "of complex inputs that need not be holomorphic is no complex matrix: "
            "use jvp, or differentiate with respect to the real and imaginary parts"
        )


def _jacfwd_looped(f):
    """The Jacobian by forward mode of ``f`` (arrays -> a tuple of arrays) outside vmap,
    [output][argument] -> ``out.shape + x.shape``. ``f`` is recorded once, then one
    forward pass per element of the arguments (so an ``R^1 -> R^n`` function costs one
    pass, where ``jacrev`` needs ``n`` backward passes). Inputs must be real (the
    Jacobian of a function of complex inputs that need not be holomorphic is no complex
    matrix: use ``jvp``); outputs may be complex."""

    @functools.wraps(f)
    def wrapper(*args):
        nested = mode.enabled and any(map(requires_grad, args))
        rec = namespace_of(args, "jacfwd")
        start = next_seq()
        variables, nodes = [], []
        for i, a in enumerate(args):
            v, node = variable(a, "jacfwd", rec)
            _refuse_complex(rec, i, v)
            variables.append(v)
            nodes.append(node)
        with (
            grad_mode.enable_grad(),
            calling(),
        ):  # an inner grad closing over an input records its backward pass
            outs = f(*variables)
        fwd = Forward(rec, outs, start, nodes)
        record = mode.enabled and (fwd.outer or nested)
        B = rec.backend
        xp = rec.xp if record else B
        columns = [[[] for _ in variables] for _ in outs]  # [output][variable] -> tangents
        for k, (v, node) in enumerate(zip(variables, nodes)):
            n = B.size_of(v.data)
            device = B.device_of(v.data)
            for j in range(n):
                e = B.reshape(B.astype(B.arange(n, device=device) == j, v.dtype), v.shape)
                tan = fwd.push({node: rec.wrap(e) if record else e}, record)
                for o, cols in zip(outs, columns):
                    t = fwd.tangent(o, tan, record)
                    cols[k].append(t if record else t.data)
        jacs = []
        with grad_mode.enable_grad() if record else grad_mode.no_grad():
            for o, cols in zip(outs, columns):
                per = []
                for v, c in zip(variables, cols):
                    shape = tuple(o.shape) + tuple(v.shape)
                    if c:
                        j = xp.reshape(xp.stack(c, axis=-1), shape)
                    else:
                        j = B.zeros(shape, dtype=o.dtype, device=B.device_of(o.data))
                    per.append(j if isinstance(j, Tensor) else rec.wrap_out(j))
                jacs.append(per)
        return jacs

    return wrapper


def _gradient_of(f, what):
    """``f``'s gradient with respect to every argument (trees; batched inside vmap),
    recorded (so that it can be pushed forward again): reverse mode's ``grad`` on the
    variables of the forward pass, which require grad. A tree for one argument, a
    tuple of them for several."""

    def checked(*xs):
        out = f(*xs)
        if not isinstance(out, (Tensor, Batched)):
            raise TypeError(f"{what}: the function must return a Tensor, got {type(out).__name__}")
        if math.prod(out.shape) != 1 or plain(out)._rec.is_complex(out.dtype):
            raise ValueError(
                f"{what}: the function must return a real scalar, it returned shape "
                f"{out.shape}, dtype {out.dtype}"
            )
        return out

    def grad_f(*xs):
        g = grad(checked, argnums=tuple(range(len(xs))))(*xs)
        return g[0] if len(g) == 1 else g

    return grad_f


def _hvp(f, primals, tangents):
    """Hessian-vector product by forward-over-reverse, JAX's recipe
    ``jax.jvp(jax.grad(f, argnums=all), primals, tangents)``: returns
    ``(grad f(primals), H @ tangents)``, each a Tensor for one primal and a tuple for
    several (``H v`` for primal ``i`` is ``sum_j d^2 f / dx_i dx_j v_j``). ``f`` returns a
    real scalar. One reverse pass, recorded, then one forward pass through it: the cost
    of about two gradients, without forming ``H``."""
    return _jvp(_gradient_of(f, "hvp"), primals, tangents)


# -- the public transforms ----------------------------------------------------------
def jvp(f, primals, tangents):
    """``(f(*primals), J @ tangents)`` by one forward pass carrying tangents: each
    recorded op's JVP rule (see ``autodiff/forward.py``), no reverse pass. Raw arrays in
    give raw arrays out."""
    checks.function("jvp", "f", f)
    return in_kind((primals, tangents), _jvp(f, primals, tangents))


def hvp(f, primals, tangents):
    """``(grad f(primals), H @ tangents)``, forward over reverse (JAX's
    ``jvp(grad(f))``; see ``forward.hvp``). Raw arrays in give raw arrays out."""
    checks.function("hvp", "f", f)
    return in_kind((primals, tangents), _hvp(f, primals, tangents))


def _jacfwd_arrays(f):
    """The Jacobian by forward mode of ``f`` (arrays -> a tuple of arrays), [output]
    [argument] -> ``out.shape + x.shape``: outside vmap ``f`` recorded once, then one
    forward pass per element of ``x``; inside vmap, ``vmap`` of ``jvp`` over the rows of
    the identity. Inputs must be real; outputs may be complex."""

    looped = _jacfwd_looped(f)

    @functools.wraps(f)
    def wrapper(*args):
        if not (depth[0] and active()):
            # outside vmap, the recorded graph takes one tangent per pass: as fast for a
            # few inputs, and custom_jvp rules apply (vmap runs their plain function)
            return in_kind(args, looped(*args))
        rec = namespace_of(args, "jacfwd")
        B, xp = rec.backend, rec.xp
        for i, p in enumerate(args):
            if not isinstance(p, (Tensor, Batched)) and not B.is_array(p):
                raise TypeError(f"jacfwd: expected an array or a Tensor, got {type(p).__name__}")
            _refuse_complex(rec, i, p)

        def zeros(p):
            return xp.zeros_like(p) if isinstance(p, (Tensor, Batched)) else B.zeros_like(p)

        jacs = []  # [argument][output]
        for k, p in enumerate(args):
            shape = tuple(p.shape)
            n = math.prod(shape)
            eye = B.eye(n, dtype=p.dtype, device=B.device_of(data(plain(p))))
            eye = rec.wrap(B.reshape(eye, (n,) + shape))

            def push(t, k=k):
                tangents = [t if j == k else zeros(q) for j, q in enumerate(args)]
                return _jvp(f, tuple(args), tuple(tangents))[1]

            # the columns: (n,) + out.shape per output, put last and split as x's shape
            cols = vmap(push, out_axes=-1)(eye)
            jacs.append([xp.reshape(c, tuple(c.shape[:-1]) + shape) for c in cols])
        return in_kind(args, [list(row) for row in zip(*jacs)])

    return wrapper


def jacfwd(f, argnums=0):
    """The Jacobian by forward mode (JAX's ``jacfwd``): ``jacfwd(f)(x)`` has shape
    ``f(x).shape + x.shape``; one forward pass per element of ``x`` (inside vmap, ``vmap``
    of ``jvp``). Arguments and outputs may be trees: the result is a tree of the output's
    structure whose leaves are trees of the argument's (JAX's rule)."""
    checks.function("jacfwd", "f", f)
    return on_trees(_jacfwd_arrays, f, argnums, "jacfwd")


def hessian(f, argnums=0):
    """``hessian(f)(x)`` has shape ``x.shape + x.shape``: ``jacfwd(jacrev(f))``, forward
    over reverse, as JAX's (one recorded backward pass, then one forward pass through it
    per element of ``x``); of a tree, the tree of blocks ``H[a][b]`` (JAX's structure)."""
    checks.function("hessian", "f", f)
    return jacfwd(jacobian(f, argnums), argnums)
