"""Functions with rules of the user's: ``custom_vjp`` and ``custom_jvp``, JAX's conventions.

Each call records one node of an op made for it (chapter "custom"): ``custom_vjp``'s
rule is the user's ``bwd``; ``custom_jvp``'s forward rule is the user's JVP function,
and its VJP the transpose of that (recorded on tangent variables and differentiated
with respect to them). Inside vmap both are rebuilt over the whole batch, their
functions and rules mapped (``vmap.custom_call``), so the user's rules still apply.
"""

from __future__ import annotations

import functools

from .. import checks, pytree
from ..engine import backward, grad_mode
from ..engine.batching import Batched, depth, derived
from ..engine.grad_mode import mode
from ..engine.namespace import recorder_of
from ..engine.registry import Op
from ..engine.tensor import Tensor
from .common import barriers, data, leaf_variable, pair
from .vmap import custom_call

__all__ = ["custom_vjp", "custom_jvp"]


class custom_vjp:
    """A function with a user-defined VJP, JAX's convention::

        @ad.custom_vjp
        def f(x, y): ...
        f.defvjp(fwd, bwd)   # fwd(*args) -> (out, residuals); bwd(residuals, g) -> grads

    ``bwd`` returns one gradient (or None) per positional argument. Arguments and the
    output may be trees: ``bwd`` gets a cotangent of the output's structure and gives a
    gradient of each argument's (None for a leaf it has none for). ``fwd`` runs
    without recording. Under ``create_graph`` (``hessian``, ``grad`` of ``grad``),
    ``fwd`` runs again on the recorded inputs, so the residuals depend on them, and
    ``bwd`` is recorded: written with the namespace's functions, it is itself
    differentiated. A ``bwd`` that can't be (it returns foreign arrays, or converts
    a tensor that requires grad) raises instead of giving a zero.
    """

    def __init__(self, fun):
        checks.function("custom_vjp", "fun", fun)
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args):
        if self.fwd is not None and _holds_tree(args):
            return _on_leaves(self, args)
        if self.fwd is not None and depth[0] and _holds_batched(args):
            return _custom_under_vmap(self, args)
        tensors = [a for a in args if isinstance(a, Tensor)]
        if self.fwd is None or not mode.enabled or not any(t.requires_grad for t in tensors):
            return self.fun(*args)
        rec = recorder_of(tensors[0])
        plain = [a.detach() if isinstance(a, Tensor) else a for a in args]
        with grad_mode.no_grad():
            out, residuals = self.fwd(*plain)
        name = getattr(self.fun, "__name__", "custom_vjp")
        op = Op(
            name,
            "custom",
            vjp=functools.partial(_custom_rule, self.bwd, name, rec),
            residuals=functools.partial(_custom_residuals, self.fwd),
        )
        raws = [a.data if isinstance(a, Tensor) else a for a in args]
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for o in outs:
            if not isinstance(o, Tensor) or type(o) is not rec.cls:
                raise TypeError(
                    f"custom_vjp '{name}': fwd must return Tensors of {rec.namespace.__name__} "
                    f"as its output, got {type(o).__name__}"
                )
        data = type(out)(o.data for o in out) if outs is out else out.data
        return rec.record(op, data, args, raws, {}, residuals)


def _holds_batched(args):
    return any(type(a) is Batched for a in args)


def _holds_tree(args):
    """Whether an argument is a tree (a dict, a list, a dataclass...) holding a Tensor."""
    for a in args:
        if isinstance(a, (Tensor, Batched, int, float, complex)) or a is None:
            continue
        if pytree.children(a) is not None and any(
            isinstance(leaf, (Tensor, Batched)) for leaf in pytree.leaves(a)
        ):
            return True
    return False


def _none_leaf(x):
    return x is None


