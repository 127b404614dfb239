"""conv1d, conv_transpose1d, max_pool1d, avg_pool1d, the adaptive average pools and
interpolate (and their modules) against PyTorch in float64, values and gradients, on
NumPy and array_api_strict, and their argument checks."""

import itertools

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F

from .nn_compare import compare

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
TF = torch.nn.functional
RNG = np.random.default_rng(11)

CASES = {}
for stride, padding, dilation, groups, bias in itertools.product(
    (1, 2), (0, 2), (1, 2), (1, 2), (True, False)
):
    x = RNG.standard_normal((2, 4, 9))
    w = RNG.standard_normal((6, 4 // groups, 3))
    inputs = [x, w] + ([RNG.standard_normal(6)] if bias else [])
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    CASES[f"conv1d {kw} bias={bias}"] = (
        lambda *a, kw=kw: F.conv1d(*a, **kw),
        lambda *a, kw=kw: TF.conv1d(*a, **kw),
        inputs,
    )
for padding, dilation in itertools.product(("same", "valid"), (1, 2)):
    CASES[f"conv1d padding={padding!r} dilation={dilation}"] = (
        lambda a, b, p=padding, d=dilation: F.conv1d(a, b, padding=p, dilation=d),
        lambda a, b, p=padding, d=dilation: TF.conv1d(a, b, padding=p, dilation=d),
        [RNG.standard_normal((2, 2, 8)), RNG.standard_normal((3, 2, 4))],
    )
CASES["conv1d unbatched"] = (
    lambda a, b: F.conv1d(a, b, padding=1),
    lambda a, b: TF.conv1d(a, b, padding=1),
    [RNG.standard_normal((2, 7)), RNG.standard_normal((3, 2, 3))],
)
for stride, padding, output_padding, dilation, groups in (
    (1, 0, 0, 1, 1), (2, 0, 1, 1, 1), (2, 1, 1, 1, 2), (3, 2, 2, 1, 1), (2, 1, 1, 2, 2),
    (1, 1, 0, 2, 1),
):  # fmt: skip
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
              dilation=dilation)  # fmt: skip
    CASES[f"conv_transpose1d {kw}"] = (
        lambda a, b, c, kw=kw: F.conv_transpose1d(a, b, c, **kw),
        lambda a, b, c, kw=kw: TF.conv_transpose1d(a, b, c, **kw),
        [RNG.standard_normal((2, 4, 5)), RNG.standard_normal((4, 6 // groups, 3)),
         RNG.standard_normal(6)],
    )  # fmt: skip

SIGNAL = (RNG.permutation(2 * 3 * 11).reshape(2, 3, 11) + 0.5) / 10.0  # distinct: no ties
for k, s, p, d, ceil in itertools.product((2, 3), (None, 2), (0, 1), (1, 2), (False, True)):
    kw = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil)
    CASES[f"max_pool1d {kw}"] = (
        lambda a, kw=kw: F.max_pool1d(a, **kw),
        lambda a, kw=kw: TF.max_pool1d(a, **kw),
        [SIGNAL],
    )
for k, s, p, ceil, include in itertools.product((2, 3), (None, 2), (0, 1), (False, True),
                                                 (True, False)):  # fmt: skip
    kw = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=include)
    CASES[f"avg_pool1d {kw}"] = (
        lambda a, kw=kw: F.avg_pool1d(a, **kw),
        lambda a, kw=kw: TF.avg_pool1d(a, **kw),
        [SIGNAL],
    )

IMAGE = RNG.standard_normal((2, 3, 7, 10))
for out in (1, 3, 5, 7, 11):
    CASES[f"adaptive_avg_pool1d {out}"] = (
        lambda a, o=out: F.adaptive_avg_pool1d(a, o),
        lambda a, o=out: TF.adaptive_avg_pool1d(a, o),
        [SIGNAL],
    )
for out in (1, 2, (3, 4), (7, 5), (4, None), (None, 3), (9, 13)):
    CASES[f"adaptive_avg_pool2d {out}"] = (
        lambda a, o=out: F.adaptive_avg_pool2d(a, o),
        lambda a, o=out: TF.adaptive_avg_pool2d(a, o),
        [IMAGE],
    )
CASES["adaptive_avg_pool2d unbatched"] = (
    lambda a: F.adaptive_avg_pool2d(a, (3, 4)),
    lambda a: TF.adaptive_avg_pool2d(a, (3, 4)),
    [IMAGE[0]],
)
RESIZE = [dict(size=(5, 4)), dict(size=13), dict(size=(7, 10)), dict(size=(14, 20)),
          dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=(0.5, 3)),
          dict(scale_factor=0.3), dict(size=(1, 1))]  # fmt: skip
