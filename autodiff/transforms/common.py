"""What the transforms share: the namespace of a call, ``argnums``, constants lifted into
the namespace, the identity variables a transform differentiates at, the bilinear
pairing of the rules, and handing results back in the caller's kind.

Every transform records ``f`` on *variables*: a fresh identity node per differentiated
input (:func:`variable`), whose gradient (or tangent) is read where it arrives. A
variable has an edge to its input when that input itself requires grad, so the
transforms nest (``grad(grad(f))``, ``hessian``).
"""

from __future__ import annotations

import contextlib
import functools

from .. import pytree
from ..checks import integers
from ..engine import grad_mode, versions
from ..engine.batching import Batched
from ..engine.namespace import recorder_of
from ..engine.node import Node, attach, edge
from ..engine.registry import Op
from ..engine.tensor import Tensor

__all__ = ["SCALARS", "IDENTITY", "calling", "running", "running_as", "variable",
           "leaf_variable", "borrowed", "barriers", "namespace_of", "argnums_of", "lift_constants",
           "pair", "data", "plain", "requires_grad", "in_kind", "unwrap", "on_trees"]  # fmt: skip

SCALARS = (bool, int, float, complex)

# The op of every variable: an identity (its VJP and JVP pass the gradient or tangent on).
IDENTITY = Op("identity", "transforms", vjp=(lambda xp, g, ans, x: g,), saves=(),
              jvp=lambda xp, ts, ans, x: ts[0])  # fmt: skip


_running = grad_mode.transforming  # how many transforms' functions run in this thread


class calling:
    """Run a transform's function (recording): ``with calling() as enclosing``, how many
    enclosing transforms are running theirs.

    Forward and reverse transforms alike count: a reverse transform inside any of them
    records its backward pass when its function closes over an enclosing transform's
    variable (``jvp`` of ``grad`` of a closure), else that transform sees a constant. A
    class, not a generator: entered once per transform call (1% of a small ``ad.jvp``)."""

    __slots__ = ("_depth", "_grad")

    def __enter__(self):
        depth = self._depth = _running.depth
        _running.depth = depth + 1
        self._grad = grad_mode.enable_grad()
        self._grad.__enter__()
        return depth

    def __exit__(self, *exc):
        try:
            self._grad.__exit__(*exc)
        finally:
            _running.depth = self._depth


def running():
    """How many transforms' functions are running in this thread."""
    return _running.depth


@contextlib.contextmanager
def running_as(depth):
    """Run with ``depth`` transforms' functions counted as running: a checkpointed
    function recomputed by a backward pass records what its forward recorded."""
    before = _running.depth
    _running.depth = depth
    try:
        yield
    finally:
        _running.depth = before


def variable(x, what, rec=None):
    """(a Tensor standing for ``x``, its identity node): the gradient or tangent is read or
    seeded at the node, and ``f`` records from the Tensor. ``x`` is an array, a Tensor or a
    Python number (a 0-d array of the namespace ``rec``); the node has an edge to ``x`` if
    ``x`` requires grad."""
    if rec is None:
        rec = recorder_of(x)
    if isinstance(x, (int, float, complex)) and not isinstance(x, bool):
        x = rec.backend.asarray(x)
    if not isinstance(x, Tensor):
        if not rec.backend.is_array(x):
            raise TypeError(
                f"{what}: expected arrays, Tensors or Python numbers (in dicts, lists, "
                f"tuples, dataclasses, registered nodes), got {type(x).__name__}"
            )
        x = rec.wrap(x)
    rec.backend.check_differentiable(x.dtype, what)
    node = Node(IDENTITY, (None,), {}, None, (edge(x),), ())
    return attach(versions.lend(rec.wrap(x.data)), node), node


def borrowed(x):
    """A Tensor standing for the caller's Tensor ``x`` inside a transform: its buffer,
    lent (a write inside ``f`` copies it first: the caller's tensor never changes), and
    its graph through an identity node when ``x`` requires grad."""
    rec = x._rec
    t = versions.lend(rec.wrap(x.data))
    if not x._rg:
        return t
    return attach(t, Node(IDENTITY, (None,), {}, None, (edge(x),), ()))


def leaf_variable(rec, data):
    """A variable of nothing (no edge) holding ``data``: a cotangent or tangent that the
    forward-mode fallback and the custom rules differentiate with respect to."""
    node = Node(IDENTITY, (None,), {}, None, (None,), ())
    return attach(rec.wrap(data), node), node


def barriers(rec, v, nodes):
    """``v`` (a tree of Tensors) with each Tensor that requires grad replaced by an identity
    of it, whose node goes into ``nodes``: a backward pass told to stop there (targets)
    never walks the graph beyond, but gradients of what is computed from them still flow
    on through the identity."""
    if isinstance(v, Tensor):
        if not v._rg:
            return v
        node = Node(IDENTITY, (None,), {}, None, (edge(v),), ())
        nodes.append(node)
        return attach(rec.wrap(v.data), node)
    if isinstance(v, (tuple, list)):
        items = [barriers(rec, a, nodes) for a in v]
        return type(v)(*items) if hasattr(v, "_fields") else type(v)(items)
    if isinstance(v, dict):
        return {k: barriers(rec, a, nodes) for k, a in v.items()}
    return v


