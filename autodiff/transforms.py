"""Function transforms with JAX's conventions: grad, value_and_grad, vjp, jvp,
jacobian, hessian, custom_vjp, vmap (its machinery in ``batching.py``).

Arguments may be raw backend arrays (wrapped on entry, so a function written
only against the standard, ``xp = array_namespace(x)``, becomes differentiable)
or Tensors. Differentiating with respect to a Tensor that itself requires grad
records the derivative, so transforms nest: ``hessian = jacfwd(jacrev(f))``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading

from . import batching, graph, pytree
from . import forward as _forward
from .forward import custom_jvp
from .graph import Node, attach, edge, mode
from .namespace import recorder_of
from .registry import Op
from .tensor import Tensor

__all__ = [
    "grad",
    "value_and_grad",
    "vjp",
    "jvp",
    "jacobian",
    "jacfwd",
    "hvp",
    "hessian",
    "custom_vjp",
    "custom_jvp",
    "vmap",
]


def _namespace_of(trees, what):
    """The Recorder of the first Tensor or array among the leaves of ``trees``; NumPy's
    when there are only Python numbers (``grad(f)(3.0)``)."""
    return _forward._namespace(pytree.leaves(list(trees)), what)


def _variable(x, what, rec):
    """A fresh node standing for ``x``: the gradient is read where it arrives."""
    if isinstance(x, (int, float, complex)) and not isinstance(x, bool):
        x = rec.backend.asarray(x)  # a Python number: a 0-d array of the namespace
    if not isinstance(x, Tensor):
        if not rec.backend.is_array(x):
            raise TypeError(
                f"{what}: expected arrays, Tensors or Python numbers (in dicts, lists, "
                f"tuples), got {type(x).__name__}"
            )
        x = rec.wrap(x)
    rec.backend.check_differentiable(x.dtype, what)
    node = Node(_IDENTITY, (None,), {}, None, (edge(x),), ())
    return attach(rec.wrap(x.data), node), node


_lift_constants = _forward._lift_constants  # one home, below: forward mode uses it too

_IDENTITY = Op("identity", "transforms", vjp=(lambda xp, g, ans, x: g,), saves=())


def _gradients(out, variables, nodes, cotangent=None, retain_graph=False, record=False):
    """d(out)/d(variables) as Tensors; recorded if any variable stands for a
    Tensor that requires grad (so the result can be differentiated again). ``out`` and
    ``cotangent`` may be lists (several outputs, one pass)."""
    outs = out if isinstance(out, list) else [out]
    cots = cotangent if isinstance(out, list) else [cotangent]
    if batching.depth[0] and any(
        type(a) is batching.Batched for a in (*outs, *cots, *variables)
    ):  # inside vmap
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
            g = graph.cotangent(rec, c, o.data, "vjp")
        if o.requires_grad:
            roots.append(o)
            gs.append(tr if create and tr is not None else g)
    if not roots:
        return [rec.wrap(B.zeros_like(v.data)) for v in variables]
    with graph.enable_grad() if create else graph.no_grad():
        grads = graph.gradients(roots, gs, nodes, create, retain_graph or create)
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
    first = next((v for v in variables if type(v) is batching.Batched), None)
    inner = first.levels if first is not None else ()
    sizes = tuple(first.value.shape[: len(inner)]) if first is not None else ()
    running = {level for level, _ in batching.active()}
    if not set(inner) <= running:
        raise ValueError(
            "vmap: a function made by vjp (or grad) inside vmap is called outside that vmap"
        )
    plain = [v.value if type(v) is batching.Batched else v for v in variables]
    outs2, cots2 = [], []
    for o, c in zip(outs, cots):
        if c is None:
            if math.prod(o.shape) != 1:
                raise ValueError(
                    f"grad: the function must return a scalar, it returned shape {o.shape}"
                )
        o2 = batching.regroup(o, inner, sizes)
        if type(o2) is batching.Batched:
            raise ValueError(
                "vmap: the function's output is batched over a vmap its inputs are not"
            )
        if c is None:
            c2 = o2._rec.wrap(o2._rec.backend.ones_like(o2.data))
        else:
            if tuple(c.shape) != tuple(o.shape):
                raise ValueError(f"vjp: grad has shape {tuple(c.shape)}, the output has {o.shape}")
            if not isinstance(c, (Tensor, batching.Batched)):
                c = o2._rec.xp.asarray(c)
            c2 = batching.regroup(c, inner, sizes)
        outs2.append(o2)
        cots2.append(c2)
    if not any(type(c) is batching.Batched for c in cots2):
        grads = _gradients(outs2, plain, nodes, cots2, retain_graph, record)
        return [batching.merge(g, inner) for g in grads]
    # Cotangents batched over vmaps of their own: a recorded pass on Batched cotangents.
    rec = recorder_of(outs2[0])
    roots, gs = [], []
    for o, c in zip(outs2, cots2):
        if o.requires_grad and o._node is not None:
            roots.append((o._node, o._index))
            gs.append(graph.to_internal(rec, c, rec.xp))
    keep = (
        record
        or any(n.edges[0] is not None for n in nodes)
        or any(getattr(c, "requires_grad", False) for c in cots2)
    )
    grads = [None] * len(plain)
    if roots:
        run = graph.Pass(rec, True)
        with graph.enable_grad():
            grads = run.run(roots, gs, retain_graph=True, targets=nodes)
    result = []
    for v, g in zip(plain, grads):
        if g is None:
            g = rec.wrap(rec.backend.zeros_like(v.data))
        else:
            g = graph.to_internal(rec, g, rec.xp)
            if not keep:
                g = g.detach()
        result.append(batching.merge(g, inner))
    return result


class _Inputs:
    """The differentiated arguments of a transform, flattened: their variables (one
    per leaf), the structure to give the results back in, and the kind of each leaf
    (a Tensor, a raw array or a Python number: same kind in, same kind out)."""

    def __init__(self, trees, what, context=()):
        self.rec = _namespace_of(list(trees) + list(context), what)
        self.treedefs, self.kinds, self.variables, self.nodes = [], [], [], []
        self.trees = []
        for tree in trees:
            leaves, td = pytree.flatten(tree)
            vs = []
            for leaf in leaves:
                if batching.depth[0] and batching.active():
                    # inside vmap: batched over every running vmap, so that each example
                    # gets its own gradient (see _batched_gradients)
                    x, levels = batching.batched_variable(
                        leaf, functools.partial(self._leaf_tensor, what=what)
                    )
                    v, node = _variable(x, what, self.rec)
                    v = batching.Batched(v, levels)
                else:
                    v, node = _variable(leaf, what, self.rec)
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
            _variable(x, what, self.rec)  # its error: not an array
        return self.rec.wrap(x)

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
        return pytree.tree_map(_unwrap if keep else _detached, tree)


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
        return g.item()  # a Python number in, a Python number out
    return g.data


def _unwrap(v):
    return v.data if isinstance(v, Tensor) and not v.requires_grad else v


def _detached(v):
    return v.detach().data if isinstance(v, Tensor) else v


def _count(td):
    if td == pytree.LEAF:
        return 1
    if td is pytree.NONE:
        return 0
    return sum(_count(c) for c in td[2])


_argnums = _forward._argnums  # argnums as a tuple of indices (checked): one home


def _differentiate(args, argnums, what):
    """Replace the arguments picked by ``argnums`` with trees of fresh variables and wrap
    the other raw arrays as constants: (args, _Inputs)."""
    nums = _argnums(args, argnums, what)
    others = [a for i, a in enumerate(args) if i not in nums]
    inputs = _Inputs([args[i] for i in nums], what, others)
    args = list(args)
    for i, tree in zip(nums, inputs.trees):
        args[i] = tree
    for i in range(len(args)):
        if i not in nums:
            args[i] = _lift_constants(args[i], inputs.rec)
    return args, inputs


class _Running(threading.local):
    depth = 0  # how many transforms' functions are running in this thread


_running = _Running()


@contextlib.contextmanager
def _calling():
    """Run a transform's function (recording); yields how many enclosing transforms are
    running theirs."""
    depth = _running.depth
    _running.depth = depth + 1
    try:
        with graph.enable_grad():
            yield depth
    finally:
        _running.depth = depth


def _reaches_outer(outs, start):
    """Whether the graph of ``outs`` recorded since ``start`` reads a tensor recorded
    before it (by an enclosing transform: ``f`` closes over its variable). Then the
    gradient must be recorded, or that transform would get zero through it."""
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
    if not isinstance(result, (Tensor, batching.Batched)):
        raise TypeError(f"{what}: the function must return a Tensor, got {type(result).__name__}")
    return result


def value_and_grad(f, argnums=0, has_aux=False):
    """``(f(*args), grad)``; with ``has_aux``, ``((value, aux), grad)``. The gradient has
    the structure of the argument (a dict of arrays gives a dict of gradients)."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        start = graph.next_seq()
        args, inputs = _differentiate(args, argnums, "grad")
        with _calling() as enclosing:
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
    inputs, out, vjp_fn = _vjp(f, primals, "vjp")

    def given(cotangent):
        return tuple(inputs.regroup(vjp_fn(cotangent)))

    return inputs.give(out, vjp_fn.record), given


