"""batch_norm, group_norm, rms_norm and their modules (BatchNorm1d/2d, InstanceNorm2d,
GroupNorm, RMSNorm) against PyTorch in float64: forward, running statistics and every
gradient over several training steps and in eval mode."""

import numpy as np
import pytest

from autodiff import nn
from autodiff.nn import functional as F

from .nn_compare import compare

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
TF = torch.nn.functional
RNG = np.random.default_rng(3)
TOL = {"rtol": 1e-10, "atol": 1e-10}


def _r(*shape):
    return RNG.standard_normal(shape) * 1.5 + 0.3


def _like(t, a):
    return t.__array_namespace__().asarray(a)


CASES = {}
for _shape in ((5, 3), (4, 3, 6), (2, 3, 4, 5)):
    _x, _w, _b = _r(*_shape), _r(3), _r(3)
    _m, _v = _r(3), RNG.uniform(0.5, 2.0, 3)
    CASES[f"batch_norm {_shape} training"] = (
        lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True),
        lambda a, w, b: TF.batch_norm(a, None, None, w, b, training=True),
        [_x, _w, _b],
    )
    CASES[f"batch_norm {_shape} training, no affine, eps=0.1"] = (
        lambda a: F.batch_norm(a, None, None, training=True, eps=0.1),
        lambda a: TF.batch_norm(a, None, None, training=True, eps=0.1),
        [_x],
    )
    CASES[f"batch_norm {_shape} eval"] = (
        lambda a, w, b, m=_m, v=_v: F.batch_norm(a, _like(a, m), _like(a, v), w, b),
        lambda a, w, b, m=_m, v=_v: TF.batch_norm(a, torch.tensor(m), torch.tensor(v), w, b),
        [_x, _w, _b],
    )
for _shape, _g in (((2, 6), 3), ((3, 6, 5), 2), ((2, 6, 3, 4), 6), ((2, 6, 3, 4), 1)):
    _x, _w, _b = _r(*_shape), _r(6), _r(6)
    CASES[f"group_norm {_shape} {_g} groups"] = (
        lambda a, w, b, g=_g: F.group_norm(a, g, w, b),
        lambda a, w, b, g=_g: TF.group_norm(a, g, w, b),
        [_x, _w, _b],
    )
    CASES[f"group_norm {_shape} {_g} groups, no affine, eps=0.1"] = (
        lambda a, g=_g: F.group_norm(a, g, eps=0.1),
        lambda a, g=_g: TF.group_norm(a, g, eps=0.1),
        [_x],
    )
for _shape, _norm in (((4, 6), (6,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4))):
    _x, _w = _r(*_shape), _r(*_norm)
    CASES[f"rms_norm {_shape} over {_norm}"] = (
        lambda a, w, n=_norm: F.rms_norm(a, n, w),
        lambda a, w, n=_norm: TF.rms_norm(a, n, w),
        [_x, _w],
    )
    CASES[f"rms_norm {_shape} over {_norm}, no weight, eps=0.1"] = (
        lambda a, n=_norm: F.rms_norm(a, n, eps=0.1),
        lambda a, n=_norm: TF.rms_norm(a, n, eps=0.1),
        [_x],
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_same_as_torch(xp, name):
    ours, theirs, inputs = CASES[name]
    compare(xp, ours, theirs, inputs, **TOL)


def test_batch_norm_updates_running_stats_as_torch(xp):
    x = _r(6, 3, 4)
    for momentum in (0.1, 0.5, 1.0):
        m, v = xp.asarray(_r(3)), xp.asarray(RNG.uniform(0.5, 2.0, 3))
        tm, tv = torch.tensor(np.asarray(m)), torch.tensor(np.asarray(v))
        y = F.batch_norm(xp.asarray(x), m, v, training=True, momentum=momentum)
        ty = TF.batch_norm(torch.tensor(x), tm, tv, training=True, momentum=momentum)
        np.testing.assert_allclose(np.asarray(y), ty.numpy(), **TOL)
        np.testing.assert_allclose(np.asarray(m), tm.numpy(), **TOL)
        np.testing.assert_allclose(np.asarray(v), tv.numpy(), **TOL)


def test_rms_norm_default_eps_is_the_dtypes_epsilon(xp):
    x = np.array([[1e-9, -2e-9, 3e-9]])
    for dtype, tdtype in ((xp.float64, torch.float64), (xp.float32, torch.float32)):
        ours = F.rms_norm(xp.asarray(x, dtype=dtype), (3,))
        theirs = TF.rms_norm(torch.tensor(x, dtype=tdtype), (3,))
        np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), rtol=1e-5)


