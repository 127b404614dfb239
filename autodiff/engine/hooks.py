"""Tensor hooks: ``register_hook``, ``retain_grad`` and the handles that remove them.

A leaf keeps its hooks on itself (``_hooks``); a computed tensor's hooks live on the
node that made it, by output index (``Node.hooks``), and the backward pass runs them on
that output's complete gradient (``hooks_of_node`` is empty while no node has any, so a
pass tests one local per node).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from itertools import count

from .. import checks
from .grad_mode import enable_grad, no_grad

__all__ = ["RemovableHandle", "Hooks", "register_hook", "retain_grad", "retains_grad",
           "hooked_nodes", "node_hooks", "run_hooks"]  # fmt: skip

_lock = threading.Lock()


class RemovableHandle:
    """What ``register_hook`` and the module hooks return: ``remove()`` unregisters the
    hook (again: nothing); a context manager that removes it on exit, as torch's."""

    __slots__ = ("id", "_table")
    _ids = count().__next__

    def __init__(self, table, fn):
        self.id = RemovableHandle._ids()
        table[self.id] = fn
        self._table = weakref.ref(table)  # the handle does not keep the hooks alive

    def remove(self):
        table = self._table()
        if table is not None:
            table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    def __repr__(self):
        return f"<RemovableHandle {self.id}>"


class Hooks:
    """The hooks of one tensor: ``fns`` ({handle id: fn}, in registration order) and, for
    a computed tensor after ``retain_grad()``, ``retain``: a weak reference to it."""

    __slots__ = ("fns", "retain")

    def __init__(self):
        self.fns = OrderedDict()  # weak-referenceable, unlike dict
        self.retain = None


# Nodes with tensor hooks: while there is none, a pass tests one local per node.
hooked_nodes = weakref.WeakSet()


def _hooks_of(t, make):
    """The Hooks of tensor ``t`` (on the leaf itself, or on its node by output index);
    made if ``make``, else None when it has none."""
    node = t._node
    if node is None:
        h = getattr(t, "_hooks", None)
        if h is None and make:
            h = t._hooks = Hooks()
        return h
    table = getattr(node, "hooks", None)
    if table is None:
        if not make:
            return None
        table = node.hooks = {}
        with _lock:
            hooked_nodes.add(node)
    h = table.get(t._index)
    if h is None and make:
        h = table[t._index] = Hooks()
    return h


def register_hook(t, fn):
    """``t.register_hook(fn)``; see Tensor.register_hook."""
    checks.function("register_hook", "hook", fn)
    if not t._rg:
        raise RuntimeError(
            "register_hook: the tensor does not require grad, so no gradient will reach "
            "the hook (make it a leaf with requires_grad=True, or compute it from one)"
        )
    return RemovableHandle(_hooks_of(t, True).fns, fn)


def retain_grad(t):
    """``t.retain_grad()``; see Tensor.retain_grad."""
    if not t._rg:
        raise RuntimeError(
            "retain_grad: the tensor does not require grad, so it gets no gradient to keep"
        )
    if t._node is not None:  # a leaf keeps its gradient anyway
        _hooks_of(t, True).retain = weakref.ref(t)


def retains_grad(t):
    """Whether ``retain_grad()`` was called on the computed tensor ``t``."""
    if t._node is None:
        return False
    h = _hooks_of(t, False)
    return h is not None and h.retain is not None and h.retain() is t


def replacement(rec, r, like, fn):
    """The gradient a hook returned, checked against the one it got (``like``)."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    if not isinstance(r, rec.cls) and not rec.backend.is_array(r):
        raise TypeError(
            f"register_hook: hook '{name}' returned {type(r).__name__}; a hook returns None "
            "or a replacement gradient: a Tensor of the same namespace"
        )
    if r.shape != like.shape:
        raise ValueError(
            f"register_hook: hook '{name}' changed the gradient's shape from {like.shape} "
            f"to {r.shape}"
        )
    if r.dtype != like.dtype:
        raise TypeError(
            f"register_hook: hook '{name}' changed the gradient's dtype from {like.dtype} "
            f"to {r.dtype}"
        )
    return r


# -- running them, inside a backward pass --------------------------------------------------
def node_hooks(run, node, g):
    """``g``, the complete gradient of ``node`` in the pass ``run`` (one slot per output of
    a MultiNode), after the hooks of its outputs (the same object if none replaced it)."""
    table = node.hooks
    if node.outs is None:
        h = table.get(0)
        return g if h is None else run_hooks(run, h, g, True)
    slots = list(g)
    for index, h in table.items():
        if slots[index] is not None:
            slots[index] = run_hooks(run, h, slots[index], True)
    return slots if any(a is not b for a, b in zip(slots, g)) else g


def run_hooks(run, hooks, g, internal):
    """``g`` after a tensor's ``hooks``, each given a Tensor of the namespace in PyTorch's
    convention (``internal``: ``g`` is in the rules', the conjugate, for complex values)
    and free to return a replacement; a retained gradient goes to the pass's commit()
    with the leaves'."""
    rec, xp, create = run.rec, run.xp, run.create
    fns = list(hooks.fns.values())
    if fns:
        conj = internal and rec.is_complex(g.dtype)
        v = xp.conj(g) if conj else g
        if not create:
            # a hook may keep what it got: a leaf reached by this array gets a copy
            run.mine.pop(id(g), None)
            run.handed[id(g)] = g
            v = rec.wrap(v)
        t = v
        with enable_grad() if create else no_grad():  # as torch: recorded if create
            for fn in fns:
                r = fn(t)
                if r is not None:
                    r = replacement(rec, r, v, fn)
                    t = r if isinstance(r, rec.cls) else rec.wrap(r)
        if t is not v:
            if not create:
                t = t.data
                run.handed[id(t)] = t
            g = xp.conj(t) if conj else t
    if hooks.retain is not None:
        target = hooks.retain()
        if target is not None:
            run.accumulate_leaf(target, g)  # as a leaf's: handed over by commit()
    return g