def _vjp(f, primals, what):
    """(inputs, output tree of Tensors, a function: cotangent tree -> flat Tensors)."""
    start = graph.next_seq()
    inputs = _Inputs(primals, what)
    with _calling() as enclosing:
        out = f(*inputs.trees)
    outs, out_td = pytree.flatten(out)
    for o in outs:
        if not isinstance(o, (Tensor, batching.Batched)):
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


def jvp(f, primals, tangents):
    """``(f(*primals), J @ tangents)`` by one forward pass carrying tangents: each
    recorded op's JVP rule (see ``autodiff/forward.py``), no reverse pass. Raw arrays in
    give raw arrays out."""
    return _in_kind((primals, tangents), _forward.jvp(f, primals, tangents))


def hvp(f, primals, tangents):
    """``(grad f(primals), H @ tangents)``, forward over reverse (JAX's
    ``jvp(grad(f))``; see ``forward.hvp``). Raw arrays in give raw arrays out."""
    return _in_kind((primals, tangents), _forward.hvp(f, primals, tangents))


def _jacfwd_arrays(f, argnums=0):
    """The Jacobian by forward mode (JAX's ``jacfwd``): ``jacfwd(f)(x)`` has shape
    ``f(x).shape + x.shape``: ``f`` recorded once, then one forward pass per element of
    ``x`` (an ``R^1 -> R^n`` function costs one pass); inside vmap, ``vmap`` of ``jvp``
    over the rows of the identity. A tuple ``argnums`` gives a tuple of Jacobians; a
    function returning a tree gives the tree of them. Inputs must be real; outputs may
    be complex."""

    looped = _forward.jacfwd(f, argnums)

    @functools.wraps(f)
    def wrapper(*args):
        if not (batching.depth[0] and batching.active()):
            # outside vmap, the recorded graph takes one tangent per pass: as fast for a
            # few inputs, and custom_jvp rules apply (vmap runs their plain function)
            return _in_kind(_picked(args, argnums), looped(*args))
        nums = _argnums(args, argnums, "jacfwd")
        others = [a for i, a in enumerate(args) if i not in nums]
        primals = [args[i] for i in nums]
        rec = _namespace_of(primals + others, "jacfwd")
        lifted = [a if i in nums else _lift_constants(a, rec) for i, a in enumerate(args)]
        B, xp = rec.backend, rec.xp
        dense = []
        for i, p in zip(nums, primals):
            if isinstance(p, (int, float)) and not isinstance(p, bool):
                p = B.asarray(float(p))
            if not isinstance(p, (Tensor, batching.Batched)) and not B.is_array(p):
                raise TypeError(f"jacfwd: expected an array or a Tensor, got {type(p).__name__}")
            if rec.is_complex(p.dtype):
                raise TypeError(
                    f"jacfwd: argument {i} is complex ({p.dtype}); the Jacobian of a function "
                    "of complex inputs that need not be holomorphic is no complex matrix: "
                    "use jvp, or differentiate with respect to the real and imaginary parts"
                )
            dense.append(p)

        def g(*ps):
            full = list(lifted)
            for i, p in zip(nums, ps):
                full[i] = p
            return f(*full)

        def zeros(p):
            return (
                xp.zeros_like(p) if isinstance(p, (Tensor, batching.Batched)) else B.zeros_like(p)
            )

        jacs = []
        for k, p in enumerate(dense):
            shape = tuple(p.shape)
            n = math.prod(shape)
            raw = p.data if isinstance(p, (Tensor, batching.Batched)) else p
            eye = B.eye(n, dtype=p.dtype, device=B.device_of(raw))
            eye = rec.wrap(B.reshape(eye, (n,) + shape))

            def push(t, k=k):
                tangents = [t if j == k else zeros(q) for j, q in enumerate(dense)]
                return _forward.jvp(g, tuple(dense), tuple(tangents))[1]

            # the columns: (n,) + out.shape per output, put last and split as x's shape
            cols = vmap(push, out_axes=-1)(eye)
            jacs.append(pytree.tree_map(lambda c: xp.reshape(c, tuple(c.shape[:-1]) + shape), cols))
        if isinstance(argnums, int):
            result = jacs[0]
        else:  # a tree of tuples: per output, one Jacobian per argument
            flat = [pytree.flatten(j)[0] for j in jacs]
            td = pytree.flatten(jacs[0])[1]
            result = pytree.unflatten(td, [tuple(col) for col in zip(*flat)])
        return _in_kind(primals, result)

    return wrapper