def _on_leaves(cf, args):
    """``cf`` (a custom_vjp or custom_jvp function) called on trees: the same function of
    their leaves, its rules the user's taking and giving trees (a bwd's gradient, or a
    tangent, of an argument's structure; None for a whole argument or a leaf)."""
    leaves, td = pytree.flatten(args)
    counts = [len(pytree.leaves(a)) for a in args]
    out_td = []  # the output's structure, seen when fun or fwd runs

    def unflat(ls):
        return pytree.unflatten(td, list(ls))

    def flat_out(out):
        outs, otd = pytree.flatten(out, _none_leaf)
        out_td[:] = [otd]
        return outs[0] if otd == pytree.LEAF else tuple(outs)

    def tree_of(flat):  # a flat output (or cotangent) as the output's tree
        return pytree.unflatten(out_td[0], [flat] if out_td[0] == pytree.LEAF else list(flat))

    @functools.wraps(cf.fun)
    def fun(*ls):
        return flat_out(cf.fun(*unflat(ls)))

    inner = type(cf)(fun)
    if isinstance(cf, custom_vjp):

        def fwd(*ls):
            out, residuals = cf.fwd(*unflat(ls))
            return flat_out(out), residuals

        def bwd(residuals, g):
            grads = _flat(cf.bwd(residuals, tree_of(g)))
            if len(grads) != len(args):
                return grads  # the count is reported by the caller
            flat = []
            for a, n, gr in zip(args, counts, grads):
                gl = [None] * n if gr is None else pytree.leaves(gr, _none_leaf)
                if len(gl) != n:
                    raise ValueError(
                        f"custom_vjp '{fun.__name__}': bwd returned a gradient of structure "
                        f"{pytree.describe(pytree.tree_structure(gr))} for an argument of "
                        f"structure {pytree.describe(pytree.tree_structure(a))}"
                    )
                flat += gl
            return tuple(flat)

        inner.defvjp(fwd, bwd)
    else:

        def rule(primals, tangents):
            out, tangent = cf.jvp_fn(unflat(primals), unflat(tangents))
            flat_tangent = flat_out(tangent)
            return flat_out(out), flat_tangent

        inner.defjvp(rule)
    return tree_of(inner(*leaves))


def _custom_under_vmap(cv, args):
    """A custom_vjp function called inside vmap (see ``vmap.custom_call``)."""

    def rebuild(axes, mapped):
        inner = custom_vjp(mapped(cv.fun, axes))
        bwd = mapped(cv.bwd, (0, 0))

        def summed_bwd(residuals, g):  # an argument shared by the examples: their sum
            grads = _flat(bwd(residuals, g))
            return tuple(
                gr if gr is None or ax == 0 else recorder_of(gr).xp.sum(gr, axis=0)
                for gr, ax in zip(grads, axes)
            )

        return inner.defvjp(mapped(cv.fwd, axes), summed_bwd)

    return custom_call(args, rebuild)


def _custom_residuals(fwd, xp, *args):
    """The residuals of ``fwd`` recomputed from the recorded inputs (under ``create_graph``)."""
    with grad_mode.enable_grad():
        return fwd(*args)[1]


def _flat(g):
    return g if isinstance(g, tuple) else (g,)


def _custom_rule(bwd, name, rec, xp, g, residuals, *args):
    """The VJP of a custom_vjp function: the user's ``bwd``, on Tensors in both modes.
    ``bwd`` works in PyTorch's convention (as ``.grad`` does) for complex values."""
    g = (
        tuple(_convention(rec, xp, a) for a in g)
        if isinstance(g, tuple)
        else _convention(rec, xp, g)
    )
    out = _custom_grads(bwd, name, rec, xp, g, residuals, *args)
    return tuple(_convention(rec, xp, r) for r in out)


def _convention(rec, xp, a):
    return a if a is None else backward.to_internal(rec, a, xp)


