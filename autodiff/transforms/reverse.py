"""Reverse mode, JAX's conventions: ``grad``, ``value_and_grad``, ``vjp`` and ``jacobian``
(``jacrev``).

``f`` is recorded once on variables standing for the differentiated arguments
(``common.variable``), then one backward pass (one per row for a Jacobian) reads the
gradients arriving at them (``backward.gradients``). Arguments may be raw backend arrays
(wrapped on entry, so a function written only against the standard,
``xp = array_namespace(x)``, becomes differentiable) or Tensors. Differentiating with
respect to a Tensor that itself requires grad records the derivative, so transforms
nest (``hessian = jacfwd(jacrev(f))``, in forward.py). This module never imports forward
mode.
"""

from __future__ import annotations

import functools
import math

from .. import checks, pytree
from ..engine import backward, grad_mode, tracing, versions
from ..engine.batching import Batched, active, depth
from ..engine.grad_mode import mode
from ..engine.namespace import recorder_of
from ..engine.node import next_seq
from ..engine.tensor import Tensor
from .common import (
    argnums_of,
    calling,
    lift_constants,
    namespace_of,
    on_trees,
    unwrap,
    variable,
)
from .vmap import batched_variable, merge, regroup, vmap

__all__ = ["grad", "value_and_grad", "vjp", "jacobian"]


def _gradients(out, variables, nodes, cotangent=None, retain_graph=False, record=False):
    """d(out)/d(variables) as Tensors; recorded if any variable stands for a
    Tensor that requires grad (so the result can be differentiated again). ``out`` and
    ``cotangent`` may be lists (several outputs, one pass)."""
    outs = out if isinstance(out, list) else [out]
    cots = cotangent if isinstance(out, list) else [cotangent]
    if depth[0] and any(type(a) is Batched for a in (*outs, *cots, *variables)):  # inside vmap
        return _batched_gradients(outs, cots, variables, nodes, retain_graph, record)
    rec = recorder_of(outs[0])
    B = rec.backend
    # A cotangent that requires grad (jvp's transposition) must be recorded too.
    traced = [c if isinstance(c, Tensor) and c.requires_grad else None for c in cots]
    create = (
        record or any(t is not None for t in traced) or any(n.edges[0] is not None for n in nodes)
    ) and mode.enabled
    roots, gs = [], []
    for o, c, tr in zip(outs, cots, traced):
        if c is None:
            if B.size_of(o.data) != 1:
                raise ValueError(
                    f"grad: the function must return a scalar, it returned shape {o.shape}"
                )
            g = B.ones_like(o.data)
        else:
            g = backward.cotangent(rec, c, o.data, "vjp")
        if o.requires_grad:
            roots.append(o)
            gs.append(tr if create and tr is not None else g)
    if not roots:
        return [rec.wrap(B.zeros_like(v.data)) for v in variables]
    with grad_mode.enable_grad() if create else grad_mode.no_grad():
        grads = backward.gradients(roots, gs, nodes, create, retain_graph or create)
    result = []
    for v, gr in zip(variables, grads):
        if gr is None:
            gr = B.zeros_like(v.data)
        if not isinstance(gr, Tensor):
            gr = rec.wrap_out(gr)  # numpy returns scalars from 0-d arithmetic
        result.append(gr)
    return result