def _raw_call(trees) -> bool:
    """Whether no Tensor (nor batched value) is among the leaves of ``trees``: then the
    caller gets raw arrays back (same kind in, same kind out)."""
    return not any(
        isinstance(leaf, (Tensor, batching.Batched)) for leaf in pytree.leaves(list(trees))
    )


def _in_kind(trees, result):
    """``result`` as the caller of a transform with arguments ``trees`` expects it."""
    return pytree.tree_map(_unwrap, result) if _raw_call(trees) else result


def _picked(args, argnums):
    try:
        return [args[i] for i in _argnums(args, argnums, "jacobian")]
    except (TypeError, ValueError):
        return args  # the transform itself reports it


def _pairing(rec, c, t):
    """Re <c, t> = sum(Re(conj(c) t)): the real inner product under which PyTorch's
    convention transposes, so the VJP of ``u -> J^H u`` is ``J t`` (complex too)."""
    xp = rec.xp
    if rec.is_complex(c.dtype) or rec.is_complex(t.dtype):
        return xp.sum(xp.real(xp.conj(c) * t))
    return xp.sum(c * t)


def _jacobian_looped(f, argnums=0):
    """``jacobian`` outside vmap: one backward pass per element of the output (custom_vjp
    rules apply; vmap runs their plain function)."""

    @functools.wraps(f)
    def wrapper(*args):
        start = graph.next_seq()
        args, inputs = _differentiate(args, argnums, "jacobian")
        variables, nodes = inputs.variables, inputs.nodes
        with _calling() as enclosing:
            out = f(*args)
        record = bool(enclosing) and _reaches_outer([out], start)
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
            grads = _gradients(out, variables, nodes, onehot, retain_graph=True, record=record)
            for r, gr in zip(rows, grads):
                r.append(gr)
        jacs = []
        for v, r in zip(variables, rows):
            stacked = rec.xp.stack(r, axis=0) if r else rec.wrap(B.zeros((0,) + v.shape))
            jacs.append(rec.xp.reshape(stacked, tuple(out.shape) + tuple(v.shape)))
        return inputs.give(jacs[0] if isinstance(argnums, int) else tuple(jacs), record)

    return wrapper


