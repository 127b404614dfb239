"""Version counters: how a write into a tensor's buffer is seen by the nodes that saved it.

A tensor's counter is made on first use and shared by its views: ``[n]`` when a node
made it to save the tensor, ``[n, saved, views]`` when a view or ``detach`` made it
(``saved``: whether a node has saved the buffer since; ``views``: weak references to
the views, ``detach()`` aliases and ``copy.copy`` handles, so a write that gives the
buffer a new value gives it to them too). See inplace.py for the writes themselves.
"""

from __future__ import annotations

import weakref

__all__ = ["saved_counter", "version_counter", "is_saved", "share_version", "bump", "lend",
           "is_lent", "ALIAS", "SAME", "Alias", "Same"]  # fmt: skip

_MODIFIED = [1]  # a version counter that never matches: marks a saved output as overwritten


def saved_counter(t):
    """``t``'s version counter, for a node that saves ``t``'s buffer."""
    c = t._version
    if c is None:
        c = t._version = [0]
    elif len(c) > 1:
        c[1] = True
    return c


def version_counter(t):
    """``t``'s version counter, for a tensor that shares ``t``'s buffer."""
    c = t._version
    if c is None:
        c = t._version = [0, False, []]
    elif len(c) == 1:
        c += [True, []]
    return c


def is_saved(t):
    """Whether a node may still need the values in ``t``'s buffer."""
    c = t._version
    return c is not None and (len(c) == 1 or c[1])


def lend(t):
    """Mark ``t``'s buffer as the caller's (an array a transform was given): a write into
    ``t``, a view or an alias of it gives them a copy first, in any grad mode, so ``f``
    never changes its caller's arrays (JAX's convention). A fourth entry of the counter,
    shared by the views; the copy has a counter of its own. Returns ``t``."""
    c = version_counter(t)
    if len(c) == 3:
        c.append(True)
    return t


def is_lent(t):
    """Whether ``t``'s buffer is a caller's (see :func:`lend`)."""
    c = t._version
    return c is not None and len(c) > 3


class Alias:
    """How a ``detach()`` alias is taken again after its base moved onto a new buffer:
    the base's value, cut from the graph (writes through it go into the shared buffer)."""

    def __call__(self, xp, a):
        return a.detach()


class Same:
    """How a ``copy.copy`` handle is taken again: the base itself (a view of all of it)."""

    def __call__(self, xp, a):
        return a


ALIAS, SAME = Alias(), Same()


def share_version(src, view, how=None):
    """``view`` may alias ``src``: one version counter, so writes through either are
    seen by nodes that saved the other. ``how(xp, a)`` takes the view of ``a`` (see
    inplace.py): a write that moves the family onto a new buffer takes the view again."""
    c = version_counter(src)
    view._version = c
    view._base = (src, how)
    if how is not None:
        views = c[2]
        views.append(weakref.ref(view))
        n = len(views)
        if n >= 64 and not n & (n - 1):  # dead references pruned: amortized O(1)
            views[:] = [r for r in views if r() is not None]


def bump(t):
    """Record a write into ``t``'s buffer: nodes that saved it (as an input, by version
    counter; as their output, found through ``t`` and the tensors it is a view of)
    will refuse to run."""
    c = t._version
    if c is not None:
        c[0] += 1
    while t is not None:
        node = t._node
        if node is not None and node.ans is not None:
            node.versions = node.versions + ((_MODIFIED, 0),)
        t = t._base[0] if t._base is not None else None
