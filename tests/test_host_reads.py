"""A tensor being differentiated, read as a Python number inside a transform
(``float(t)``, ``int(t)``, ``t.item()``...), cuts the graph: it warns (HostReadWarning,
at the user's line, once per line) and raises under ``detect_anomaly``. Outside
transforms, and for ``bool()`` (a branch), a read is silent."""

import warnings

import numpy as np
import pytest

import autodiff as ad

XP = ad.Autodiff(np)


def _recorded(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own filter: once per location
        out = fn(*args)
    return out, [w for w in caught if issubclass(w.category, ad.HostReadWarning)]


def _cut(w):
    # scikit-learn's GaussianNB: float(xp.sum(sample_weight)); the truth of
    # d/dw_i sum(w * sum(w)) is 2 sum(w) = 6 at w = [1, 2]; the cut graph gives 3.
    return XP.sum(w * float(XP.sum(w)))


TRANSFORMS = {
    "grad": lambda f, x: ad.grad(f)(x),
    "value_and_grad": lambda f, x: ad.value_and_grad(f)(x),
    "vjp": lambda f, x: ad.vjp(f, x)[1](np.asarray(1.0)),
    "jacrev": lambda f, x: ad.jacrev(f)(x),
    "jacfwd": lambda f, x: ad.jacfwd(f)(x),
    "jvp": lambda f, x: ad.jvp(f, (x,), (np.ones_like(x),)),
    "hessian": lambda f, x: ad.hessian(f)(x),
    "hvp": lambda f, x: ad.hvp(f, (x,), (np.ones_like(x),)),
}


def _by_float(w):
    return XP.sum(w * float(XP.sum(w)))


def _by_item(w):
    return XP.sum(w * XP.sum(w).item())


def _by_complex(w):
    return XP.sum(w * complex(XP.sum(w)).real)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
@pytest.mark.parametrize("f", [_by_float, _by_item, _by_complex], ids=lambda f: f.__name__)
def test_host_read_in_a_transform_warns_at_the_users_line(name, f):
    _, caught = _recorded(TRANSFORMS[name], f, np.array([1.0, 2.0]))
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert caught[0].filename == __file__  # the user's line, not the library's
    assert caught[0].lineno == f.__code__.co_firstlineno + 1
    assert "graph is cut" in str(caught[0].message)


def test_the_sklearn_cut_warns_once_per_line_and_its_value_shows_the_cut():
    x = np.array([1.0, 2.0])

    def loop():
        return [ad.grad(_cut)(x) for _ in range(3)]

    grads, caught = _recorded(loop)
    assert len(caught) == 1  # three calls, one line: one warning
    np.testing.assert_allclose(grads[0], [3.0, 3.0])  # the cut (truth: [6, 6])
    # the fix the warning suggests: keep it a tensor
    g = ad.grad(lambda w: XP.sum(w * XP.sum(w)))(x)
    np.testing.assert_allclose(g, [6.0, 6.0])


def test_int_of_a_differentiated_tensor_warns():
    def f(w):
        k = [0.0, 1.0, 2.0, 3.0][int(XP.sum(w))]
        return XP.sum(w) * k

    g, caught = _recorded(ad.grad(f), np.array([1.0, 1.0]))
    assert [str(w.message).split(" ")[0] for w in caught] == ["int()"]
    np.testing.assert_allclose(g, [2.0, 2.0])  # d/dw (sum(w) * 2) with k = 2 a constant


def test_host_read_raises_under_detect_anomaly_naming_the_conversion():
    with ad.detect_anomaly(), pytest.raises(RuntimeError, match=r"float\(\).*graph is cut"):
        ad.grad(_cut)(np.array([1.0, 2.0]))
    with ad.detect_anomaly(), pytest.raises(RuntimeError, match=r"item\(\)"):
        ad.grad(lambda w: XP.sum(w) * XP.sum(w).item())(np.array([1.0, 2.0]))


def test_logging_a_loss_after_backward_is_silent():
    w = XP.asarray([1.0, 2.0], requires_grad=True)
    loss = XP.sum(w * w)

    def log():
        loss.backward()
        return float(loss), loss.item(), int(loss)

    values, caught = _recorded(log)
    assert caught == [] and values == (5.0, 5.0, 5)
    np.testing.assert_allclose(w.grad.data, [2.0, 4.0])


def test_branches_and_reads_of_constants_in_a_transform_are_silent():
    def f(w):
        s = XP.sum(w)
        if s > 0:  # bool of a comparison: no gradient to lose
            s = s * 2.0
        if bool(s):  # a branch on a value
            s = s + 0.0
        scale = float(XP.sum(XP.asarray([1.0, 1.0])))  # a constant: nothing to cut
        return s * scale + float(w.detach()[0])

    g, caught = _recorded(ad.grad(f), np.array([1.0, 2.0]))
    assert caught == []
    np.testing.assert_allclose(g, [4.0, 4.0])  # d/dw (2 sum(w) * 2) = 4
