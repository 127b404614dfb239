"""Pytrees, JAX's rules: nested dicts, lists, tuples (named tuples too), None,
dataclasses and registered classes, whose leaves are arrays, Tensors or Python numbers.

``flatten(tree) -> (leaves, treedef)`` and ``unflatten(treedef, leaves)`` are inverses
(also under JAX's names ``tree_flatten`` / ``tree_unflatten``, with ``tree_leaves``,
``tree_structure`` and ``tree_map``); a dict's leaves come in sorted key order (as
JAX), None holds no leaf. The transforms flatten their arguments once, differentiate
the leaves, and unflatten the result, so a gradient has the structure of its argument.

A class becomes a node by :func:`register_pytree_node` (JAX's signature), the
:func:`register_pytree_node_class` decorator, or :func:`register_dataclass` (static
fields kept out of the leaves). An unregistered dataclass is a node too (JAX requires
registration): its ``__init__`` fields are its children, in declaration order, and
``unflatten`` calls the class with them. A tree is rebuilt by calling its class, so
a named tuple, a dataclass or a registered class keeps its type::

    >>> import dataclasses
    >>> from autodiff import pytree
    >>> @dataclasses.dataclass
    ... class Params:
    ...     w: float
    ...     b: float
    >>> leaves, td = pytree.tree_flatten({"p": Params(1.0, 2.0), "n": None})
    >>> leaves
    [1.0, 2.0]
    >>> pytree.tree_unflatten(td, [3.0, 4.0])
    {'n': None, 'p': Params(w=3.0, b=4.0)}
    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> pytree.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
    ...                             lambda aux, ch: Pair(*ch))
    >>> pytree.tree_map(lambda v: 10 * v, Pair(1, [2])).b
    [20]
"""

from __future__ import annotations

import dataclasses

__all__ = ["flatten", "unflatten", "tree_map", "leaves", "tree_flatten", "tree_unflatten",
           "tree_leaves", "tree_structure", "register_pytree_node",
           "register_pytree_node_class", "register_dataclass"]  # fmt: skip

# A treedef is a nested tuple: LEAF, NONE, or (kind, meta, children) with kind "dict",
# "seq" (lists, tuples, named tuples) or "node" (registered classes and dataclasses,
# meta = (class, aux data)).
LEAF, NONE = "*", None

# class -> (flatten: x -> (children, aux), unflatten: (aux, children) -> x)
_NODES: dict = {}
# Types whose instances were found to be leaves (arrays, numbers...): a set lookup per
# leaf instead of the node tests, on every transform call's trees
_LEAVES: set = set()


def register_pytree_node(nodetype, flatten_func, unflatten_func):
    """Make instances of ``nodetype`` tree nodes (JAX's signature):
    ``flatten_func(x) -> (children, aux_data)`` and ``unflatten_func(aux_data, children)``
    rebuilding it; ``aux_data`` (what is not a child) is compared when two trees'
    structures are, so it must support ``==``.

    >>> from autodiff import pytree
    >>> class Box:
    ...     def __init__(self, v):
    ...         self.v = v
    >>> pytree.register_pytree_node(Box, lambda b: ((b.v,), None), lambda _, c: Box(*c))
    >>> pytree.tree_leaves([Box(1.0), Box(2.0)])
    [1.0, 2.0]
    """
    if not isinstance(nodetype, type):
        raise TypeError(f"register_pytree_node: expected a class, got {nodetype!r}")
    for name, fn in (("flatten_func", flatten_func), ("unflatten_func", unflatten_func)):
        if not callable(fn):
            raise TypeError(f"register_pytree_node: {name} must be callable")
    if nodetype in _NODES or nodetype in (dict, list, tuple, type(None)):
        raise ValueError(f"register_pytree_node: {nodetype.__qualname__} is a node already")
    _NODES[nodetype] = (flatten_func, unflatten_func)
    _LEAVES.discard(nodetype)