# -- modules ----------------------------------------------------------------------------
MODULES = {
    "BatchNorm1d (N, C)": (lambda kw: nn.BatchNorm1d(3, **kw), lambda t: t.BatchNorm1d(3), (6, 3)),
    "BatchNorm1d (N, C, L)": (lambda kw: nn.BatchNorm1d(3, momentum=0.3, **kw),
                              lambda t: t.BatchNorm1d(3, momentum=0.3), (4, 3, 5)),
    "BatchNorm1d momentum=None": (lambda kw: nn.BatchNorm1d(3, momentum=None, **kw),
                                  lambda t: t.BatchNorm1d(3, momentum=None), (4, 3, 5)),
    "BatchNorm1d no affine": (lambda kw: nn.BatchNorm1d(3, affine=False, eps=0.1, **kw),
                              lambda t: t.BatchNorm1d(3, affine=False, eps=0.1), (5, 3)),
    "BatchNorm1d no running stats": (
        lambda kw: nn.BatchNorm1d(3, track_running_stats=False, **kw),
        lambda t: t.BatchNorm1d(3, track_running_stats=False), (4, 3, 2)),
    "BatchNorm2d": (lambda kw: nn.BatchNorm2d(3, **kw), lambda t: t.BatchNorm2d(3), (2, 3, 4, 5)),
    "BatchNorm2d momentum=None": (lambda kw: nn.BatchNorm2d(3, momentum=None, **kw),
                                  lambda t: t.BatchNorm2d(3, momentum=None), (2, 3, 3, 2)),
    "BatchNorm2d no running stats": (
        lambda kw: nn.BatchNorm2d(3, track_running_stats=False, affine=False, **kw),
        lambda t: t.BatchNorm2d(3, track_running_stats=False, affine=False), (2, 3, 3, 3)),
    "InstanceNorm2d": (lambda kw: nn.InstanceNorm2d(3, **kw), lambda t: t.InstanceNorm2d(3),
                       (2, 3, 4, 5)),
    "InstanceNorm2d unbatched": (lambda kw: nn.InstanceNorm2d(3, **kw),
                                 lambda t: t.InstanceNorm2d(3), (3, 4, 5)),
    "InstanceNorm2d affine, running stats": (
        lambda kw: nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.2, **kw),
        lambda t: t.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.2),
        (2, 3, 4, 3)),
    "GroupNorm": (lambda kw: nn.GroupNorm(2, 6, **kw), lambda t: t.GroupNorm(2, 6), (3, 6, 4)),
    "GroupNorm 2-D, no affine": (lambda kw: nn.GroupNorm(3, 6, affine=False, **kw),
                                 lambda t: t.GroupNorm(3, 6, affine=False), (4, 6)),
    "GroupNorm NCHW": (lambda kw: nn.GroupNorm(6, 6, eps=0.01, **kw),
                       lambda t: t.GroupNorm(6, 6, eps=0.01), (2, 6, 2, 3)),
    "RMSNorm": (lambda kw: nn.RMSNorm(5, **kw), lambda t: t.RMSNorm(5), (3, 4, 5)),
    "RMSNorm (4, 5), eps": (lambda kw: nn.RMSNorm((4, 5), eps=1e-3, **kw),
                            lambda t: t.RMSNorm((4, 5), eps=1e-3), (3, 4, 5)),
    "RMSNorm no weight": (lambda kw: nn.RMSNorm(5, elementwise_affine=False, **kw),
                          lambda t: t.RMSNorm(5, elementwise_affine=False), (2, 5)),
}  # fmt: skip


def _close(a, b, what):
    np.testing.assert_allclose(np.asarray(a.detach().data), b.detach().numpy(), err_msg=what,
                               **TOL)  # fmt: skip


def _same_state(ours, theirs):
    state = theirs.state_dict()
    assert sorted(ours.state_dict()) == sorted(state)
    for k, v in state.items():
        _close(ours.state_dict()[k], v, k)
        assert np.asarray(ours.state_dict()[k]).dtype == v.numpy().dtype, k


