"""A transformed function never changes the arrays it is given (JAX's convention): a write
inside ``f`` into its argument, a view or an alias of it, recorded or under ``no_grad``,
goes into a copy. The values are hand-derived; calling twice must give the same."""

import numpy as np
import pytest

import autodiff as ad


def _writes(xp):
    """Functions of x (shape (3,)) that write into x; each with, by hand, loss(x0),
    grad(x0) and loss(2 x0), for x0 = [1, 2, 3]."""

    def setitem(x):
        x[0] = x[0] * 2  # x = [2, 2, 3]
        return xp.sum(x * x)

    def iadd(x):
        x += 1  # recorded: d/dx sum((x + 1)^2) = 2 (x + 1)
        return xp.sum(x * x)

    def view(x):
        v = x[1:]
        v *= 10  # through a view into its base
        return xp.sum(x * x)

    def quiet(x):
        with ad.no_grad():
            x += 1  # not recorded: the gradient is 2 x at the new value, as torch
        return xp.sum(x * x)

    def alias(x):
        a = x.detach()
        a += 100  # a detach alias shares x's buffer (the write is not recorded)
        return xp.sum(x)

    return [
        (setitem, 17.0, [8.0, 4.0, 6.0], 68.0),
        (iadd, 29.0, [4.0, 6.0, 8.0], 83.0),
        (view, 1301.0, [2.0, 400.0, 600.0], 5204.0),
        (quiet, 29.0, [4.0, 6.0, 8.0], 83.0),
        (alias, 306.0, [1.0, 1.0, 1.0], 312.0),
    ]


def _kinds(xp):
    """The caller's array as raw (the backend's), a Tensor, and a Tensor requiring grad
    (a computed one: a leaf requiring grad can't be written)."""
    base = [1.0, 2.0, 3.0]
    return {
        "raw": lambda: xp.asarray(base, dtype=xp.float64).data,
        "tensor": lambda: xp.asarray(base, dtype=xp.float64),
        "computed": lambda: xp.asarray(base, dtype=xp.float64, requires_grad=True) * 1.0,
    }


def _np(a):
    return np.asarray(a.data if hasattr(a, "data") and not isinstance(a, np.ndarray) else a)


@pytest.mark.parametrize("kind", ["raw", "tensor", "computed"])
@pytest.mark.parametrize("which", range(5))
def test_grad_and_friends_leave_the_callers_array_alone(xp, kind, which):
    f, value, grad, _ = _writes(xp)[which]
    make = _kinds(xp)[kind]
    x = make()
    for _ in range(2):  # twice: the same answers (the first call changed nothing)
        g = ad.grad(f)(x)
        np.testing.assert_allclose(_np(g), grad, rtol=1e-15)
        v, g = ad.value_and_grad(f)(x)
        assert float(_np(v)) == value
        out, pull = ad.vjp(f, x)
        np.testing.assert_allclose(_np(pull(xp.asarray(1.0, dtype=xp.float64).data)[0]), grad)
        out, tangent = ad.jvp(f, (x,), (xp.ones(3, dtype=xp.float64).data,))
        assert float(_np(out)) == value and float(_np(tangent)) == pytest.approx(sum(grad))
        np.testing.assert_allclose(_np(ad.jacrev(f)(x)), grad)
        np.testing.assert_allclose(_np(ad.jacfwd(f)(x)), grad)
        np.testing.assert_array_equal(_np(x), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("kind", ["raw", "tensor", "computed"])
@pytest.mark.parametrize("which", range(5))
def test_vmap_leaves_the_callers_array_alone(xp, kind, which):
    """Two examples, the rows x0 and 2 x0: their values and per-example gradients."""
    f, value, grad, value2 = _writes(xp)[which]
    make = _kinds(xp)[kind]
    x = xp.stack([make(), make() * 2]) if kind != "raw" else np.stack([_np(make())] * 2)
    if kind == "raw":
        x = xp.asarray(x * np.array([[1.0], [2.0]])).data
    for _ in range(2):
        np.testing.assert_allclose(_np(ad.vmap(f)(x)), [value, value2])
        g = _np(ad.vmap(ad.grad(f))(x))
        np.testing.assert_allclose(g[0], grad)
        np.testing.assert_array_equal(_np(x), [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