def register_pytree_node_class(cls):
    """Class decorator: ``cls`` is a node by its ``tree_flatten()`` method and its
    ``tree_unflatten(aux_data, children)`` classmethod (JAX's convention).

    >>> from autodiff import pytree
    >>> @pytree.register_pytree_node_class
    ... class Scaled:
    ...     def __init__(self, x, scale):
    ...         self.x, self.scale = x, scale
    ...     def tree_flatten(self):
    ...         return (self.x,), self.scale
    ...     @classmethod
    ...     def tree_unflatten(cls, scale, children):
    ...         return cls(*children, scale)
    >>> pytree.tree_map(lambda v: v + 1, Scaled(1.0, "s")).x
    2.0
    """
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype=None, data_fields=None, meta_fields=None):
    """Register a dataclass as a node whose ``data_fields`` are children and whose
    ``meta_fields`` are static (part of the structure, not leaves), JAX's signature;
    by default the fields marked ``metadata={"static": True}`` are static. Usable as
    a decorator. (An unregistered dataclass is a node with every field a child.)

    >>> import dataclasses
    >>> from autodiff import pytree
    >>> @pytree.register_dataclass
    ... @dataclasses.dataclass
    ... class Layer:
    ...     w: float
    ...     act: str = dataclasses.field(default="tanh", metadata={"static": True})
    >>> pytree.tree_leaves(Layer(0.5))
    [0.5]
    """
    if nodetype is None:
        return lambda cls: register_dataclass(cls, data_fields, meta_fields)
    if not dataclasses.is_dataclass(nodetype) or not isinstance(nodetype, type):
        raise TypeError(f"register_dataclass: expected a dataclass, got {nodetype!r}")
    fields = [f for f in dataclasses.fields(nodetype) if f.init]
    if meta_fields is None:
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    if data_fields is None:
        data_fields = [f.name for f in fields if f.name not in meta_fields]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if set(data_fields) & set(meta_fields):
        raise ValueError("register_dataclass: a field is both data and meta")

    def flatten_func(x):
        meta = tuple(getattr(x, n) for n in meta_fields)
        return tuple(getattr(x, n) for n in data_fields), meta

    def unflatten_func(meta, children):
        return nodetype(**dict(zip(data_fields, children)), **dict(zip(meta_fields, meta)))

    register_pytree_node(nodetype, flatten_func, unflatten_func)
    return nodetype


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _is_dataclass(x) -> bool:
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def children(x):
    """(kind, meta, children) of a node of a tree, or None for a leaf (None itself is a
    node with no children)."""
    if x is None:
        return "none", None, []
    if type(x) in _LEAVES:
        return None
    entry = _NODES.get(type(x))
    if entry is not None:
        kids, aux = entry[0](x)
        return "node", (type(x), aux), list(kids)
    if isinstance(x, dict):
        try:
            keys = sorted(x)
        except TypeError:  # keys of mixed types: their insertion order
            keys = list(x)
        return "dict", (type(x), tuple(keys)), [x[k] for k in keys]
    if isinstance(x, (list, tuple)):
        kind = type(x) if _is_namedtuple(x) else ("list" if isinstance(x, list) else "tuple")
        return "seq", kind, list(x)
    if _is_dataclass(x):
        names = tuple(f.name for f in dataclasses.fields(x) if f.init)
        return "node", (type(x), names), [getattr(x, n) for n in names]
    _LEAVES.add(type(x))
    return None


def flatten(tree, is_leaf=None):
    """(list of leaves, treedef): the leaves in JAX's order; ``is_leaf(x)`` true stops
    the descent at ``x`` (JAX's argument)."""
    leaves = []
    # The user's structures are shallow: recursion depth is their nesting depth.
    return leaves, _flatten(tree, leaves, is_leaf)


def _flatten(x, leaves, is_leaf):
    # The transforms' common trees first (a Tensor or array, a plain tuple or list of
    # them): no call to children() per leaf, 5% of a small ad.jvp (benchmarks/forward.py).
    if is_leaf is None:
        kind = type(x)
        if kind in _LEAVES:
            leaves.append(x)
            return LEAF
        if kind is tuple or kind is list:  # never registered nodes (see register_pytree_node)
            return ("seq", "tuple" if kind is tuple else "list",
                    tuple([_flatten(v, leaves, None) for v in x]))  # fmt: skip
    node = None if is_leaf is not None and is_leaf(x) else children(x)
    if node is None:
        leaves.append(x)
        return LEAF
    kind, meta, kids = node
    if kind == "none":
        return NONE
    return (kind, meta, tuple(_flatten(v, leaves, is_leaf) for v in kids))


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
    kind, meta, kids = td
    values = [_unflatten(c, it) for c in kids]
    if kind == "dict":
        cls, keys = meta
        d = dict(zip(keys, values))
        return d if cls is dict else cls(d)
    if kind == "node":
        cls, aux = meta
        entry = _NODES.get(cls)
        if entry is not None:
            return entry[1](aux, values)
        return cls(**dict(zip(aux, values)))  # a dataclass: aux is its field names
    if meta == "list":
        return values
    if meta == "tuple":
        return tuple(values)
    return meta(*values)  # a named tuple


def leaves(tree, is_leaf=None) -> list:
    """The leaves of ``tree``, in flatten's order."""
    return flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    """The treedef of ``tree`` (flatten's second result)."""
    return flatten(tree, is_leaf)[1]


def num_leaves(td) -> int:
    """How many leaves a tree of structure ``td`` holds."""
    if td == LEAF:
        return 1
    if td is NONE:
        return 0
    return sum(num_leaves(c) for c in td[2])


def tree_map(f, tree, *rest, is_leaf=None):
    """``f`` applied leaf by leaf to ``tree`` and trees of the same structure."""
    flat, td = flatten(tree, is_leaf)
    others = []
    for r in rest:
        rflat, rtd = flatten(r, is_leaf)
        if rtd != td:
            raise ValueError(
                f"tree_map: the trees have different structures: {describe(td)} and {describe(rtd)}"
            )
        others.append(rflat)
    return unflatten(td, [f(*vs) for vs in zip(flat, *others)])


# JAX's names
tree_flatten, tree_unflatten, tree_leaves = flatten, unflatten, leaves


def describe(td) -> str:
    """A treedef as a short text, for error messages: ``{'b': *, 'w': *}``, ``(*, [*])``."""
    if td is NONE:
        return "None"
    if td == LEAF:
        return "*"
    kind, meta, kids = td
    inner = [describe(c) for c in kids]
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(meta[1], inner)) + "}"
    if kind == "node":
        return f"{meta[0].__qualname__}(" + ", ".join(inner) + ")"
    if meta == "list":
        return "[" + ", ".join(inner) + "]"
    return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