def _batched_gradients(outs, cots, variables, nodes, retain_graph, record):
    """``_gradients`` inside vmap. The graph was recorded on every example at once: on
    variables batched over the vmaps running when they were made (levels ``S``: see
    ``_Inputs``), or on plain ones (made outside vmap, ``S`` empty). Outputs and
    cotangents are brought to ``S``'s plain axes; a cotangent batched over other vmaps
    (``vmap(vjp_fn)``) stays Batched over those, and the backward pass then runs recorded,
    its rules called through the namespace on Batched cotangents, hence batched too."""
    first = next((v for v in variables if type(v) is Batched), None)
    inner = first.levels if first is not None else ()
    sizes = tuple(first.value.shape[: len(inner)]) if first is not None else ()
    running = {level for level, _ in active()}
    if not set(inner) <= running:
        raise ValueError(
            "vmap: a function made by vjp (or grad) inside vmap is called outside that vmap"
        )
    plain = [v.value if type(v) is Batched else v for v in variables]
    outs2, cots2 = [], []
    for o, c in zip(outs, cots):
        if c is None:
            if math.prod(o.shape) != 1:
                raise ValueError(
                    f"grad: the function must return a scalar, it returned shape {o.shape}"
                )
        o2 = regroup(o, inner, sizes)
        if type(o2) is Batched:
            raise ValueError(
                "vmap: the function's output is batched over a vmap its inputs are not"
            )
        if c is None:
            c2 = o2._rec.wrap(o2._rec.backend.ones_like(o2.data))
        else:
            if tuple(c.shape) != tuple(o.shape):
                raise ValueError(f"vjp: grad has shape {tuple(c.shape)}, the output has {o.shape}")
            if not isinstance(c, (Tensor, Batched)):
                c = o2._rec.xp.asarray(c)
            c2 = regroup(c, inner, sizes)
        outs2.append(o2)
        cots2.append(c2)
    if not any(type(c) is Batched for c in cots2):
        grads = _gradients(outs2, plain, nodes, cots2, retain_graph, record)
        return [merge(g, inner) for g in grads]
    # Cotangents batched over vmaps of their own: a recorded pass on Batched cotangents.
    rec = recorder_of(outs2[0])
    roots, gs = [], []
    for o, c in zip(outs2, cots2):
        if o.requires_grad and o._node is not None:
            roots.append((o._node, o._index))
            gs.append(backward.to_internal(rec, c, rec.xp))
    keep = (
        record
        or any(n.edges[0] is not None for n in nodes)
        or any(getattr(c, "requires_grad", False) for c in cots2)
    )
    grads = [None] * len(plain)
    if roots:
        run = backward.Pass(rec, True)
        with grad_mode.enable_grad():
            grads = run.run(roots, gs, retain_graph=True, targets=nodes)
    result = []
    for v, g in zip(plain, grads):
        if g is None:
            g = rec.wrap(rec.backend.zeros_like(v.data))
        else:
            g = backward.to_internal(rec, g, rec.xp)
            if not keep:
                g = g.detach()
        result.append(merge(g, inner))
    return result


class _Inputs:
    """The differentiated arguments of a transform, flattened: their variables (one
    per leaf), the structure to give the results back in, and the kind of each leaf
    (a Tensor, a raw array or a Python number: same kind in, same kind out)."""

    def __init__(self, trees, what, context=()):
        self.rec = namespace_of(list(trees) + list(context), what)
        self.treedefs, self.kinds, self.variables, self.nodes = [], [], [], []
        self.trees = []
        for tree in trees:
            leaves, td = pytree.flatten(tree)
            vs = []
            for leaf in leaves:
                if depth[0] and active():
                    # inside vmap: batched over every running vmap, so that each example
                    # gets its own gradient (see _batched_gradients)
                    x, levels = batched_variable(
                        leaf, functools.partial(self._leaf_tensor, what=what)
                    )
                    v, node = variable(x, what, self.rec)
                    v = Batched(v, levels)
                else:
                    v, node = variable(leaf, what, self.rec)
                vs.append(v)
                self.variables.append(v)
                self.nodes.append(node)
                self.kinds.append(_kind(leaf))
            self.treedefs.append(td)
            self.trees.append(pytree.unflatten(td, vs))
        # raw mode: no Tensor was given; results are handed back as raw arrays
        self.raw = TENSOR not in self.kinds
        self.nested = any(n.edges[0] is not None for n in self.nodes)

    def _leaf_tensor(self, x, what):
        """A leaf that is not batched as a Tensor of the namespace."""
        if isinstance(x, Tensor):
            return x
        if isinstance(x, (int, float, complex)) and not isinstance(x, bool):
            return self.rec.wrap(self.rec.backend.asarray(x))
        if not self.rec.backend.is_array(x):
            variable(x, what, self.rec)  # its error: not an array
        return versions.lend(self.rec.wrap(x))  # f never writes into the caller's array

    def regroup(self, flat):
        """The per-leaf results as one tree per argument, each leaf of its input's kind."""
        out, k = [], 0
        for td in self.treedefs:
            n = _count(td)
            leaves = flat[k : k + n]
            if self.raw:  # else Tensors throughout: what an enclosing transform reads
                leaves = [_as_kind(g, kind) for g, kind in zip(leaves, self.kinds[k : k + n])]
            out.append(pytree.unflatten(td, leaves))
            k += n
        return out

    def give(self, tree, keep=False):
        """``tree`` (values the function returned) in the caller's kind; with ``keep``
        (they depend on an enclosing transform's variables) Tensors stay Tensors."""
        if not self.raw:
            return tree
        return pytree.tree_map(unwrap if keep else _detached, tree)


TENSOR, ARRAY, NUMBER = "tensor", "array", "number"


def _kind(leaf):
    if isinstance(leaf, Tensor):
        return TENSOR
    return NUMBER if isinstance(leaf, (int, float, complex)) else ARRAY


