"""Valid but unusual input (issue 17): empty axes, infinities, rules that must not read
the cotangent of a structural zero. Each case against torch.autograd."""

import warnings

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn, optim
from autodiff.nn import functional as F

torch = pytest.importorskip("torch", reason="the comparisons need torch")


def _np(t):
    return np.asarray(t.detach()) if hasattr(t, "detach") else np.asarray(t)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (lambda x: F.logsumexp(x, axis=1), lambda t: torch.logsumexp(t, dim=1)),
        (lambda x: F.softmax(x, axis=1), lambda t: torch.softmax(t, dim=1)),
        (lambda x: F.log_softmax(x, axis=1), lambda t: torch.log_softmax(t, dim=1)),
    ],
    ids=["logsumexp", "softmax", "log_softmax"],
)
def test_softmax_family_over_a_length_0_axis(xp, ours, theirs):
    x = xp.asarray(np.zeros((2, 0)), requires_grad=True)
    t = torch.zeros((2, 0), dtype=torch.float64, requires_grad=True)
    y, ty = ours(x), theirs(t)
    np.testing.assert_array_equal(_np(y), ty.detach().numpy())  # logsumexp: -inf, as torch
    xp.sum(y).backward()
    ty.sum().backward()
    assert x.grad.shape == (2, 0) and t.grad.shape == (2, 0)


def test_prod_whose_kept_axes_have_size_0(xp):
    x = xp.asarray(np.zeros((0, 3)), requires_grad=True)
    y = xp.prod(x, axis=1)
    assert y.shape == (0,)
    xp.sum(y).backward()
    assert x.grad.shape == (0, 3)


def test_var_of_nothing_is_nan_with_an_empty_gradient(xp):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's mean of empty
        x = xp.asarray(np.zeros((0,)), requires_grad=True)
        v = xp.var(x)
        v.backward()
        assert np.isnan(float(v)) and x.grad.shape == (0,)
        # one element with correction=1: NaN, and a NaN gradient, as torch
        x = xp.asarray(np.array([1.0]), requires_grad=True)
        xp.var(x, correction=1).backward()
    t = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    t.var(correction=1).backward()
    np.testing.assert_array_equal(_np(x.grad), t.grad.numpy())