@pytest.mark.parametrize("name", list(MODULES))
def test_module_matches_torch_over_steps(xp, name):
    make, make_theirs, shape = MODULES[name]
    theirs = make_theirs(torch.nn).double()
    with torch.no_grad():  # parameters and statistics away from their initial values
        for v in theirs.state_dict().values():
            if v.is_floating_point():
                v.copy_(torch.tensor(RNG.uniform(0.5, 1.5, tuple(v.shape))))
    ours = make({"xp": xp, "dtype": xp.float64})
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})  # strict
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in theirs.named_parameters()]
    for step, training in enumerate((True, True, True, False, True, False)):
        ours.train(training)
        theirs.train(training)
        x = _r(*shape)
        u = RNG.standard_normal(shape)
        t = xp.asarray(x, requires_grad=True)
        tt = torch.tensor(x, requires_grad=True)
        out, ref = ours(t), theirs(tt)
        _close(out, ref, f"output, step {step}")
        xp.sum(out * xp.asarray(u)).backward()
        (ref * torch.tensor(u)).sum().backward()
        _close(t.grad, tt.grad, f"input gradient, step {step}")
        for (k, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
            _close(p.grad, tp.grad, f"gradient of {k}, step {step}")
        ours.zero_grad()
        theirs.zero_grad()
        _same_state(ours, theirs)


def test_batchnorm_buffers_and_modes(xp):
    m = nn.BatchNorm2d(4, xp=xp)
    assert [k for k, _ in m.named_buffers()] == ["running_mean", "running_var",
                                                 "num_batches_tracked"]  # fmt: skip
    assert m.num_batches_tracked.dtype == xp.int64 and m.num_batches_tracked.shape == ()
    x = xp.asarray(_r(2, 4, 3, 3), dtype=xp.float32)
    m(x)
    m(x)
    assert int(m.num_batches_tracked) == 2
    m.eval()
    before = np.asarray(m.running_mean).copy()
    m(x)
    assert int(m.num_batches_tracked) == 2
    np.testing.assert_array_equal(np.asarray(m.running_mean), before)
    m.reset_running_stats()
    assert int(m.num_batches_tracked) == 0
    np.testing.assert_array_equal(np.asarray(m.running_var), np.ones(4))
    free = nn.BatchNorm1d(4, track_running_stats=False, xp=xp)
    assert list(free.state_dict()) == ["weight", "bias"]
    assert free.running_mean is None


def test_errors(xp):
    x = xp.asarray(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="batch_norm.*running_mean"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match="batch_norm.*weight"):
        F.batch_norm(x, None, None, xp.asarray(np.ones(4)), training=True)
    with pytest.raises(ValueError, match="batch_norm.*more than 1 value"):
        F.batch_norm(xp.asarray(np.ones((1, 3))), None, None, training=True)
    with pytest.raises(TypeError, match="batch_norm.*training"):
        F.batch_norm(x, None, None, training=1)
    with pytest.raises(ValueError, match="batch_norm.*momentum"):
        F.batch_norm(x, None, None, training=True, momentum=1.5)
    with pytest.raises(ValueError, match="group_norm.*groups"):
        F.group_norm(x, 2)
    with pytest.raises(ValueError, match="group_norm.*bias"):
        F.group_norm(x, 3, None, xp.asarray(np.ones(2)))
    with pytest.raises(ValueError, match="rms_norm.*normalized_shape"):
        F.rms_norm(x, (3,))
    with pytest.raises(ValueError, match="rms_norm.*eps"):
        F.rms_norm(x, (4,), eps=-1.0)
    with pytest.raises(ValueError, match="BatchNorm2d.*4-D"):
        nn.BatchNorm2d(3, xp=xp, dtype="float64")(x)
    with pytest.raises(ValueError, match="BatchNorm1d.*channels"):
        nn.BatchNorm1d(4, xp=xp, dtype="float64")(x)
    with pytest.raises(ValueError, match="GroupNorm.*divisible"):
        nn.GroupNorm(4, 6, xp=xp)
    with pytest.raises(ValueError, match="InstanceNorm2d.*spatial"):
        nn.InstanceNorm2d(3, xp=xp)(xp.asarray(np.ones((2, 3, 1, 1))))
    with pytest.raises(TypeError, match="BatchNorm1d.*affine"):
        nn.BatchNorm1d(3, affine="yes", xp=xp)
    with pytest.raises(TypeError, match="RMSNorm.*normalized_shape"):
        nn.RMSNorm(2.5, xp=xp)
