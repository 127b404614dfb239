"""Pytrees, JAX's rules: nested dicts, lists, tuples (named tuples too) and None, whose
leaves are arrays, Tensors or Python numbers.

``flatten(tree) -> (leaves, treedef)`` and ``unflatten(treedef, leaves)`` are inverses;
a dict's leaves come in sorted key order (as JAX), None holds no leaf. The transforms
flatten their arguments once, differentiate the leaves, and unflatten the result, so a
gradient has the structure of its argument.
"""

from __future__ import annotations

__all__ = ["flatten", "unflatten", "tree_map", "leaves"]

# A treedef is a nested tuple: LEAF, NONE, or (kind, meta, children).
LEAF, NONE = "*", None


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(tree):
    """(list of leaves, treedef): the leaves in JAX's order."""
    leaves = []
    # The user's structures are shallow: recursion depth is their nesting depth.
    return leaves, _flatten(tree, leaves)


def _flatten(x, leaves):
    if x is None:
        return NONE
    if isinstance(x, dict):
        try:
            keys = sorted(x)
        except TypeError:  # keys of mixed types: their insertion order
            keys = list(x)
        return ("dict", (type(x), tuple(keys)), tuple(_flatten(x[k], leaves) for k in keys))
    if isinstance(x, (list, tuple)):
        kind = type(x) if _is_namedtuple(x) else ("list" if isinstance(x, list) else "tuple")
        return ("seq", kind, tuple(_flatten(v, leaves) for v in x))
    leaves.append(x)
    return LEAF


def unflatten(treedef, leaves):
    """The tree of structure ``treedef`` holding ``leaves`` (in flatten's order)."""
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, _END) is not _END:
        raise ValueError("unflatten: more leaves than the structure holds")
    return out


_END = object()


def _unflatten(td, it):
    if td is NONE:
        return None
    if td == LEAF:
        v = next(it, _END)
        if v is _END:
            raise ValueError("unflatten: fewer leaves than the structure holds")
        return v
    kind, meta, children = td
    values = [_unflatten(c, it) for c in children]
    if kind == "dict":
        cls, keys = meta
        d = dict(zip(keys, values))
        return d if cls is dict else cls(d)
    if meta == "list":
        return values
    if meta == "tuple":
        return tuple(values)
    return meta(*values)  # a named tuple


def leaves(tree) -> list:
    """The leaves of ``tree``, in flatten's order."""
    return flatten(tree)[0]


def tree_map(f, tree, *rest):
    """``f`` applied leaf by leaf to ``tree`` and trees of the same structure."""
    flat, td = flatten(tree)
    others = []
    for r in rest:
        rflat, rtd = flatten(r)
        if rtd != td:
            raise ValueError(
                f"tree_map: the trees have different structures: {describe(td)} and {describe(rtd)}"
            )
        others.append(rflat)
    return unflatten(td, [f(*vs) for vs in zip(flat, *others)])


def describe(td) -> str:
    """A treedef as a short text, for error messages: ``{'b': *, 'w': *}``, ``(*, [*])``."""
    if td is NONE:
        return "None"
    if td == LEAF:
        return "*"
    kind, meta, children = td
    inner = [describe(c) for c in children]
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(meta[1], inner)) + "}"
    if meta == "list":
        return "[" + ", ".join(inner) + "]"
    return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