def test_logsumexp_of_a_row_holding_inf(xp):
    a = np.array([[np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [0.5, 1.0, -2.0]])
    x = xp.asarray(a, requires_grad=True)
    y = F.logsumexp(x, axis=1)
    t = torch.tensor(a, requires_grad=True)
    ty = torch.logsumexp(t, dim=1)
    np.testing.assert_allclose(_np(y), ty.detach().numpy())  # inf, -inf, finite
    xp.sum(y * xp.asarray(np.array([1.0, 1.0, 2.0]))).backward()
    (ty * torch.tensor([1.0, 1.0, 2.0], dtype=torch.float64)).sum().backward()
    # [nan, 0, 0] (not NaN everywhere) and the softmax otherwise, as torch; the row of
    # -inf gets zeros (our convention, DESIGN.md; torch gives NaN there)
    g = _np(x.grad)
    np.testing.assert_allclose(g[[0, 2]], t.grad.numpy()[[0, 2]])
    np.testing.assert_array_equal(g[1], 0.0)


def _atan2_of_zeros(m, a):
    """A loss whose cotangent is NaN where ``a`` is 0: atan2 has no derivative at (0, 0)."""
    return m.sum(m.atan2(a * 0.0, a))


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (lambda xp, a: xp.linalg.cholesky(a), lambda t: torch.linalg.cholesky(t)),
        (lambda xp, a: xp.linalg.cholesky(a, upper=True),
         lambda t: torch.linalg.cholesky(t, upper=True)),
        (lambda xp, a: xp.linalg.qr(a)[1], lambda t: torch.linalg.qr(t)[1]),
        (lambda xp, a: xp.tril(a), lambda t: torch.tril(t)),
    ],
    ids=["cholesky", "cholesky-upper", "qr-R", "tril"],
)  # fmt: skip
def test_structural_zeros_do_not_read_their_cotangent(xp, ours, theirs):
    a0 = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    a = xp.asarray(a0, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _atan2_of_zeros(xp, ours(xp, a)).backward()
    t = torch.tensor(a0, requires_grad=True)
    _atan2_of_zeros(torch, theirs(t)).backward()
    np.testing.assert_allclose(_np(a.grad), t.grad.numpy(), atol=1e-12)
    assert np.all(np.isfinite(_np(a.grad)))


# -- nonsense refused, with the op (or module) and the argument named ------------------
def _x(xp):
    return xp.asarray(np.random.default_rng(0).standard_normal((1, 2, 6, 6)))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda xp, x, w: F.conv2d(x, w, stride=0), "conv2d: stride must be an int >= 1, got 0"),
        (lambda xp, x, w: F.conv2d(x, w, stride=-1), "conv2d: stride must be an int >= 1"),
        (lambda xp, x, w: F.conv2d(x, w, padding=-1), "conv2d: padding must be an int >= 0"),
        (lambda xp, x, w: F.conv2d(x, w, dilation=0), "conv2d: dilation must be an int >= 1"),
        (lambda xp, x, w: F.max_pool2d(x, 0), "max_pool2d: kernel_size must be an int >= 1"),
        (lambda xp, x, w: F.max_pool2d(x, 2, stride=-1), "max_pool2d: stride must be an int >= 1"),
        (lambda xp, x, w: F.avg_pool2d(x, 2, stride=-1), "avg_pool2d: stride must be an int >= 1"),
        (lambda xp, x, w: nn.Linear(-1, 2), "Linear: in_features must be an int >= 0"),
        (lambda xp, x, w: nn.Conv2d(2, 3, 0), "Conv2d: kernel_size must be an int >= 1"),
        (lambda xp, x, w: nn.Conv2d(2, 3, 3, groups=0), "Conv2d: groups must be an int >= 1"),
        (lambda xp, x, w: nn.GRU(3, 0), "GRU: hidden_size must be an int >= 1"),
        (lambda xp, x, w: nn.Embedding(-2, 3), "Embedding: num_embeddings must be"),
        (lambda xp, x, w: nn.MultiheadAttention(4, 0), "MultiheadAttention: num_heads must be"),
    ],
)
def test_bad_geometry_is_a_value_error_naming_op_and_argument(xp, call, match):
    x, w = _x(xp), xp.asarray(np.ones((3, 2, 3, 3)))
    with pytest.raises(ValueError, match=match):
        call(xp, x, w)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: optim.Adam([p], lr="0.1"), "Adam: lr must be a number, got '0.1'"),
        (lambda p: optim.SGD([p], lr=0.1, momentum="0.9"), "SGD: momentum must be a number"),
        (lambda p: optim.Adam([p], betas=(0.9, "x")), r"Adam: betas\[1\] must be a number"),
        (lambda p: optim.AdamW([p], amsgrad="yes"), "AdamW: amsgrad must be True or False"),
    ],
)
def test_optimizer_hyper_parameters_of_the_wrong_type(xp, make, match):
    p = xp.asarray(np.ones(2), requires_grad=True)
    with pytest.raises(TypeError, match=match):
        make(p)
    optim.Adam([p], lr=1e-3, betas=[0.9, 0.99], amsgrad=1)  # what torch takes too


def _sgd(xp):
    return optim.SGD([xp.asarray(np.ones(2), requires_grad=True)], lr=0.1)