for kw, (mode, corners) in itertools.product(
    RESIZE, (("nearest", None), ("bilinear", False), ("bilinear", True))
):
    kw = dict(kw, mode=mode, align_corners=corners)
    CASES[f"interpolate 2-D {kw}"] = (
        lambda a, kw=kw: F.interpolate(a, **kw),
        lambda a, kw=kw: TF.interpolate(a, **kw),
        [IMAGE],
    )
for kw, (mode, corners) in itertools.product(
    [
        dict(size=5),
        dict(size=23),
        dict(scale_factor=2.5),
        dict(scale_factor=0.6),
        dict(scale_factor=1.7, recompute_scale_factor=True),
        dict(scale_factor=2.1, recompute_scale_factor=False),
    ],
    (("nearest", None), ("linear", False), ("linear", True)),
):
    kw = dict(kw, mode=mode, align_corners=corners)
    CASES[f"interpolate 1-D {kw}"] = (
        lambda a, kw=kw: F.interpolate(a, **kw),
        lambda a, kw=kw: TF.interpolate(a, **kw),
        [SIGNAL],
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_torch(xp, name):
    ours, theirs, inputs = CASES[name]
    compare(xp, ours, theirs, inputs, rtol=1e-11, atol=1e-12)


def test_second_order_through_conv1d_and_interpolate():
    """create_graph: the 2-D rules are reused, so the gradient is differentiated again."""
    x, w = RNG.standard_normal((1, 2, 6)), RNG.standard_normal((2, 2, 3))
    xp = ad.Autodiff(np)
    a, b = xp.asarray(x, requires_grad=True), xp.asarray(w, requires_grad=True)
    y = F.interpolate(F.conv1d(a, b, padding=1), scale_factor=1.5, mode="linear")
    g = ad.grad(lambda t: xp.sum(F.conv1d(t, b, padding=1) ** 3))(a)
    xp.sum(g * g).backward()
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (tg,) = torch.autograd.grad((TF.conv1d(ta, tb, padding=1) ** 3).sum(), ta, create_graph=True)
    (tg * tg).sum().backward()
    np.testing.assert_allclose(np.asarray(b.grad.data), tb.grad.numpy(), rtol=1e-10)
    ref = TF.interpolate(TF.conv1d(ta, tb, padding=1), scale_factor=1.5, mode="linear")
    np.testing.assert_allclose(np.asarray(y.data), ref.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_interpolate_indices_over_many_sizes(mode):
    """Source indices (float32 for nearest, as torch) over many input/output sizes and
    scale factors: the output of an arange is its gather."""
    xp = ad.Autodiff(np)
    for n in range(1, 12):
        a = np.arange(float(n)).reshape(1, 1, n)
        for kw in [dict(size=o) for o in range(1, 26)] + [
            dict(scale_factor=f) for f in (0.4, 0.75, 1.1, 1.3, 1 / 3, 2.5, 3.0, 2.2)
        ]:
            if "scale_factor" in kw and int(n * kw["scale_factor"]) < 1:
                continue
            for corners in (None,) if mode == "nearest" else (False, True):
                ours = F.interpolate(xp.asarray(a), mode=mode, align_corners=corners, **kw)
                ref = TF.interpolate(torch.tensor(a), mode=mode, align_corners=corners, **kw)
                np.testing.assert_allclose(np.asarray(ours.data), ref.numpy(), rtol=0,
                                           atol=1e-13, err_msg=f"{n} {kw} {corners}")  # fmt: skip


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_2d_indices_over_many_sizes(mode):
    """torch's 2-D kernels copy an axis of unchanged size and (nearest) halve the index of
    a doubled one whatever the scale factor; its 1-D nearest kernel does neither."""
    xp = ad.Autodiff(np)
    for h, w in ((1, 4), (2, 3), (4, 4), (5, 2)):
        a = np.arange(float(h * w)).reshape(1, 1, h, w)
        for fs in itertools.product((1.0, 1.1, 2.0, 2.1, 0.75, 3.0), repeat=2):
            if min(int(h * fs[0]), int(w * fs[1])) < 1:
                continue
            for corners in (None,) if mode == "nearest" else (False, True):
                ours = F.interpolate(xp.asarray(a), scale_factor=fs, mode=mode,
                                     align_corners=corners)  # fmt: skip
                ref = TF.interpolate(torch.tensor(a), scale_factor=fs, mode=mode,
                                     align_corners=corners)  # fmt: skip
                np.testing.assert_allclose(
                    np.asarray(ours.data),
                    ref.numpy(),
                    rtol=0,
                    atol=1e-13,
                    err_msg=f"{h, w} {fs} {corners}",
                )


def test_vmap_and_jvp_go_through_the_compositions():
    xp = ad.Autodiff(np)
    x, w = RNG.standard_normal((3, 2, 7)), RNG.standard_normal((4, 2, 3))

    def f(t):
        y = F.conv1d(t, xp.asarray(w))  # unbatched (C, L) inside vmap
        return F.adaptive_avg_pool1d(F.interpolate(y[None], scale_factor=1.5, mode="linear"), 3)

    y = ad.vmap(f)(xp.asarray(x))
    t = torch.tensor(x)
    ref = TF.adaptive_avg_pool1d(
        TF.interpolate(TF.conv1d(t, torch.tensor(w)), scale_factor=1.5, mode="linear"), 3
    )
    np.testing.assert_allclose(np.asarray(y.data)[:, 0], ref.numpy(), rtol=1e-12)
    a = RNG.standard_normal((1, 2, 7, 5))
    _, tangent = ad.jvp(
        lambda v: F.interpolate(F.adaptive_avg_pool2d(v, (3, 2)), size=(5, 5), mode="bilinear"),
        (xp.asarray(a),),
        (xp.asarray(np.ones_like(a)),),
    )
    np.testing.assert_allclose(np.asarray(tangent.data), 1.0, rtol=1e-12)


def test_nearest_gathers_integer_inputs():
    a = np.arange(12).reshape(1, 1, 3, 4)
    ours = np.asarray(F.interpolate(ad.Autodiff(np).asarray(a), scale_factor=1.5).data)
    ref = TF.interpolate(torch.tensor(a, dtype=torch.float64), scale_factor=1.5).numpy()
    np.testing.assert_array_equal(ours, ref)
    assert ours.dtype == a.dtype


MODULES = {
    "Conv1d": (lambda t, **kw: t.Conv1d(4, 6, 3, stride=2, padding=1, groups=2, **kw),
               (2, 4, 9)),
    "Conv1d same dilation": (lambda t, **kw: t.Conv1d(3, 2, 4, padding="same", dilation=2, **kw),
                             (2, 3, 8)),
    "Conv1d no bias": (lambda t, **kw: t.Conv1d(3, 2, 1, bias=False, **kw), (2, 3, 5)),
    "ConvTranspose1d": (lambda t, **kw: t.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
                                                         output_padding=1, groups=2, **kw),
                        (2, 4, 5)),
    "MaxPool1d": (lambda t, **kw: t.MaxPool1d(3, 2, padding=1, ceil_mode=True), (2, 3, 10)),
    "AvgPool1d": (lambda t, **kw: t.AvgPool1d(2, padding=1, count_include_pad=False),
                  (2, 3, 7)),
    "AdaptiveAvgPool1d": (lambda t, **kw: t.AdaptiveAvgPool1d(4), (2, 3, 10)),
    "AdaptiveAvgPool2d": (lambda t, **kw: t.AdaptiveAvgPool2d((3, None)), (2, 3, 8, 5)),
    "Upsample nearest": (lambda t, **kw: t.Upsample(scale_factor=2), (2, 3, 4, 5)),
    "Upsample bilinear": (lambda t, **kw: t.Upsample(size=(7, 3), mode="bilinear",
                                                     align_corners=True), (2, 3, 4, 5)),
    "Upsample linear": (lambda t, **kw: t.Upsample(scale_factor=1.5, mode="linear"), (2, 3, 6)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(MODULES))
def test_module_matches_torch(xp, name):
    make, shape = MODULES[name]
    torch.manual_seed(0)
    theirs = make(torch.nn).double()
    has_params = len(list(theirs.parameters())) > 0
    ours = make(nn, xp=xp, dtype=xp.float64) if has_params else make(nn)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in theirs.named_parameters()]
    for (k, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert tuple(p.shape) == tuple(q.shape), k
    a = RNG.standard_normal(shape)
    x, t = xp.asarray(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, r = ours(x), theirs(t)
    np.testing.assert_allclose(np.asarray(y.data), r.detach().numpy(), rtol=1e-11, atol=1e-12)
    u = RNG.standard_normal(tuple(r.shape))
    xp.sum(y * xp.asarray(u)).backward()
    (r * torch.tensor(u)).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad.data), t.grad.numpy(), rtol=1e-11, atol=1e-12)
    for (k, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(np.asarray(p.grad.data), q.grad.numpy(), rtol=1e-11,
                                   atol=1e-12, err_msg=k)  # fmt: skip


def test_initialization_is_torchs_bound():
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in from weight.shape[1] * k as torch."""
    for m, fan in ((nn.Conv1d(4, 600, 5, groups=2), 2 * 5),
                   (nn.ConvTranspose1d(600, 4, 5, groups=2), 2 * 5)):  # fmt: skip
        w = np.asarray(m.weight.data)
        assert np.abs(w).max() <= 1 / np.sqrt(fan) and np.abs(w).max() > 0.9 / np.sqrt(fan)
    assert nn.Conv1d(2, 3, 3).weight.shape == (3, 2, 3)
    assert nn.ConvTranspose1d(2, 6, 3, groups=2).weight.shape == (2, 3, 3)
    assert nn.Conv1d(2, 3, 3).kernel_size == torch.nn.Conv1d(2, 3, 3).kernel_size


V, T = ValueError, TypeError
BAD = [
    (lambda xp: F.conv1d(xp.ones((1, 3, 5)), xp.ones((2, 2, 3))), V, "conv1d: expected 2 input"),
    (lambda xp: F.conv1d(xp.ones((1, 3, 5, 5)), xp.ones((2, 3, 3))), V, "conv1d: input must be"),
    (lambda xp: F.conv1d(xp.ones((1, 3, 5)), xp.ones((2, 3, 3, 1))), V, "conv1d: weight must"),
    (lambda xp: F.conv1d(xp.ones((1, 3, 5)), xp.ones((2, 3, 3)), stride=0), V,
     "conv1d: stride must be an int >= 1"),
    (lambda xp: F.conv1d(xp.ones((1, 3, 5)), xp.ones((2, 3, 3)), stride=1.5), T,
     "conv1d: stride must be an int"),
    (lambda xp: F.conv1d(xp.ones((1, 3, 5)), xp.ones((2, 3, 3)), padding=(1, 1)), V,
     "conv1d: padding must be an int or a tuple of one"),
    (lambda xp: F.conv1d(xp.ones((1, 3, 5)), xp.ones((2, 3, 3)), padding="full"), V,
     "conv1d: padding must be one of"),
    (lambda xp: F.conv1d(xp.ones((1, 3, 5)), xp.ones((2, 3, 3)), stride=2, padding="same"), V,
     "conv1d: padding='same' needs stride 1"),
    (lambda xp: F.conv1d(xp.ones((1, 3, 2)), xp.ones((2, 3, 3))), V, "conv1d: the window"),
    (lambda xp: F.conv1d(xp.ones((1, 4, 5)), xp.ones((2, 2, 3)), groups=0), V,
     "conv1d: groups must be an int >= 1"),
    (lambda xp: F.conv_transpose1d(xp.ones((1, 3, 4)), xp.ones((2, 1, 3))), V,
     "conv_transpose1d: expected 2 input channels"),
    (lambda xp: F.conv_transpose1d(xp.ones((1, 2, 4)), xp.ones((2, 1, 3)), output_padding=1),
     V, "conv_transpose1d: output_padding 1 must be smaller"),
    (lambda xp: F.max_pool1d(xp.ones((1, 1, 4)), 2, padding=2), V,
     "max_pool1d: padding 2 must be at most half"),
    (lambda xp: F.max_pool1d(xp.ones((1, 1, 4)), 0), V, "max_pool1d: kernel_size must be"),
    (lambda xp: F.max_pool1d(xp.ones((1, 1, 4)), 2, ceil_mode=1), T,
     "max_pool1d: ceil_mode must be True or False"),
    (lambda xp: F.max_pool1d(xp.ones((1, 1, 2)), 3, padding=0), V, "max_pool1d: the window"),
    (lambda xp: F.avg_pool1d(xp.ones((4,)), 2), V, "avg_pool1d: input must be 3-D"),
    (lambda xp: F.avg_pool1d(xp.ones((1, 1, 4)), 2, count_include_pad="no"), T,
     "avg_pool1d: count_include_pad must be True or False"),
    (lambda xp: F.adaptive_avg_pool1d(xp.ones((1, 1, 4)), 0), V,
     "adaptive_avg_pool1d: output_size must be an int >= 1"),
    (lambda xp: F.adaptive_avg_pool1d(xp.ones((1, 1, 4)), None), T,
     "adaptive_avg_pool1d: output_size must be an int"),
    (lambda xp: F.adaptive_avg_pool2d(xp.ones((1, 1, 4, 4)), (2, 2, 2)), V,
     "adaptive_avg_pool2d: output_size must be an int or a tuple of 2"),
    (lambda xp: F.adaptive_avg_pool2d(xp.ones((4, 4)), 2), V,
     "adaptive_avg_pool2d: input must be 4-D"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4))), V,
     "interpolate: give exactly one of size and scale_factor"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), size=2, scale_factor=2), V,
     "interpolate: give exactly one"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), size=2, mode="bicubic"), V,
     "interpolate: mode must be one of"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), size=2, align_corners=True), V,
     "interpolate: align_corners can only be set"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), size=2, mode="bilinear",
                              align_corners="yes"), T, "interpolate: align_corners must be"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4)), size=2, mode="bilinear"), V,
     "interpolate: mode 'bilinear' needs a 4-D input"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), size=(2, 2, 2)), V,
     "interpolate: size must be an int or a tuple of 2"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), size=0), V,
     "interpolate: size must be ints >= 1"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), size=2.0), T, "interpolate: size must be"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), scale_factor=-1.0), V,
     "interpolate: scale_factor must be a number > 0"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), scale_factor="2"), T,
     "interpolate: scale_factor must be a number"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4)), scale_factor=0.1), V,
     "interpolate: scale_factor .* leaves no output"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4, 4), dtype=xp.int64), size=2, mode="bilinear"),
     T, "interpolate: input must have a real floating dtype"),
    (lambda xp: F.adaptive_avg_pool2d(xp.ones((1, 1, 4, 4), dtype=xp.int64), 3), T,
     "adaptive_avg_pool2d: input must have a real floating dtype"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4)), size=2, antialias=True), V,
     "interpolate: antialias=True is not supported"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4)), size=2, recompute_scale_factor=True), V,
     "interpolate: recompute_scale_factor=True needs scale_factor"),
    (lambda xp: F.interpolate(xp.ones((1, 1, 4)), scale_factor=2, recompute_scale_factor=1), T,
     "interpolate: recompute_scale_factor must be True or False"),
    (lambda xp: F.conv1d([[1.0, 2.0]], xp.ones((1, 1, 1))), T,
     "conv1d: input must be an array or a Tensor, got list"),
    (lambda xp: F.max_pool1d(None, 2), T, "max_pool1d: input must be an array"),
    (lambda xp: F.adaptive_avg_pool2d([1.0], 2), T, "adaptive_avg_pool2d: input must be an array"),
    (lambda xp: F.interpolate((1.0,), size=2), T, "interpolate: input must be an array"),
    (lambda xp: nn.Conv1d(2, 3, 0), V, "Conv1d: kernel_size must be an int >= 1, got 0"),
    (lambda xp: nn.Conv1d(2, 3, 3, groups=2), V, "Conv1d: groups=2 must divide"),
    (lambda xp: nn.Conv1d(2, 3, 3, bias="no"), T, "Conv1d: bias must be True or False"),
    (lambda xp: nn.Conv1d(2, 3, 3, stride=2, padding="same"), V, "Conv1d: padding='same'"),
    (lambda xp: nn.Conv1d(2, 3, 3)(xp.ones((1, 3, 5), dtype=xp.float32)), V,
     "Conv1d: expected 2 input"),
    (lambda xp: nn.ConvTranspose1d(2, 3, 3, output_padding=2, stride=2), V,
     "ConvTranspose1d: output_padding"),
    (lambda xp: nn.MaxPool1d(2, stride=0), V, "MaxPool1d: stride must be an int >= 1"),
    (lambda xp: nn.AvgPool1d(2, count_include_pad=None), T, "AvgPool1d: count_include_pad"),
    (lambda xp: nn.AdaptiveAvgPool1d((2, 2)), V, "AdaptiveAvgPool1d: output_size"),
    (lambda xp: nn.AdaptiveAvgPool2d(-1), V, "AdaptiveAvgPool2d: output_size"),
    (lambda xp: nn.Upsample(size=2, mode="area"), V, "Upsample: mode must be one of"),
    (lambda xp: nn.Upsample(), V, "Upsample: give exactly one"),
    (lambda xp: nn.Upsample(size=3)(xp.ones((4, 4))), V, "Upsample: mode 'nearest' needs"),
]  # fmt: skip


@pytest.mark.parametrize("call, exc, match", BAD)
def test_bad_arguments_name_the_op(xp, call, exc, match):
    with pytest.raises(exc, match=match):
        call(xp)