def _jacrev_arrays(f, argnums=0):
    """``jacobian(f)(x)`` has shape ``f(x).shape + x.shape`` (reverse mode, JAX's
    ``jacrev``): one recorded call of ``f``, then one backward pass per row; inside vmap,
    one for all the rows at once, ``vmap(vjp_fn)`` over the rows of the identity."""

    looped = _jacobian_looped(f, argnums)

    @functools.wraps(f)
    def wrapper(*args):
        if not (batching.depth[0] and batching.active()):
            return looped(*args)
        nums = _argnums(args, argnums, "jacobian")
        others = [a for i, a in enumerate(args) if i not in nums]
        rec = _namespace_of([args[i] for i in nums] + others, "jacobian")
        lifted = [a if i in nums else _lift_constants(a, rec) for i, a in enumerate(args)]

        def g(*ps):
            full = list(lifted)
            for i, p in zip(nums, ps):
                full[i] = p
            return f(*full)

        inputs, out, vjp_fn = _vjp(g, [args[i] for i in nums], "jacobian")
        if not isinstance(out, (Tensor, batching.Batched)):
            raise TypeError(
                f"jacobian: the function must return a Tensor, got {type(out).__name__}"
            )
        if rec.is_complex(out.dtype):
            raise TypeError(
                f"jacobian: the function returns complex values ({out.dtype}); the "
                "Jacobian of a function that need not be holomorphic is no complex "
                "matrix: differentiate a real function of it, or use vjp / jvp"
            )
        B, xp = rec.backend, rec.xp
        n = math.prod(out.shape)
        device = B.device_of(out.data)
        eye = B.reshape(B.eye(n, dtype=out.dtype, device=device), (n,) + tuple(out.shape))
        rows = vmap(vjp_fn)(rec.wrap(eye)) if n else [None] * len(inputs.variables)
        jacs = []
        with graph.enable_grad() if inputs.nested else graph.no_grad():
            for v, r in zip(inputs.variables, rows):
                shape = tuple(out.shape) + tuple(v.shape)
                if r is None:
                    r = rec.wrap(B.zeros(shape, dtype=v.dtype, device=device))
                jacs.append(xp.reshape(r, shape))
        return inputs.give(jacs[0] if isinstance(argnums, int) else tuple(jacs), vjp_fn.record)

    return wrapper