def _as_kind(g, kind):
    # a result that requires grad (f closes over a tensor an enclosing transform or
    # backward differentiates) stays a Tensor: a raw array would cut its graph silently
    if kind == TENSOR or not isinstance(g, Tensor) or g.requires_grad:
        return g
    if kind == NUMBER:
        return tracing.number(g)  # a Python number in, a Python number out
    return g.data


def _detached(v):
    return v.detach().data if isinstance(v, Tensor) else v


def _count(td):
    if td == pytree.LEAF:
        return 1
    if td is pytree.NONE:
        return 0
    return sum(_count(c) for c in td[2])


def _differentiate(args, argnums, what):
    """Replace the arguments picked by ``argnums`` with trees of fresh variables and wrap
    the other raw arrays as constants: (args, _Inputs)."""
    nums = argnums_of(args, argnums, what)
    others = [a for i, a in enumerate(args) if i not in nums]
    inputs = _Inputs([args[i] for i in nums], what, others)
    args = list(args)
    for i, tree in zip(nums, inputs.trees):
        args[i] = tree
    for i in range(len(args)):
        if i not in nums:
            args[i] = lift_constants(args[i], inputs.rec)
    return args, inputs


def _reaches_outer(outs, start):
    """Whether the graph of ``outs`` recorded since ``start`` reads a tensor recorded
    before it (by an enclosing transform: ``f`` closes over its variable). Then the
    gradient must be recorded, or that transform would get zero through it. Inside vmap
    the graph is that of the batched values' Tensors."""
    outs = [o.value if type(o) is Batched else o for o in outs]
    stack = [o._node for o in outs if isinstance(o, Tensor) and o._node is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if node.seq < start:
            return True
        for e in node.edges:
            if e is not None and e[0] is not None and e[0] not in seen:
                seen.add(e[0])
                stack.append(e[0])
    return False


def _scalar_output(result, what):
    if not isinstance(result, (Tensor, Batched)):
        raise TypeError(f"{what}: the function must return a Tensor, got {type(result).__name__}")
    return result


def value_and_grad(f, argnums=0, has_aux=False):
    """``(f(*args), grad)``; with ``has_aux``, ``((value, aux), grad)``. The gradient has
    the structure of the argument (a dict of arrays gives a dict of gradients)."""
    checks.function("value_and_grad", "f", f)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        start = next_seq()
        args, inputs = _differentiate(args, argnums, "grad")
        with calling() as enclosing:
            result = f(*args, **kwargs)
        if has_aux and not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(
                "grad: with has_aux=True the function must return a pair (output, aux), "
                f"got {type(result).__name__}"
            )
        out, aux = result if has_aux else (result, None)
        out = _scalar_output(out, "grad")
        record = bool(enclosing) and _reaches_outer([out], start)
        grads = inputs.regroup(_gradients(out, inputs.variables, inputs.nodes, record=record))
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = inputs.give(out if inputs.nested or record else out.detach(), record)
        return ((value, inputs.give(aux, record)) if has_aux else value), g

    return wrapper


def grad(f, argnums=0, has_aux=False):
    """The gradient of a scalar function: ``grad(f)(x)`` has ``x``'s shape (and a tree
    of arrays gives a tree of gradients)."""
    checks.function("grad", "f", f)
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        (value, aux), g = vg(*args, **kwargs) if has_aux else ((None, None), vg(*args, **kwargs)[1])
        return (g, aux) if has_aux else g

    return wrapper


def vjp(f, *primals):
    """``(f(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns one cotangent per primal.

    Primals, the output and the cotangent may be trees; the cotangent has the output's
    structure, and each result the structure of its primal."""
    checks.function("vjp", "f", f)
    inputs, out, vjp_fn = _vjp(f, primals, "vjp")

    def given(cotangent):
        return tuple(inputs.regroup(vjp_fn(cotangent)))

    return inputs.give(out, vjp_fn.record), given


def _vjp(f, primals, what):
    """(inputs, output tree of Tensors, a function: cotangent tree -> flat Tensors)."""
    start = next_seq()
    inputs = _Inputs(primals, what)
    with calling() as enclosing:
        out = f(*inputs.trees)
    outs, out_td = pytree.flatten(out)
    for o in outs:
        if not isinstance(o, (Tensor, Batched)):
            raise TypeError(f"{what}: the function must return Tensors, got {type(o).__name__}")
    record = bool(enclosing) and _reaches_outer(outs, start)

    def vjp_fn(cotangent):
        cots, td = pytree.flatten(cotangent)
        if td != out_td:
            raise ValueError(
                f"{what}: the cotangent's structure {pytree.describe(td)} is not the "
                f"output's {pytree.describe(out_td)}"
            )
        return _gradients(
            outs, inputs.variables, inputs.nodes, cots, retain_graph=True, record=record
        )

    vjp_fn.record = record
    return inputs, out, vjp_fn


def _pairing(rec, c, t):
    """Re <c, t> = sum(Re(conj(c) t)): the real inner product under which PyTorch's
    convention transposes, so the VJP of ``u -> J^H u`` is ``J t`` (complex too)."""
    xp = rec.xp
    if rec.is_complex(c.dtype) or rec.is_complex(t.dtype):
        return xp.sum(xp.real(xp.conj(c) * t))
    return xp.sum(c * t)


def _complex_output(o):
    return TypeError(
        f"jacobian: the function returns complex values ({o.dtype}); the "
        "Jacobian of a function that need not be holomorphic is no complex "
        "matrix: differentiate a real function of it, or use vjp / jvp"
    )


def _zeros(rec, shape, like):
    B = rec.backend
    return rec.wrap(B.zeros(shape, dtype=like.dtype, device=B.device_of(like.data)))


def _jacobian_looped(f):
    """``jacobian`` outside vmap of ``f`` (arrays -> a tuple of arrays): one backward pass
    per element of each output (custom_vjp rules apply; vmap runs their plain
    function). Gives [output][argument] -> Jacobian."""

    @functools.wraps(f)
    def wrapper(*args):
        start = next_seq()
        args, inputs = _differentiate(args, tuple(range(len(args))), "jacobian")
        variables, nodes = inputs.variables, inputs.nodes
        with calling() as enclosing:
            outs = f(*args)
        record = bool(enclosing) and _reaches_outer(outs, start)
        rec = inputs.rec
        B = rec.backend
        jacs = []
        for out in outs:
            if rec.is_complex(out.dtype):
                raise _complex_output(out)
            n = B.size_of(out.data)
            rows = [[] for _ in variables]
            for k in range(n if out.requires_grad else 0):  # a constant: zeros below
                onehot = B.reshape(
                    B.astype(B.arange(n, device=B.device_of(out.data)) == k, out.dtype), out.shape
                )
                grads = _gradients(out, variables, nodes, onehot, retain_graph=True, record=record)
                for r, gr in zip(rows, grads):
                    r.append(gr)
            per = []
            for v, r in zip(variables, rows):
                shape = tuple(out.shape) + tuple(v.shape)
                per.append(rec.xp.reshape(rec.xp.stack(r, axis=0), shape) if r
                           else _zeros(rec, shape, v))  # fmt: skip
            jacs.append(per)
        return inputs.give(jacs, record)

    return wrapper


def _jacrev_arrays(f):
    """The Jacobian by reverse mode of ``f`` (arrays -> a tuple of arrays), [output]
    [argument] -> ``out.shape + x.shape``: one recorded call of ``f``, then one backward
    pass per row; inside vmap, one for all the rows of an output at once,
    ``vmap(vjp_fn)`` over the rows of the identity."""

    looped = _jacobian_looped(f)

    @functools.wraps(f)
    def wrapper(*args):
        if not (depth[0] and active()):
            return looped(*args)
        inputs, outs, vjp_fn = _vjp(f, args, "jacobian")
        rec = inputs.rec
        B, xp = rec.backend, rec.xp
        zeros = [rec.wrap(B.zeros(o.shape, dtype=o.dtype, device=B.device_of(o.data)))
                 for o in outs]  # fmt: skip
        jacs = []
        for k, out in enumerate(outs):
            if rec.is_complex(out.dtype):
                raise _complex_output(out)
            n = math.prod(out.shape)
            device = B.device_of(out.data)
            eye = B.reshape(B.eye(n, dtype=out.dtype, device=device), (n,) + tuple(out.shape))

            def pull(row, k=k):  # the cotangent: this row for output k, zeros elsewhere
                return vjp_fn(tuple(row if j == k else z for j, z in enumerate(zeros)))

            rows = vmap(pull)(rec.wrap(eye)) if n and out.requires_grad else None
            per = []
            with grad_mode.enable_grad() if inputs.nested else grad_mode.no_grad():
                for i, v in enumerate(inputs.variables):
                    shape = tuple(out.shape) + tuple(v.shape)
                    per.append(_zeros(rec, shape, v) if rows is None
                               else xp.reshape(rows[i], shape))  # fmt: skip
            jacs.append(per)
        return inputs.give(jacs, vjp_fn.record)

    return wrapper


def jacobian(f, argnums=0):
    """The Jacobian by reverse mode (JAX's ``jacrev``; also ``ad.jacrev``): one backward
    pass per element of the output (inside vmap, one ``vmap(vjp_fn)`` for all); trees
    as :func:`jacfwd`."""
    checks.function("jacobian", "f", f)
    return on_trees(_jacrev_arrays, f, argnums, "jacobian")