# Schedules, clipping, transforms, creation and backward: one shared check each
# (autodiff.checks), a TypeError for the wrong type, a ValueError for the wrong value.
@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda xp: optim.StepLR(_sgd(xp), 2, gamma="a"), TypeError, "StepLR: gamma must be"),
        (lambda xp: optim.StepLR(_sgd(xp), 2.5), TypeError, "StepLR: step_size must be an int"),
        (lambda xp: optim.StepLR(_sgd(xp), 0), ValueError, "StepLR: step_size must be an int >= 1"),
        (lambda xp: optim.CosineAnnealingLR(_sgd(xp), 5, eta_min=-1.0), ValueError, "eta_min"),
        (lambda xp: optim.LinearLR(_sgd(xp), total_iters=-1), ValueError, "LinearLR: total_iters"),
        (
            lambda xp: optim.LinearLR(_sgd(xp), start_factor=0),
            ValueError,
            r"start_factor .*\(0, 1\]",
        ),
        (lambda xp: optim.LambdaLR(_sgd(xp), 3), TypeError, "LambdaLR: lr_lambda must be callable"),
        (lambda xp: optim.StepLR(_sgd(xp), 2, last_epoch="0"), TypeError, "StepLR: last_epoch"),
        (
            lambda xp: optim.clip_grad_norm_(_params(xp), "a"),
            TypeError,
            "clip_grad_norm_: max_norm",
        ),
        (
            lambda xp: optim.clip_grad_norm_(_params(xp), -1.0),
            ValueError,
            "max_norm must be a number >= 0",
        ),
        (lambda xp: optim.clip_grad_norm_(_params(xp), 1.0, "fro"), TypeError, "norm_type"),
        (
            lambda xp: optim.clip_grad_norm_([np.ones(2)], 1.0),
            TypeError,
            "parameters must be Tensors",
        ),
        (lambda xp: ad.grad(xp.sum, argnums="a")(xp.ones(2)), TypeError, "grad: argnums must be"),
        (lambda xp: ad.grad(xp.sum, argnums=())(xp.ones(2)), ValueError, "grad: argnums is empty"),
        (lambda xp: ad.grad(xp.sum, has_aux=True)(xp.ones(2)), TypeError, "has_aux=True .* a pair"),
        (
            lambda xp: ad.jvp(xp.sin, xp.ones(2), xp.ones(2)),
            TypeError,
            "jvp: primals must be a tuple",
        ),
        (
            lambda xp: ad.jvp(xp.sin, (xp.ones(2),), (xp.ones(3),)),
            ValueError,
            r"jvp: tangents\[0\] has shape \(3,\)",
        ),
        (lambda xp: ad.save({}, 3), TypeError, "save: path must be a str or os.PathLike"),
        (lambda xp: ad.load(None), TypeError, "load: path must be a str or os.PathLike"),
        (
            lambda xp: xp.zeros(2, requires_grad="yes"),
            TypeError,
            "zeros: requires_grad must be True or False",
        ),
        (
            lambda xp: xp.sum(_params(xp)[0]).backward(create_graph=1),
            TypeError,
            "backward: create_graph",
        ),
        (
            lambda xp: xp.sum(_params(xp)[0]).backward(retain_graph="no"),
            TypeError,
            "backward: retain_graph",
        ),
    ],
)
def test_bad_arguments_of_schedules_transforms_and_backward(xp, call, error, match):
    with pytest.raises(error, match=match):
        call(xp)


def _params(xp):
    p = xp.asarray(np.array([3.0, 4.0]), requires_grad=True)
    p.grad = xp.asarray(np.array([3.0, 4.0]))
    return [p]


def test_the_valid_edges_of_the_same_arguments_work(xp):
    # torch's spellings and edge values: an 'inf' norm, total_iters=0, retain_graph=None
    (p,) = _params(xp)
    total = optim.clip_grad_norm_([p], 1.0, norm_type="inf")
    assert float(total) == 4.0
    np.testing.assert_allclose(np.asarray(p.grad), np.array([3.0, 4.0]) / (4.0 + 1e-6))
    opt = _sgd(xp)
    sched = optim.LinearLR(opt, start_factor=0.5, total_iters=0)
    for _ in range(2):
        opt.step()
        sched.step()
    assert sched.get_last_lr() == [0.05]  # torch keeps start_factor * lr when total_iters=0
    x = xp.asarray(np.array([1.0, 2.0]), requires_grad=True)
    y = xp.sum(x * x)
    y.backward(retain_graph=None)
    np.testing.assert_allclose(np.asarray(x.grad), [2.0, 4.0])


