"""``vmap``: a function written for one example, run once on a whole batch.

Each mapped argument enters ``f`` as a :class:`~autodiff.engine.batching.Batched`
value (all the examples, presented as one); each op then runs by its batching rule
(the machinery and the fallback loop are in ``autodiff/engine/batching.py``, each op's
rule is registered with the op). Also here: what the other transforms need inside
vmap (``regroup``, ``merge``, ``batched_variable``) and custom rules called on batched
arguments (``custom_call``).
"""

from __future__ import annotations

import functools
import inspect

from .. import checks, pytree
from ..engine import versions
from ..engine.batching import Batched, active, enter, leave, peel, wrap_level
from ..engine.tensor import Tensor
from .common import borrowed, namespace_of

__all__ = ["vmap", "map_call", "regroup", "merge", "levels_of", "batched_variable",
           "custom_call"]  # fmt: skip

_SCALARS = (bool, int, float, complex)


# -- transforms inside vmap ---------------------------------------------------------------------
def regroup(x, inner, sizes):
    """``x`` (a Batched value, a Tensor) with its vmap levels ``inner`` (sizes ``sizes``) as
    plain leading axes, broadcast where ``x`` lacks one; its other levels stay batched:
    a Batched of those (axes: theirs, then ``inner``'s, then the example's) or, with none
    left, a plain Tensor. What a transform's graph, made inside vmap, is built on."""
    if isinstance(x, Batched):
        v, lv = x.value, x.levels
    else:
        v, lv = x, ()
    k = len(lv)
    ex = tuple(v.shape[k:])
    outer = tuple(level for level in lv if level not in inner)
    xp = v._rec.xp
    present = tuple(level for level in lv if level in inner)
    order = [lv.index(level) for level in outer + present]
    if order != list(range(k)):  # the other levels' axes first
        v = xp.permute_dims(v, tuple(order) + tuple(range(k, v.ndim)))
    have = {level: v.shape[i] for i, level in enumerate(outer + present)}
    head = tuple(have[level] for level in outer)
    lone = tuple(have.get(level, 1) for level in inner)
    if len(outer) + len(lone) != k or lone != tuple(sizes):
        v = xp.reshape(v, head + lone + ex)
        if lone != tuple(sizes):
            v = xp.broadcast_to(v, head + tuple(sizes) + ex)
    return Batched(v, outer) if outer else v


def merge(r, inner):
    """The inverse of :func:`regroup`: ``r`` (plain, or a Batched of other levels, whose
    leading plain axes are the levels ``inner``) as a Batched of all its levels."""
    if not isinstance(r, Batched):
        return Batched(r, tuple(inner)) if inner else r
    if not inner:
        return r
    v, outer = r.value, r.levels
    both = outer + tuple(inner)
    order = sorted(range(len(both)), key=lambda i: both[i])
    if order != list(range(len(both))):
        v = v._rec.xp.permute_dims(v, tuple(order) + tuple(range(len(both), v.ndim)))
    return Batched(v, tuple(both[i] for i in order))


def levels_of(x):
    return x.levels if isinstance(x, Batched) else ()


def batched_variable(x, wrap):
    """The value a transform differentiates, inside vmap: ``x`` batched over every running
    vmap (broadcast where it isn't), as a plain Tensor, and those levels. Each example
    then gets its own gradient (a primal shared by the examples would get their sum)."""
    stack = active()
    running = tuple(level for level, _ in stack)
    if isinstance(x, Batched):
        if not set(x.levels) <= set(running):
            raise ValueError("vmap: a batched value is used outside the vmap that made it")
    else:
        x = wrap(x)
    return regroup(x, running, tuple(size for _, size in stack)), running


# -- vmap -------------------------------------------------------------------------------------
def _spec_leaves(spec, tree, what, label):
    """One axis (int or None) per leaf of ``tree``, from ``spec``, a prefix of its structure."""
    if spec is None or isinstance(spec, int) and not isinstance(spec, bool):
        return [spec] * len(pytree.leaves(tree))
    s, t = pytree.children(spec), pytree.children(tree)
    if s is not None and t is not None and _same_node(s, t):
        return [a for sc, tc in zip(s[2], t[2]) for a in _spec_leaves(sc, tc, what, label)]
    raise ValueError(
        f"vmap: {what} {spec!r} is not a prefix of the structure of {label} (an int, None, "
        "or a dict / tuple / list / dataclass / registered node matching it, as JAX)"
    )