def namespace_of(trees, what):
    """The Recorder of the first Tensor (or batched value) among the leaves of ``trees``,
    else of the first raw array's namespace; NumPy's when there are only Python numbers
    (``grad(f)(3.0)``)."""
    leaves = [plain(a) for a in pytree.leaves(list(trees))]
    for a in leaves:
        if isinstance(a, Tensor):
            return a._rec
    arrays = [a for a in leaves if a is not None and not isinstance(a, SCALARS)]
    try:
        if arrays:
            return recorder_of(*arrays)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None
    import numpy  # Python numbers only: NumPy's 0-d arrays

    return recorder_of(numpy.asarray(0.0))


def argnums_of(args, argnums, what):
    """``argnums`` as a tuple of indices into ``args`` (checked)."""
    n = len(args)
    nums = integers(what, "argnums", argnums)
    if not nums:
        raise ValueError(f"{what}: argnums is empty: nothing to differentiate")
    for i in nums:
        if not -n <= i < n:
            raise ValueError(f"{what}: argnums {argnums} out of range for {n} arguments")
    return tuple(i % n for i in nums)


def lift_constants(tree, rec):
    """The raw arrays of the arguments not differentiated, wrapped as constants of the
    same namespace, so that ``array_namespace(*args)`` inside ``f`` sees one namespace."""

    def lift(a):
        # a batched value is one already (a backend that recognises arrays by their
        # __array_namespace__ would take it for a raw array, and wrap it)
        if isinstance(a, (Tensor, Batched, *SCALARS)) or a is None:
            return a
        return versions.lend(rec.wrap(a)) if rec.backend.is_array(a) else a

    leaves, td = pytree.flatten(tree)
    lifted = [lift(a) for a in leaves]
    if all(a is b for a, b in zip(leaves, lifted)):
        return tree  # no raw array: the caller's object itself (a dataclass f may mutate)
    return pytree.unflatten(td, lifted)


def pair(xp, rec, a, b):
    """Re sum(a b): the bilinear pairing under which VJP rules are transposes (see
    registry.py), for the double-VJP tricks of forward mode and custom_jvp."""
    p = a * b
    if rec.is_complex(p.dtype):
        p = xp.real(p)
    return xp.sum(p)


def data(a):
    """The raw array of a Tensor; anything else as it is (a NumPy array's ``.data`` is its
    buffer, not an array)."""
    return a.data if isinstance(a, Tensor) else a


def plain(a):
    """A batched value's Tensor of all its examples; anything else as it is."""
    return a.value if isinstance(a, Batched) else a


def requires_grad(a):
    return isinstance(a, Tensor) and a.requires_grad


def unwrap(v):
    """A Tensor that needs no gradient as its raw array (a result handed back to a caller
    who gave raw arrays); one that requires grad stays a Tensor: a raw array would cut
    its graph silently."""
    return v.data if isinstance(v, Tensor) and not v.requires_grad else v


def in_kind(trees, result):
    """``result`` as the caller of a transform with arguments ``trees`` expects it: raw
    arrays if no Tensor (nor batched value) was among their leaves (same kind in, same
    kind out)."""
    if any(isinstance(leaf, (Tensor, Batched)) for leaf in pytree.leaves(list(trees))):
        return result
    return pytree.tree_map(unwrap, result)


def on_trees(core, f, argnums, what):
    """``core`` (a Jacobian transform of a function of arrays returning a tuple of
    arrays) on trees: the arguments picked by ``argnums`` are flattened to their leaves,
    all differentiated in one call of ``core``, and the output's leaves are its outputs.
    The result is a tree of the output's structure whose leaves are trees of the
    argument's, or tuples of them for a tuple ``argnums`` (JAX's rule)."""

    @functools.wraps(f)
    def wrapper(*args):
        nums = argnums_of(args, argnums, what)
        flats = [pytree.flatten(args[i]) for i in nums]
        rec = namespace_of(list(args), what)
        # a Python number is differentiated as a 0-d array of the call's namespace
        leaves = [
            rec.backend.asarray(leaf) if isinstance(leaf, SCALARS) else leaf
            for ls, _ in flats
            for leaf in ls
        ]
        lifted = [a if i in nums else lift_constants(a, rec) for i, a in enumerate(args)]
        structure = []

        def flat_f(*ls):
            full, k = list(lifted), 0
            for i, (ls0, td) in zip(nums, flats):
                full[i] = pytree.unflatten(td, ls[k : k + len(ls0)])
                k += len(ls0)
            outs, td = pytree.flatten(f(*full))
            structure.append(td)
            return tuple(_output_leaf(rec, o, what) for o in outs)

        if leaves:
            jac = core(flat_f)(*leaves)  # [output][leaf]
        else:  # nothing to differentiate: only the output's structure is needed
            jac = [[] for _ in flat_f()]
        per_output = []
        for row in jac:
            trees, k = [], 0
            for ls, td in flats:
                trees.append(pytree.unflatten(td, list(row[k : k + len(ls)])))
                k += len(ls)
            per_output.append(trees[0] if isinstance(argnums, int) else tuple(trees))
        return pytree.unflatten(structure[0], per_output)

    return wrapper


def _output_leaf(rec, o, what):
    """A leaf of a function's output as a Tensor: a constant (a raw array, a Python
    number) is wrapped, so its Jacobian is zeros of its shape."""
    if isinstance(o, (Tensor, Batched)):
        return o
    if isinstance(o, SCALARS) and not isinstance(o, bool):
        return rec.wrap(rec.backend.asarray(o))
    if o is not None and rec.backend.is_array(o):
        return rec.wrap(o)
    raise TypeError(
        f"{what}: the function must return arrays or Tensors (in dicts, lists, tuples, "
        f"dataclasses, registered nodes), got {type(o).__name__}"
    )