def test_complex_grad_for_a_real_tensor_is_refused(xp):
    y = xp.asarray(np.array([1.0, 2.0, 3.0]), requires_grad=True) * 2
    with pytest.raises(TypeError, match="backward: grad is complex"):
        y.backward(xp.asarray(np.array([1 + 2j, 1, 1])))


def test_an_integer_attention_mask_is_refused(xp):
    q = xp.asarray(np.random.default_rng(1).standard_normal((1, 2, 3, 4)))
    with pytest.raises(TypeError, match="scaled_dot_product_attention: attn_mask must be"):
        F.scaled_dot_product_attention(
            q, q, q, attn_mask=xp.asarray(np.ones((3, 3), dtype="int64"))
        )
    ok = F.scaled_dot_product_attention(q, q, q, attn_mask=xp.asarray(np.ones((3, 3), dtype=bool)))
    assert ok.shape == (1, 2, 3, 4)


def test_nn_ops_refuse_complex_values_with_or_without_grad(xp):
    z = xp.asarray(np.array([1.0 + 1.0j, -2.0]))
    with pytest.raises(TypeError, match="nn.relu: complex input"):
        F.relu(z)


def test_load_state_dict_refuses_complex_values_for_a_real_parameter(xp):
    m = nn.Linear(2, 1, xp=xp, dtype=xp.float64)
    before = np.asarray(m.weight.detach()).copy()
    with pytest.raises(RuntimeError, match="'weight' is complex"):
        m.load_state_dict({"weight": np.ones((1, 2)) * 1j, "bias": np.zeros(1)})
    np.testing.assert_array_equal(np.asarray(m.weight.detach()), before)  # untouched


def test_a_complex_parameter_s_optimizer_state_round_trips(xp):
    z = xp.asarray(np.array([1.0 + 1.0j, 2.0 - 0.5j]), requires_grad=True)
    opt = optim.Adam([z], lr=0.1)
    xp.sum(xp.abs(z) ** 2).backward()
    opt.step()
    again = optim.Adam([z], lr=0.1)
    again.load_state_dict(opt.state_dict())
    np.testing.assert_array_equal(
        np.asarray(again.state[z]["exp_avg_sq"]), np.asarray(opt.state[z]["exp_avg_sq"])
    )


def test_custom_vjp_gradients_of_the_wrong_shape_or_number(xp):
    @ad.custom_vjp
    def double(x):
        return x * 2

    double.defvjp(lambda x: (x * 2, None), lambda r, g: (xp.sum(g),))  # a scalar for (3,)
    x = xp.asarray(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match=r"bwd returned a gradient of shape \(\) for argument 0"):
        xp.sum(double(x)).backward()

    @ad.custom_vjp
    def mul(x, y):
        return x * y

    mul.defvjp(lambda x, y: (x * y, (x, y)), lambda r, g: (g * r[1],))  # one for two
    y = xp.asarray(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match="bwd returned 1 gradients for 2 arguments"):
        xp.sum(mul(x, y)).backward()


