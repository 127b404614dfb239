"""conv2d, conv_transpose2d, max_pool2d and avg_pool2d against PyTorch (float64)
over grids of arguments, and their input checks."""

import itertools

import numpy as np
import pytest

import autodiff as ad
from autodiff.nn import functional as F

from .nn_compare import compare

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
TF = torch.nn.functional
RNG = np.random.default_rng(3)

CONV = {}
for stride, padding, dilation, groups, bias in itertools.product(
    (1, 2), (0, 1, 2), (1, 2), (1, 2), (True, False)
):
    x = RNG.standard_normal((2, 4, 7, 6))  # 7 and 6: sizes that floor with stride 2
    w = RNG.standard_normal((6, 4 // groups, 3, 2))
    inputs = [x, w] + ([RNG.standard_normal(6)] if bias else [])
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    CONV[f"conv2d {kw} bias={bias}"] = (
        lambda *a, kw=kw: F.conv2d(*a, **kw),
        lambda *a, kw=kw: TF.conv2d(*a, **kw),
        inputs,
    )
for padding in ("same", "valid"):
    x, w = RNG.standard_normal((2, 2, 5, 6)), RNG.standard_normal((3, 2, 3, 2))
    CONV[f"conv2d padding={padding!r} dilation 2"] = (
        lambda a, b, p=padding: F.conv2d(a, b, padding=p, dilation=2),
        lambda a, b, p=padding: TF.conv2d(a, b, padding=p, dilation=2),
        [x, w],
    )
for stride, padding, output_padding, dilation, groups in (
    (1, 0, 0, 1, 1), (2, 0, 1, 1, 1), (2, 1, 1, 1, 2), (3, 2, 2, 1, 1), (2, 1, 1, 2, 2),
    (1, 1, 0, 2, 1),
):  # fmt: skip
    x = RNG.standard_normal((2, 4, 4, 3))
    w = RNG.standard_normal((4, 6 // groups, 3, 2))
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
              dilation=dilation)  # fmt: skip
    CONV[f"conv_transpose2d {kw}"] = (
        lambda a, b, c, kw=kw: F.conv_transpose2d(a, b, c, **kw),
        lambda a, b, c, kw=kw: TF.conv_transpose2d(a, b, c, **kw),
        [x, w, RNG.standard_normal(6)],
    )

IMAGE = (RNG.permutation(2 * 3 * 9 * 8).reshape(2, 3, 9, 8) + 0.5) / 100.0  # distinct: no ties
POOL = {}
for k, s, p, d, ceil in itertools.product((2, 3), (None, 2), (0, 1), (1, 2), (False, True)):
    kw = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil)
    POOL[f"max_pool2d {kw}"] = (
        lambda a, kw=kw: F.max_pool2d(a, **kw),
        lambda a, kw=kw: TF.max_pool2d(a, **kw),
        [IMAGE],
    )
for k, s, p, ceil, include in itertools.product((2, 3), (None, 2), (0, 1), (False, True),
                                                 (True, False)):  # fmt: skip
    kw = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=include)
    POOL[f"avg_pool2d {kw}"] = (
        lambda a, kw=kw: F.avg_pool2d(a, **kw),
        lambda a, kw=kw: TF.avg_pool2d(a, **kw),
        [IMAGE],
    )


@pytest.mark.parametrize("name", sorted(CONV))
def test_conv_same_as_torch(name):
    ours, theirs, inputs = CONV[name]
    compare(ad.Autodiff(np), ours, theirs, inputs, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("name", sorted(POOL))
def test_pool_same_as_torch(name):
    ours, theirs, inputs = POOL[name]
    compare(ad.Autodiff(np), ours, theirs, inputs, rtol=1e-12, atol=1e-14)


def test_max_pool_first_maximum_gets_the_gradient(xp):
    x = xp.asarray(np.array([[[[1.0, 3.0], [3.0, 2.0]]]]), requires_grad=True)
    xp.sum(F.max_pool2d(x, 2)).backward()
    np.testing.assert_array_equal(np.asarray(x.grad.data), [[[[0.0, 1.0], [0.0, 0.0]]]])


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
                                dict(kernel_size=(2, 3), dilation=2, ceil_mode=True),
                                dict(kernel_size=1), dict(kernel_size=(6, 7))])  # fmt: skip
