"""Function transforms with JAX's conventions: grad, value_and_grad, vjp, jvp,
jacobian, hessian, custom_vjp.

Arguments may be raw backend arrays (wrapped on entry, so a function written
only against the standard, ``xp = array_namespace(x)``, becomes differentiable)
or Tensors. Differentiating with respect to a Tensor that itself requires grad
records the derivative, so transforms nest: ``hessian = jacobian(grad(f))``.
"""

from __future__ import annotations

import functools

from . import checks, graph
from .graph import Node, attach, edge, mode
from .namespace import recorder_of
from .registry import Op
from .tensor import Tensor

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "custom_vjp"]


def _variable(x, what):
    """A fresh node standing for ``x``: the gradient is read where it arrives."""
    rec = recorder_of(x)
    t = x if isinstance(x, Tensor) else rec.wrap(x)
    rec.backend.check_differentiable(t.dtype, what)
    node = Node(_IDENTITY, (None,), {}, None, (edge(t),), ())
    return attach(rec.wrap(t.data), node), node


def _lift_constants(args, nums, rec):
    """Wrap the raw arrays among the other arguments too, as constants of the same
    namespace, so ``array_namespace(*args)`` inside ``f`` sees one namespace."""
    import array_api_compat

    out = list(args)
    for i, a in enumerate(args):
        if i not in nums and not isinstance(a, Tensor) and array_api_compat.is_array_api_obj(a):
            if not isinstance(a, (int, float, complex, bool)) and rec.backend.is_array(a):
                out[i] = rec.wrap(a)
    return out


_IDENTITY = Op("identity", "transforms", vjp=(lambda xp, g, ans, x: g,), saves=())


def _gradients(out, variables, nodes, cotangent=None, retain_graph=False, record=False):
    """d(out)/d(variables) as Tensors; recorded if any variable stands for a
    Tensor that requires grad (so the result can be differentiated again)."""
    rec = recorder_of(out)
    B = rec.backend
    # A cotangent that requires grad (jvp's transposition) must be recorded too.
    traced = cotangent if isinstance(cotangent, Tensor) and cotangent.requires_grad else None
    create = (
        record or traced is not None or any(n.edges[0] is not None for n in nodes)
    ) and mode.enabled
    if cotangent is None:
        if B.size_of(out.data) != 1:
            raise ValueError(
                f"grad: the function must return a scalar, it returned shape {out.shape}"
            )
        g = B.ones_like(out.data)
    else:
        g = graph.cotangent(rec, cotangent, out.data, "vjp")
    if not out.requires_grad:
        return [rec.wrap(B.zeros_like(v.data)) for v in variables]
    root = traced if create and traced is not None else g
    with graph.enable_grad() if create else graph.no_grad():
        grads = graph.gradients(out, root, nodes, create, retain_graph or create)
    result = []
    for v, gr in zip(variables, grads):
        if gr is None:
            gr = B.zeros_like(v.data)
        if not isinstance(gr, Tensor):
            gr = rec.wrap_out(gr)  # numpy returns scalars from 0-d arithmetic
        result.append(gr)
    return result


def _differentiate(args, argnums, what):
    """Replace the arguments picked by ``argnums`` with fresh variables and wrap
    the other raw arrays as constants: (args, variables, their nodes)."""
    n = len(args)
    nums = checks.integers(what, "argnums", argnums)
    if not nums:
        raise ValueError(f"{what}: argnums is empty: nothing to differentiate")
    for i in nums:
        if not -n <= i < n:
            raise ValueError(f"{what}: argnums {argnums} out of range for {n} arguments")
    nums = tuple(i % n for i in nums)
    args = list(args)
    variables, nodes = [], []
    for i in nums:
        v, node = _variable(args[i], what)
        args[i] = v
        variables.append(v)
        nodes.append(node)
    return _lift_constants(args, nums, recorder_of(variables[0])), variables, nodes


def value_and_grad(f, argnums=0, has_aux=False):
    """``(f(*args), grad)``; with ``has_aux``, ``((value, aux), grad)``."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        args, variables, nodes = _differentiate(args, argnums, "grad")
        with graph.enable_grad():
            result = f(*args, **kwargs)
        if has_aux and not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(
                "grad: with has_aux=True the function must return a pair (output, aux), "
                f"got {type(result).__name__}"
            )
        out, aux = result if has_aux else (result, None)
        if not isinstance(out, Tensor):
            raise TypeError(f"grad: the function must return a Tensor, got {type(out).__name__}")
        grads = _gradients(out, variables, nodes)
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = out if any(n.edges[0] is not None for n in nodes) else out.detach()
        return ((value, aux) if has_aux else value), g

    return wrapper


def grad(f, argnums=0, has_aux=False):
    """The gradient of a scalar function: ``grad(f)(x)`` has ``x``'s shape."""
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        (value, aux), g = vg(*args, **kwargs) if has_aux else ((None, None), vg(*args, **kwargs)[1])
        return (g, aux) if has_aux else g

    return wrapper


def vjp(f, *primals):
    """``(f(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns one cotangent per primal."""
    variables, nodes = [], []
    for p in primals:
        v, node = _variable(p, "vjp")
        variables.append(v)
        nodes.append(node)
    with graph.enable_grad():
        out = f(*variables)

    def vjp_fn(cotangent):
        return tuple(_gradients(out, variables, nodes, cotangent, retain_graph=True))

    return out, vjp_fn