def _same_node(s, t):
    """Whether two nodes (``pytree.children``) match: dicts of the same keys, sequences
    (a list for a tuple too) of the same length, nodes of the same class."""
    (skind, smeta, skids), (tkind, tmeta, tkids) = s, t
    if skind != tkind or len(skids) != len(tkids):
        return False
    if skind == "dict":
        return smeta[1] == tmeta[1]
    if skind == "node":
        return smeta[0] is tmeta[0]
    return True


def custom_call(args, rebuild):
    """A custom_vjp / custom_jvp function called inside vmap on batched ``args``: the
    same kind of function over the whole batch, made by ``rebuild(axes, mapped)`` with
    its function, fwd and rule each ``mapped`` (vmapped) over the innermost vmap's axis
    (``axes``: 0 or None per argument), as JAX batches custom rules; so the user's rule
    is what differentiates it."""
    level = max(a.levels[-1] for a in args if type(a) is Batched)
    peeled = [peel(a, level) for a in args]
    axes = tuple(0 if mapped else None for _, mapped in peeled)
    inner = rebuild(axes, _mapped)
    return wrap_level(inner(*[a for a, _ in peeled]), level)


def _mapped(f, in_axes):
    """``vmap(f, in_axes)`` on the namespace of the arguments it is called with."""

    def call(*args):
        for leaf in pytree.leaves(list(args)):
            if isinstance(leaf, (Tensor, Batched)):
                rec = (leaf.value if type(leaf) is Batched else leaf)._rec
                break
        else:
            raise TypeError("vmap: a custom function's arguments hold no Tensor")
        return map_call(f, in_axes, 0, None, args, {}, rec)

    return call


def _names(f, count):
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [
        f"argument {i} ({names[i]})" if i < len(names) else f"argument {i}" for i in range(count)
    ]


def map_call(f, in_axes, out_axes, axis_size, args, kwargs, rec):
    """``vmap(f, in_axes, out_axes, axis_size)(*args, **kwargs)`` (see transforms.vmap)."""
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)  # as JAX: a list at the top is a tuple
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise ValueError(
                f"vmap: in_axes has {len(in_axes)} entries for {len(args)} positional "
                "arguments (give one per argument, or one int / None for all)"
            )
        specs = list(in_axes)
    elif in_axes is None or (isinstance(in_axes, int) and not isinstance(in_axes, bool)):
        specs = [in_axes] * len(args)
    else:
        raise TypeError(
            f"vmap: in_axes must be an int, None or a tuple of them (or of trees), got "
            f"{type(in_axes).__name__}"
        )
    labels = _names(f, len(args))
    flat, tds, axes, where = [], [], [], []
    for i, (a, spec) in enumerate(zip(args, specs)):
        leaves, td = pytree.flatten(a)
        flat.append(leaves)
        tds.append(td)
        axes.append(_spec_leaves(spec, a, "in_axes", labels[i]))
        where.append(labels[i])
    kw_leaves, kw_td = pytree.flatten(kwargs)  # keyword arguments: mapped over axis 0
    flat.append(kw_leaves)
    axes.append([0] * len(kw_leaves))
    where.append("a keyword argument")
    sizes = []
    for leaves, ax, label in zip(flat, axes, where):
        for j, (leaf, a) in enumerate(zip(leaves, ax)):
            if a is None:
                continue
            shape = getattr(leaf, "shape", None)
            if shape is None:
                raise TypeError(
                    f"vmap: {label} is mapped (in_axes {a}) but holds a "
                    f"{type(leaf).__name__}, not an array; give it in_axes None"
                )
            nd = len(shape)
            if not -nd <= a < nd:
                raise ValueError(
                    f"vmap: in_axes {a} is out of range for {label}, of shape {tuple(shape)}"
                )
            ax[j] = a % nd
            sizes.append((shape[a % nd], label, a, tuple(shape)))
    if not sizes:
        if axis_size is None:
            raise ValueError(
                "vmap: every in_axes is None (nothing is mapped): give axis_size= to say "
                "how many examples to make"
            )
        n = int(axis_size)
    else:
        n = sizes[0][0]
        if any(s[0] != n for s in sizes) or (axis_size is not None and axis_size != n):
            detail = "; ".join(f"{lab} axis {a} of shape {sh}: size {s}" for s, lab, a, sh in sizes)
            raise ValueError(f"vmap: the mapped axes have different sizes: {detail}")
    wrap_leaf = _lifter(rec)
    level = enter(n)
    try:
        new = []
        for leaves, ax in zip(flat, axes):
            new.append([_batch_leaf(wrap_leaf(x), a, level) if a is not None else wrap_leaf(x)
                        for x, a in zip(leaves, ax)])  # fmt: skip
        call_args = [
            a if all(x is y for x, y in zip(old, leaves)) else pytree.unflatten(td, leaves)
            for a, old, td, leaves in zip(args, flat, tds, new)
        ]  # an argument left as it is (unmapped, no raw array) is the caller's object
        call_kwargs = pytree.unflatten(kw_td, new[-1])
        out = f(*call_args, **call_kwargs)
        outs, out_td = pytree.flatten(out)
        if isinstance(out_axes, list):
            out_axes = tuple(out_axes)
        oaxes = _spec_leaves(out_axes, out, "out_axes", "the output")
        results = [_unbatch_leaf(o, a, level, n, rec) for o, a in zip(outs, oaxes)]
    finally:
        leave(level)
    raw = not any(
        isinstance(x, (Tensor, Batched)) for leaves in flat for x in leaves
    )  # raw arrays in, raw arrays out (as the other transforms)
    if raw:  # but a result that depends on a tensor requiring grad (f closes over a
        # parameter) stays a Tensor: a raw array would cut its graph silently
        results = [r.data if isinstance(r, Tensor) and not r.requires_grad else r for r in results]
    return pytree.unflatten(out_td, results)