def test_max_pool_without_a_graph_gives_the_same_values(xp, kw):
    """Recording nothing (no_grad, or an input that needs no gradient), max_pool2d runs
    its lean forward, without the first-maximum offsets its rule would read."""
    a = RNG.standard_normal((2, 3, 6, 7))
    with torch.no_grad():
        ref = TF.max_pool2d(torch.tensor(a), **kw).numpy()
    x = xp.asarray(a, requires_grad=True)
    y = F.max_pool2d(x, **kw)
    with ad.no_grad():
        z = F.max_pool2d(x, **kw)
    w = F.max_pool2d(xp.asarray(a), **kw)
    assert y.requires_grad and not z.requires_grad and not w.requires_grad
    for t in (y, z, w):
        np.testing.assert_array_equal(np.asarray(t.data), ref)


@pytest.mark.parametrize("size", [16, 17, 20])
def test_max_pool_over_more_than_256_window_offsets(xp, size):
    """Windows of 16 x 16 (256 offsets, a byte's worth) up to 20 x 20 (400) on a 20 x 20
    image: the gradient still goes to each window's first maximum (ties included), as
    torch's. A weighted sum, so that every window's gradient differs."""
    a = np.round(RNG.standard_normal((2, 3, 20, 20)), 1)  # rounded: ties
    o = 21 - size
    weights = np.arange(1.0, 1.0 + 2 * 3 * o * o).reshape(2, 3, o, o)
    x = xp.asarray(a, requires_grad=True)
    xp.sum(F.max_pool2d(x, size, stride=1) * xp.asarray(weights)).backward()
    t = torch.tensor(a, requires_grad=True)
    (TF.max_pool2d(t, size, stride=1) * torch.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad.data), t.grad.numpy())


def test_same_on_every_backend(xp):
    x, w = RNG.standard_normal((1, 2, 5, 5)), RNG.standard_normal((3, 2, 3, 3))
    ref = ad.Autodiff(np)
    out = []
    for ns in (xp, ref):
        a, b = ns.asarray(x, requires_grad=True), ns.asarray(w, requires_grad=True)
        y = F.max_pool2d(F.relu(F.conv2d(a, b, padding=1)), 2, ceil_mode=True)
        ns.sum(y * y).backward()
        out.append([np.asarray(t) for t in (y.data, a.grad.data, b.grad.data)])
    for u, v in zip(*out):
        np.testing.assert_allclose(u, v, rtol=1e-12)


def test_gradients_stay_on_device1():
    strict = pytest.importorskip("array_api_strict")
    xp = ad.Autodiff(strict)
    dev = strict.Device("device1")
    x = xp.asarray(RNG.standard_normal((1, 2, 4, 4)), device=dev, requires_grad=True)
    w = xp.asarray(RNG.standard_normal((2, 2, 3, 3)), device=dev, requires_grad=True)
    y = F.avg_pool2d(F.conv2d(x, w, padding=1), 2) + F.max_pool2d(x, 2, padding=1)[..., :2, :2]
    z = F.conv_transpose2d(y, w, stride=2)
    xp.sum(z * z).backward()
    assert x.grad.device == dev and w.grad.device == dev


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda xp: F.conv2d(xp.ones((1, 3, 5, 5)), xp.ones((2, 2, 3, 3))),
         "expected 2 input channels .* got 3"),
        (lambda xp: F.conv2d(xp.ones((1, 3, 5, 5)), xp.ones((2, 1, 3, 3)), groups=2),
         "groups=2 must divide"),
        (lambda xp: F.conv2d(xp.ones((1, 1, 2, 2)), xp.ones((1, 1, 3, 3))), "window .* larger"),
        (lambda xp: F.conv2d(xp.ones((1, 5, 5)), xp.ones((1, 1, 3, 3))), "4-D"),
        (lambda xp: F.max_pool2d(xp.ones((1, 1, 2, 2)), 3), "padding|larger"),
        (lambda xp: F.avg_pool2d(xp.ones((1, 1, 4, 4)), 2, padding=2), "padding"),
        (lambda xp: F.conv_transpose2d(xp.ones((1, 3, 4, 4)), xp.ones((2, 1, 3, 3))),
         "expected 2 input channels"),
    ],
)  # fmt: skip
def test_bad_input_names_the_op(xp, call, match):
    with pytest.raises(ValueError, match=match):
        call(xp)