# -- detect_anomaly -----------------------------------------------------------------------
def test_detect_anomaly_names_the_forward_op_and_the_users_line(xp):
    x = xp.asarray(np.array([1.0, 0.0, 2.0]), requires_grad=True)
    with ad.detect_anomaly(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(RuntimeError) as info:
            xp.log(x)  # log(0) = -inf
    msg = str(info.value)
    assert "forward of 'log' made inf in output 0, from finite inputs" in msg
    assert "test_reliability.py" in msg and "xp.log(x)  # log(0) = -inf" in msg


@pytest.mark.parametrize("create_graph", [False, True])
def test_detect_anomaly_names_the_backward_op_and_where_it_was_called(xp, create_graph):
    x = xp.asarray(np.array([1.0, 0.0, 2.0]), requires_grad=True)

    @ad.detect_anomaly()  # the decorator form
    def run():
        y = xp.sqrt(x) * 3.0  # finite forward; sqrt's gradient at 0 is inf
        xp.sum(y).backward(create_graph=create_graph)

    with warnings.catch_warnings(), pytest.raises(RuntimeError) as info:
        warnings.simplefilter("ignore", RuntimeWarning)
        run()
    msg = str(info.value)
    assert "backward of 'sqrt' made inf in the gradient of its input 0" in msg
    assert "y = xp.sqrt(x) * 3.0" in msg
    assert x.grad is None  # the failing pass gave no leaf a gradient


def test_detect_anomaly_is_off_by_default_and_after_its_block(xp):
    x = xp.asarray(np.array([1.0, 0.0]), requires_grad=True)
    with ad.detect_anomaly():
        xp.sum(xp.exp(x)).backward()  # finite: nothing raised
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        xp.sum(xp.sqrt(x)).backward()  # inf, but the mode is off: the value, as torch
    assert np.isinf(np.asarray(x.grad)[1])


def test_detect_anomaly_reports_an_input_that_was_never_finite(xp):
    x = xp.asarray(np.array([[np.inf, 1.0]]), requires_grad=True)
    with ad.detect_anomaly(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(RuntimeError, match="nn.softmax' made nan in output 0, input 0 was"):
            F.softmax(x, axis=-1)


@pytest.mark.parametrize(
    "f, expected",
    [
        (lambda xp, x: xp.sum(xp.cumulative_sum(x, axis=0) * 3.0), 3.0),  # NumPy: [x]
        (lambda xp, x: xp.sum(xp.cumulative_prod(x, axis=0) * 3.0), 3.0),
        (lambda xp, x: xp.sum(xp.take(x, xp.asarray([0, 0]), axis=0)), 2.0),  # [x, x]
        (lambda xp, x: xp.max(x, axis=-1) * 2.0, 2.0),  # a 0-d x: reduced over nothing
        (lambda xp, x: xp.prod(x * 2.0, axis=0), 2.0),
        (lambda xp, x: xp.sum(x, axis=0, keepdims=True) * 5.0, 5.0),
    ],
    ids=["cumulative_sum", "cumulative_prod", "take", "max", "prod", "sum"],
)
def test_0d_inputs_where_numpy_takes_an_axis(f, expected):
    # found by the fuzzer: NumPy accepts axis 0 / -1 on a 0-d array, and the rules
    # crashed (integer modulo by zero); the gradients by hand
    import autodiff as ad

    xp = ad.Autodiff(np)
    x = xp.asarray(np.array(1.25), requires_grad=True)
    xp.sum(f(xp, x)).backward()
    assert x.grad.shape == ()
    np.testing.assert_allclose(float(x.grad), expected)


# -- nothing is lost on an error ------------------------------------------------------------
def test_an_error_inside_a_rule_mid_backward_leaves_every_grad_as_it_was(xp):
    @ad.custom_vjp
    def fails(x):
        return x * 1.0

    def bwd(r, g):
        raise ArithmeticError("a rule that fails")

    fails.defvjp(lambda x: (x * 1.0, None), bwd)
    w = xp.asarray(np.array([1.0, 2.0]), requires_grad=True)
    v = xp.asarray(np.array([3.0, -1.0]), requires_grad=True)
    xp.sum(w * v).backward()  # a first backward: both have a gradient
    before = np.asarray(w.grad).copy(), np.asarray(v.grad).copy()
    # v's gradient is ready before the failing rule runs (it is w's branch that fails)
    loss = xp.sum(w * 2.0) + xp.sum(fails(w) * v) + xp.sum(v * 3.0)
    with pytest.raises(ArithmeticError, match="a rule that fails"):
        loss.backward()
    np.testing.assert_array_equal(np.asarray(w.grad), before[0])
    np.testing.assert_array_equal(np.asarray(v.grad), before[1])
    # and an optimizer step after the failure moves nothing that wasn't moved before
    opt = optim.SGD([w, v], lr=0.1)
    opt.step()
    np.testing.assert_allclose(np.asarray(w.detach()), [1.0, 2.0] - 0.1 * before[0])


def test_a_failed_backward_keeps_the_graph_with_retain_graph_and_says_what_it_freed(xp):
    calls = []

    @ad.custom_vjp
    def flaky(x):
        return x * 1.0

    def bwd(r, g):
        calls.append(1)
        if len(calls) == 1:
            raise ArithmeticError("fails the first time")
        return (g,)

    flaky.defvjp(lambda x: (x * 1.0, None), bwd)
    w = xp.asarray(np.array([0.5, -1.0]), requires_grad=True)
    # with retain_graph=True the failure leaves the whole graph: the retry succeeds
    loss = xp.sum(xp.exp(flaky(w * 2.0)))
    with pytest.raises(ArithmeticError, match="fails the first time"):
        loss.backward(retain_graph=True)
    assert w.grad is None
    loss.backward()
    np.testing.assert_allclose(np.asarray(w.grad), 2.0 * np.exp(2.0 * np.array([0.5, -1.0])))
    # without it the pass frees as it goes (as torch's does); the retry names the failure
    calls.clear()
    loss = xp.sum(xp.exp(flaky(w * 2.0)))
    with pytest.raises(ArithmeticError):
        loss.backward()
    with pytest.raises(RuntimeError, match=r"freed by an earlier backward that failed.*'flaky'"):
        loss.backward()


def test_a_failed_load_leaves_the_model_and_the_optimizer_as_they_were(xp, tmp_path):
    m = nn.Linear(2, 1, xp=xp, dtype=xp.float64)
    opt = optim.Adam(m.parameters(), lr=0.1)
    xp.sum(m(xp.asarray(np.ones((3, 2))))).backward()
    opt.step()
    weights = {k: np.asarray(v.detach()).copy() for k, v in m.state_dict().items()}
    state = opt.state_dict()
    with pytest.raises(RuntimeError, match="shape"):
        m.load_state_dict({"weight": np.ones((2, 2)), "bias": np.zeros(1)})
    bad = dict(state, param_groups=[dict(state["param_groups"][0], lr="fast")])
    with pytest.raises(TypeError, match="lr must be a number"):
        opt.load_state_dict(bad)
    path = tmp_path / "ckpt.npz"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError):
        ad.load(path)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(np.asarray(v.detach()), weights[k])
    assert opt.param_groups[0]["lr"] == 0.1
    np.testing.assert_array_equal(
        np.asarray(opt.state_dict()["state"][0]["exp_avg"]),
        np.asarray(state["state"][0]["exp_avg"]),
    )


# -- found by the fuzzer ----------------------------------------------------------------------
@pytest.mark.parametrize("xshape, wshape", [((3,), (0, 3)), ((2, 2, 3), (0, 3)), ((0,), (2, 0)),
                                            ((2, 2, 0), (2, 0))])  # fmt: skip
def test_linear_with_no_feature_in_or_out(xp, xshape, wshape):
    x = xp.asarray(np.ones(xshape), requires_grad=True)
    w = xp.asarray(np.ones(wshape), requires_grad=True)
    y = F.linear(x, w)
    assert y.shape == xshape[:-1] + wshape[:1]
    xp.sum(y * 2.0).backward()
    # no term of y depends on an empty side: both gradients are zeros of their shapes
    np.testing.assert_array_equal(np.asarray(x.grad), np.zeros(xshape))
    np.testing.assert_array_equal(np.asarray(w.grad), np.zeros(wshape))


def test_softmax_and_repeat_of_a_0d_array(xp):
    x = xp.asarray(np.array(0.3), requires_grad=True)
    y = F.softmax(x, axis=-1)
    assert y.shape == () and float(y) == 1.0
    y = xp.repeat(x, 3, axis=0)  # NumPy and the standard's strict version: 0-d as 1-D
    assert y.shape == (3,)
    xp.sum(y * y).backward()
    assert float(x.grad) == pytest.approx(6 * 0.3)