def _custom_grads(bwd, name, rec, xp, g, residuals, *args):
    if xp.records:
        with grad_mode.enable_grad():
            grads = bwd(residuals, g)
    else:
        lift = rec.wrap if not isinstance(g, tuple) else lambda gs: tuple(map(rec.wrap, gs))
        with grad_mode.no_grad():
            grads = bwd(residuals, lift(g))
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    if len(grads) != len(args):
        raise ValueError(
            f"custom_vjp '{name}': bwd returned {len(grads)} gradients for {len(args)} arguments"
        )
    out = []
    traced = xp.records and any(t is not None and t.requires_grad for t in _flat(g))
    for i, r in enumerate(grads):
        shape = getattr(args[i], "shape", None)
        if r is not None and shape is not None and tuple(getattr(r, "shape", ())) != tuple(shape):
            # the backward pass would broadcast it to the argument's shape, silently
            raise ValueError(
                f"custom_vjp '{name}': bwd returned a gradient of shape "
                f"{tuple(getattr(r, 'shape', ()))} for argument {i}, of shape {tuple(shape)}"
            )
        if isinstance(r, Tensor) and xp.records:
            # A VJP is linear in g: one that doesn't depend on it is zero, or was computed
            # from detached values (and its derivative would be a silent zero).
            host = rec.backend.checks_on_host(r.data)  # never a compute or a device sync
            if traced and not r.requires_grad and host and bool(xp.any(r != 0)):
                raise TypeError(
                    f"custom_vjp '{name}': under create_graph, bwd returned a gradient for "
                    f"argument {i} that does not depend on g (computed from detached or "
                    "raw values?), so it can't be differentiated: compute it with the "
                    "namespace's functions on the Tensors bwd is given"
                )
            out.append(r)
        elif r is None:
            out.append(r)
        elif isinstance(r, Tensor):
            out.append(r.data)
        elif xp.records:
            # A foreign array: no graph leads back from it to g or the residuals.
            raise TypeError(
                f"custom_vjp '{name}': under create_graph, bwd returned a "
                f"{type(r).__name__} for argument {i}, which can't be differentiated: "
                "compute it with the namespace's functions on the Tensors bwd is given"
            )
        else:
            r = rec.raw(r, name)
            if not rec.backend.is_array(r):
                raise TypeError(
                    f"custom_vjp '{name}': bwd returned a {type(r).__name__} for argument "
                    f"{i}, not an array of {rec.namespace.__name__}"
                )
            out.append(r)
    return tuple(out)


# -- custom_jvp ----------------------------------------------------------------------------
class custom_jvp:
    """A function with a user-defined JVP, JAX's convention::

        @ad.custom_jvp
        def f(x, y): ...

        @f.defjvp
        def f_jvp(primals, tangents):   # -> (f(*primals), tangent of the output)
            x, y = primals
            tx, ty = tangents           # zeros for arguments with no tangent
            ...

    Forward mode (``jvp``, ``jacfwd``, ``hvp``) calls ``f_jvp``. Reverse mode (``grad``,
    ``backward``) transposes it: ``f_jvp`` is recorded on tangent variables and
    differentiated with respect to them (it is linear in the tangents), so ``f_jvp``
    must be written with the namespace's functions on the tangents it is given.
    Arguments and the output may be trees (tangents of the same structures).
    ``f`` itself runs without recording where an input requires grad.
    """

    def __init__(self, fun):
        checks.function("custom_jvp", "fun", fun)
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.jvp_fn = None

    def defjvp(self, jvp_fn):
        self.jvp_fn = jvp_fn
        return jvp_fn

    def _rebuild(self, axes, mapped):
        """This function over a whole batch (``vmap.custom_call``): the function and
        the rule mapped over the batch axis of the arguments in ``axes``."""
        inner = custom_jvp(mapped(self.fun, axes))
        rule = mapped(self.jvp_fn, (axes, axes))
        inner.defjvp(lambda primals, tangents: rule(tuple(primals), tuple(tangents)))
        return inner

    def __call__(self, *args):
        if self.jvp_fn is not None and _holds_tree(args):
            return _on_leaves(self, args)
        if self.jvp_fn is not None and depth[0] and any(type(a) is Batched for a in args):
            return custom_call(args, self._rebuild)
        tensors = [a for a in args if isinstance(a, Tensor)]
        if self.jvp_fn is None or not mode.enabled or not any(t.requires_grad for t in tensors):
            return self.fun(*args)
        rec = recorder_of(tensors[0])
        name = getattr(self.fun, "__name__", "custom_jvp")
        plain = [a.detach() if isinstance(a, Tensor) else a for a in args]
        with grad_mode.no_grad():
            out = self.fun(*plain)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for o in outs:
            if not isinstance(o, Tensor) or type(o) is not rec.cls:
                raise TypeError(
                    f"custom_jvp '{name}': the function must return Tensors of "
                    f"{rec.namespace.__name__}, got {type(o).__name__}"
                )
        op = Op(
            name,
            "custom",
            vjp=derived(functools.partial(_custom_jvp_transposed, self, name, rec)),
            jvp=functools.partial(_custom_jvp_rule, self, name, rec),
        )
        raws = [a.data if isinstance(a, Tensor) else a for a in args]
        data = type(out)(o.data for o in out) if outs is out else out.data
        return rec.record(op, data, args, raws, {})