def jvp(f, primals, tangents):
    """``(f(*primals), J @ tangents)``, by transposing the VJP (it is linear in
    the cotangent, so its own VJP applies J)."""
    for what, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, (tuple, list)):
            raise TypeError(f"jvp: {what} must be a tuple or list, got {type(v).__name__}")
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError("jvp: primals and tangents must have the same length")
    for i, (p, t) in enumerate(zip(primals, tangents)):
        ps, ts = tuple(getattr(p, "shape", ())), tuple(getattr(t, "shape", ()))
        if ps != ts:  # a Python number has shape ()
            raise ValueError(f"jvp: tangents[{i}] has shape {ts}, its primal {ps}")
    out, vjp_fn = vjp(f, *primals)
    rec = recorder_of(out)
    u, unode = _variable(rec.wrap(rec.backend.zeros_like(out.data)), "jvp")
    cts = vjp_fn(u)
    total = None
    for c, t in zip(cts, tangents):
        t = t if isinstance(t, Tensor) else rec.wrap(t)
        term = _pairing(rec, c, t)
        total = term if total is None else total + term
    # Primals or tangents that require grad: record, so that jvp nests in grad.
    nested = any(isinstance(a, Tensor) and a.requires_grad for a in primals + tangents)
    (tangent_out,) = _gradients(total, [u], [unode], record=nested)
    return (out if nested else out.detach()), tangent_out


def _pairing(rec, c, t):
    """Re <c, t> = sum(Re(conj(c) t)): the real inner product under which PyTorch's
    convention transposes, so the VJP of ``u -> J^H u`` is ``J t`` (complex too)."""
    xp = rec.xp
    if rec.is_complex(c.dtype) or rec.is_complex(t.dtype):
        return xp.sum(xp.real(xp.conj(c) * t))
    return xp.sum(c * t)


def jacobian(f, argnums=0):
    """``jacobian(f)(x)`` has shape ``f(x).shape + x.shape``."""

    @functools.wraps(f)
    def wrapper(*args):
        args, variables, nodes = _differentiate(args, argnums, "jacobian")
        with graph.enable_grad():
            out = f(*args)
        rec = recorder_of(out)
        B = rec.backend
        if rec.is_complex(out.dtype):
            raise TypeError(
                f"jacobian: the function returns complex values ({out.dtype}); the "
                "Jacobian of a function that need not be holomorphic is no complex "
                "matrix: differentiate a real function of it, or use vjp / jvp"
            )
        n = B.size_of(out.data)
        rows = [[] for _ in variables]
        for k in range(n):
            onehot = B.reshape(
                B.astype(B.arange(n, device=B.device_of(out.data)) == k, out.dtype), out.shape
            )
            for r, gr in zip(rows, _gradients(out, variables, nodes, onehot, retain_graph=True)):
                r.append(gr)
        jacs = []
        for v, r in zip(variables, rows):
            stacked = rec.xp.stack(r, axis=0) if r else rec.wrap(B.zeros((0,) + v.shape))
            jacs.append(rec.xp.reshape(stacked, tuple(out.shape) + tuple(v.shape)))
        return jacs[0] if isinstance(argnums, int) else tuple(jacs)

    return wrapper


def hessian(f, argnums=0):
    """``hessian(f)(x)`` has shape ``x.shape + x.shape``."""
    return jacobian(grad(f, argnums), argnums)


class custom_vjp:
    """A function with a user-defined VJP, JAX's convention::

        @ad.custom_vjp
        def f(x, y): ...
        f.defvjp(fwd, bwd)   # fwd(*args) -> (out, residuals); bwd(residuals, g) -> grads

    ``bwd`` returns one gradient (or None) per positional argument. ``fwd`` runs
    without recording. Under ``create_graph`` (``hessian``, ``grad`` of ``grad``),
    ``fwd`` runs again on the recorded inputs, so the residuals depend on them, and
    ``bwd`` is recorded: written with the namespace's functions, it is itself
    differentiated. A ``bwd`` that can't be (it returns foreign arrays, or converts
    a tensor that requires grad) raises instead of giving a zero.
    """

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args):
        tensors = [a for a in args if isinstance(a, Tensor)]
        if self.fwd is None or not mode.enabled or not any(t.requires_grad for t in tensors):
            return self.fun(*args)
        rec = recorder_of(tensors[0])
        plain = [a.detach() if isinstance(a, Tensor) else a for a in args]
        with graph.no_grad():
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


def _custom_residuals(fwd, xp, *args):
    """The residuals of ``fwd`` recomputed from the recorded inputs (under ``create_graph``)."""
    with graph.enable_grad():
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
    return a if a is None else graph.to_internal(rec, a, xp)


def _custom_grads(bwd, name, rec, xp, g, residuals, *args):
    if xp.records:
        with graph.enable_grad():
            grads = bwd(residuals, g)
    else:
        lift = rec.wrap if not isinstance(g, tuple) else lambda gs: tuple(map(rec.wrap, gs))
        with graph.no_grad():
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
            if traced and not r.requires_grad and bool(xp.any(r != 0)):
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