def _lifter(rec):
    def lift(x):
        if isinstance(x, (Tensor, Batched)) or x is None or isinstance(x, _SCALARS):
            return x
        # lent: a write inside f copies first, so the caller's array never changes
        return versions.lend(rec.wrap(x)) if rec.backend.is_array(x) else x

    return lift


def _batch_leaf(x, a, level):
    """A mapped argument: its axis ``a`` (of one example, if it is batched already by an
    outer vmap) as the batch axis of ``level``."""
    if isinstance(x, Batched):
        k = len(x.levels)
        v = x.value
        if a:
            v = v._rec.xp.moveaxis(v, k + a, k)
        return Batched(v, x.levels + (level,))
    if not versions.is_lent(x):  # a caller's Tensor: itself never changes
        x = borrowed(x)
    if a:
        x = x._rec.xp.moveaxis(x, a, 0)
    return Batched(x, (level,))


def _unbatch_leaf(o, a, level, n, rec):
    """An output of the vmapped function, its batch axis of ``level`` at ``a``."""
    batched = isinstance(o, Batched) and level in o.levels
    if a is None:
        if batched:
            raise ValueError(
                "vmap: out_axes is None for an output that differs from example to example"
            )
        return o
    if batched:
        lv = o.levels
        r = o.value if len(lv) == 1 else Batched(o.value, lv[:-1])
    else:  # the same for every example: repeated n times
        if o is None:
            return None
        if not isinstance(o, (Tensor, Batched)):
            o = rec.xp.asarray(o) if not rec.backend.is_array(o) else rec.wrap(o)
        xp = rec.xp
        r = xp.broadcast_to(xp.expand_dims(o, axis=0), (n,) + tuple(o.shape))
    nd = r.ndim
    if not -nd <= a < nd:
        raise ValueError(f"vmap: out_axes {a} is out of range for an output of {nd - 1} axes")
    a %= nd
    return r if a == 0 else rec.xp.moveaxis(r, 0, a)


def vmap(f, in_axes=0, out_axes=0, axis_size=None):
    """``f`` mapped over a batch axis of its arguments, JAX's ``vmap``: ``f`` is written
    for one example and runs once, on all of them at once (each op by its batching rule,
    registered with the op; the machinery is ``autodiff/engine/batching.py``).

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
    checks.function("vmap", "f", f)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        rec = namespace_of(list(args) + list(kwargs.values()), "vmap")
        return map_call(f, in_axes, out_axes, axis_size, args, kwargs, rec)

    return wrapper