def _primals_tangents(rec, args, make_tangent):
    """The user's primals (Tensors) and one tangent per array argument (None for the others)."""
    primals, tangents = [], []
    for i, a in enumerate(args):
        if isinstance(a, Tensor) or rec.backend.is_array(a):
            p = a if isinstance(a, Tensor) else rec.wrap(a)
            primals.append(p)
            tangents.append(make_tangent(i, p))
        else:
            primals.append(a)
            tangents.append(None)
    return primals, tangents


def _custom_call(cj, name, primals, tangents):
    result = cj.jvp_fn(tuple(primals), tuple(tangents))
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(
            f"custom_jvp '{name}': the JVP function must return a pair (output, tangent), "
            f"got {type(result).__name__}"
        )
    return result[1]


def _custom_jvp_rule(cj, name, rec, xp, ts, ans, *args):
    """The forward-mode rule of a custom_jvp function: the user's JVP function."""
    B = rec.backend
    record = xp.records

    def tangent(i, p):
        t = ts[i] if i < len(ts) else None
        if t is None:
            return rec.wrap(B.zeros_like(p.data))
        return t if isinstance(t, Tensor) else rec.wrap(t)

    primals, tangents = _primals_tangents(rec, args, tangent)
    with grad_mode.enable_grad() if record else grad_mode.no_grad():
        tout = _custom_call(cj, name, primals, tangents)
    if isinstance(tout, (tuple, list)):
        return tuple(None if t is None else (t if record else rec.raw(t, name)) for t in tout)
    return tout if record else rec.raw(tout, name)


def _custom_jvp_transposed(cj, name, rec, xp, g, ans, *args):
    """The VJP of a custom_jvp function: the transpose of the user's JVP function,
    recorded on zero tangent variables and differentiated with respect to them."""
    B = rec.backend
    record = xp.records
    stops = []
    if record:
        args = barriers(rec, list(args), stops)  # the graph before is not walked
        g = barriers(rec, g, stops)
    else:
        g = tuple(map(rec.wrap, g)) if isinstance(g, tuple) else rec.wrap(g)
    tnodes = []

    def tangent(i, p):
        t, node = leaf_variable(rec, B.zeros_like(p.data))
        tnodes.append(node)
        return t

    with grad_mode.enable_grad():
        primals, tangents = _primals_tangents(rec, args, tangent)
        tout = _custom_call(cj, name, primals, tangents)
        touts = tout if isinstance(tout, (tuple, list)) else (tout,)
        gs = g if isinstance(g, tuple) else (g,)
        s = None
        for gi, ti in zip(gs, touts):
            if ti is None:
                continue
            term = pair(rec.xp, rec, gi, ti)  # the rules' (bilinear) pairing
            s = term if s is None else s + term
        found = [None] * len(tnodes)
        if isinstance(s, Tensor) and s._rg:
            found = backward.gradients(s, B.ones_like(s.data), tnodes + stops,
                                    create_graph=record, retain_graph=record)  # fmt: skip
    out, k = [], 0
    for t in tangents:
        if t is None:
            out.append(None)
            continue
        r = found[k]
        k += 1
        if r is None:  # the output doesn't depend on it
            r = B.zeros_like(t.data)
            r = rec.wrap(r) if record else r
        else:
            r = backward.to_internal(rec, r, rec.xp if record else B)
            if not record:
                r = data(r)
        out.append(r)
    return tuple(out)