def jacfwd(f, argnums=0):
    """The Jacobian by forward mode (JAX's ``jacfwd``): ``jacfwd(f)(x)`` has shape
    ``f(x).shape + x.shape``; one forward pass per element of ``x`` (inside vmap, ``vmap``
    of ``jvp``). Arguments and outputs may be trees: the result is a tree of the output's
    structure whose leaves are trees of the argument's (JAX's rule)."""
    return _on_trees(_jacfwd_arrays, f, argnums, "jacfwd")


def jacobian(f, argnums=0):
    """The Jacobian by reverse mode (JAX's ``jacrev``; also ``ad.jacrev``): one backward
    pass per element of the output (inside vmap, one ``vmap(vjp_fn)`` for all); trees
    as :func:`jacfwd`."""
    return _on_trees(_jacrev_arrays, f, argnums, "jacobian")


def _on_trees(core, f, argnums, what):
    """``core`` (a Jacobian of arrays to one array or a tuple of them) on trees: the
    arguments' leaves are differentiated one by one, the output's leaves one by one."""
    direct = core(f, argnums)

    @functools.wraps(f)
    def wrapper(*args):
        nums = _argnums(args, argnums, what)
        if all(pytree.flatten(args[i])[1] == pytree.LEAF for i in nums):
            return direct(*args)
        flats = [pytree.flatten(args[i]) for i in nums]
        leaves = [leaf for ls, _ in flats for leaf in ls]
        structure = []

        def leaf_call(*ls):
            full, k = list(args), 0
            for i, (ls0, td) in zip(nums, flats):
                full[i] = pytree.unflatten(td, ls[k : k + len(ls0)])
                k += len(ls0)
            outs, td = pytree.flatten(f(*full))
            structure[:] = [td, len(outs)]
            return outs

        leaf_call(*leaves)  # the output's structure (recorded, then dropped)
        out_td, n_out = structure
        per_output = []
        for o in range(n_out):
            jac = core(lambda *ls, o=o: leaf_call(*ls)[o], tuple(range(len(leaves))))(*leaves)
            trees, k = [], 0
            for ls, td in flats:
                trees.append(pytree.unflatten(td, list(jac[k : k + len(ls)])))
                k += len(ls)
            per_output.append(trees[0] if isinstance(argnums, int) else tuple(trees))
        return pytree.unflatten(out_td, per_output)

    return wrapper


def hessian(f, argnums=0):
    """``hessian(f)(x)`` has shape ``x.shape + x.shape``: ``jacfwd(jacrev(f))``, forward
    over reverse, as JAX's (one recorded backward pass, then one forward pass through it
    per element of ``x``)."""
    return jacfwd(jacobian(f, argnums), argnums)


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
        if self.fwd is not None and batching.depth[0] and _holds_batched(args):
            return _custom_under_vmap(self, args)
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


def _holds_batched(args):
    return any(type(a) is batching.Batched for a in args)


def _custom_under_vmap(cv, args):
    """A custom_vjp function called inside vmap (see ``batching.custom_call``)."""

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

    return batching.custom_call(args, rebuild)


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


def vmap(f, in_axes=0, out_axes=0, axis_size=None):
    """``f`` mapped over a batch axis of its arguments, JAX's ``vmap``: ``f`` is written
    for one example and runs once, on all of them at once (each op by its batching rule,
    see ``autodiff/batching.py``, its rules in ``autodiff/batch_rules.py``).

    ``in_axes``: per positional argument (a tuple), or for all (an int or None), the axis
    to map over; None: the argument is the same for every example; a tree (dict, tuple,
    list) matching an argument's structure gives one per leaf; negative axes count from
    the end. Keyword arguments are mapped over their axis 0. ``out_axes`` (an int, None,
    or a tree prefix of the output): where the batch axis goes in each output.
    ``axis_size``: the number of examples when every in_axis is None. Mapped axes of
    different sizes are a ValueError naming the arguments. It composes with the other
    transforms: ``vmap(grad(loss), in_axes=(None, 0, 0))(params, X, Y)`` gives one
    gradient per example, ``vmap(vjp_fn)(cotangents)`` one VJP per cotangent, and vmaps
    nest. Raw arrays in give raw arrays out."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        rec = _namespace_of(list(args) + list(kwargs.values()), "vmap")
        return batching.map_call(f, in_axes, out_axes, axis_size, args, kwargs, rec)

    return wrapper
