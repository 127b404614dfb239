"""autodiff.optim: optimizers, clip_grad_norm_ and LR schedules.

Trajectories are compared with torch.optim (float64, gradients that change
every step) where torch is installed; hand-computed steps check each optimizer
without it. Every test runs on NumPy and on array-api-strict (the ``xp`` fixture).
"""

import math

import numpy as np
import pytest

import autodiff as ad
from autodiff import optim

TORCH_REASON = "torch is the reference for torch.optim's update rules"
RNG_SEED = 1234


def to_np(a):
    """A NumPy copy of a raw array or Tensor of any namespace/device."""
    if isinstance(a, ad.Tensor):
        a = a.data
    return np.array(np.from_dlpack(a), copy=True)


def _problem(n_steps=10, seed=RNG_SEED):
    """Initial values and per-step coefficients of a loss that changes every step:
    loss_k = sum(c_k * w**2) / 2 + sum(b_k * w) + sum(c_k[0] * v**3) / 3 + sum(b_k[1] * v)."""
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(3)
    v0 = rng.standard_normal((2, 2))
    cs = rng.uniform(0.5, 2.0, (n_steps, 3))
    bs = rng.standard_normal((n_steps, 3))
    return w0, v0, cs, bs


def _our_loss(xp, params, c, b, device=None):
    w, v = params
    c = xp.asarray(c, device=device)
    b = xp.asarray(b, device=device)
    return xp.sum(c * w * w) / 2 + xp.sum(b * w) + xp.sum(c[0] * v * v * v) / 3 + xp.sum(b[1] * v)


def _torch_loss(torch, params, c, b):
    w, v = params
    c = torch.tensor(c)
    b = torch.tensor(b)
    return (c * w * w).sum() / 2 + (b * w).sum() + (c[0] * v * v * v).sum() / 3 + (b[1] * v).sum()


def _run_ours(xp, make_opt, n_steps=10, device=None, sched=None):
    w0, v0, cs, bs = _problem(n_steps)
    params = [
        xp.asarray(w0.copy(), requires_grad=True, device=device),
        xp.asarray(v0.copy(), requires_grad=True, device=device),
    ]
    opt = make_opt(params)
    s = sched(opt) if sched else None
    traj = []
    for k in range(n_steps):
        opt.zero_grad()
        _our_loss(xp, params, cs[k], bs[k], device).backward()
        opt.step()
        if s is not None:
            s.step()
        traj.append([to_np(p) for p in params])
    return traj, opt, params


def _run_torch(torch, make_opt, n_steps=10, sched=None):
    w0, v0, cs, bs = _problem(n_steps)
    params = [torch.tensor(w0, requires_grad=True), torch.tensor(v0, requires_grad=True)]
    opt = make_opt(params)
    s = sched(opt) if sched else None
    traj = []
    for k in range(n_steps):
        opt.zero_grad()
        _torch_loss(torch, params, cs[k], bs[k]).backward()
        opt.step()
        if s is not None:
            s.step()
        traj.append([p.detach().numpy().copy() for p in params])
    return traj


def _assert_same_trajectory(ours, ref, rtol=1e-12, atol=1e-13):
    assert len(ours) == len(ref)
    for k, (a, b) in enumerate(zip(ours, ref)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"step {k}")


SGD_CASES = [
    {"lr": 0.1},
    {"lr": 0.05, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.9, "nesterov": True},
    {"lr": 0.05, "momentum": 0.8, "dampening": 0.3},
    {"lr": 0.1, "weight_decay": 0.1},
    {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.05, "nesterov": True},
    {"lr": 0.02, "maximize": True},
    {"lr": 0.02, "momentum": 0.5, "weight_decay": 0.1, "maximize": True},
]
ADAM_CASES = [
    ("Adam", {"lr": 0.05}),
    ("Adam", {"lr": 0.05, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.05, "amsgrad": True}),
    ("Adam", {"lr": 0.05, "maximize": True}),
    ("Adam", {"lr": 0.05, "betas": (0.3, 0.6), "eps": 1e-3}),  # lerp's large-weight branch
    ("Adam", {"lr": 0.05, "weight_decay": 0.1, "amsgrad": True, "maximize": True}),
    ("AdamW", {"lr": 0.05}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.3, "amsgrad": True}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.1, "maximize": True}),
]


# -- against torch ---------------------------------------------------------------
@pytest.mark.parametrize(
    "kw", SGD_CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items())
)
def test_sgd_matches_torch(xp, kw):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    ours, _, _ = _run_ours(xp, lambda ps: optim.SGD(ps, **kw))
    ref = _run_torch(torch, lambda ps: torch.optim.SGD(ps, foreach=False, **kw))
    _assert_same_trajectory(ours, ref)


@pytest.mark.parametrize(
    "name,kw", ADAM_CASES, ids=lambda c: c if isinstance(c, str) else ",".join(map(str, c.items()))
)
def test_adam_matches_torch(xp, name, kw):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    ours, _, _ = _run_ours(xp, lambda ps: getattr(optim, name)(ps, **kw))
    ref = _run_torch(torch, lambda ps: getattr(torch.optim, name)(ps, foreach=False, **kw))
    _assert_same_trajectory(ours, ref)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_param_groups_match_torch(xp, name):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    extra = {"momentum": 0.9} if name == "SGD" else {"betas": (0.8, 0.99)}

    def groups(ps):
        return [{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.2, **extra}]

    ours, opt, _ = _run_ours(xp, lambda ps: getattr(optim, name)(groups(ps), lr=0.01))
    ref = _run_torch(
        torch, lambda ps: getattr(torch.optim, name)(groups(ps), lr=0.01, foreach=False)
    )
    _assert_same_trajectory(ours, ref)
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.2]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_grad_none_is_skipped_as_in_torch(xp, name):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    kw = {"lr": 0.1, "momentum": 0.9} if name == "SGD" else {"lr": 0.1}
    w0, v0, cs, bs = _problem(6)
    p = [xp.asarray(w0.copy(), requires_grad=True), xp.asarray(v0.copy(), requires_grad=True)]
    t = [torch.tensor(w0, requires_grad=True), torch.tensor(v0, requires_grad=True)]
    opt = getattr(optim, name)(p, **kw)
    topt = getattr(torch.optim, name)(t, foreach=False, **kw)
    for k in range(6):
        opt.zero_grad()
        topt.zero_grad()
        # v only takes part in the odd steps: on the others its grad stays None.
        if k % 2:
            _our_loss(xp, p, cs[k], bs[k]).backward()
            _torch_loss(torch, t, cs[k], bs[k]).backward()
        else:
            (xp.sum(xp.asarray(cs[k]) * p[0] * p[0]) / 2).backward()
            ((torch.tensor(cs[k]) * t[0] * t[0]).sum() / 2).backward()
            assert p[1].grad is None
        opt.step()
        topt.step()
        for a, b in zip(p, t):
            np.testing.assert_allclose(to_np(a), b.detach().numpy(), rtol=1e-12, atol=1e-13)
        if k == 0:
            assert p[1] not in opt.state or not opt.state[p[1]]
            np.testing.assert_array_equal(to_np(p[1]), v0)


@pytest.mark.parametrize("which", ["step", "cosine", "linear", "lambda"])
def test_schedules_match_torch(xp, which):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    T = 7

    def make(mod):
        return {
            "step": lambda o: mod.StepLR(o, step_size=3, gamma=0.5),
            "cosine": lambda o: mod.CosineAnnealingLR(o, T_max=T, eta_min=0.01),
            "linear": lambda o: mod.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=T),
            "lambda": lambda o: mod.LambdaLR(o, lambda e: 0.97**e / (1 + e)),
        }[which]

    n = 3 * T
    # The lr alone, two groups with different base lrs.
    p = [xp.asarray(np.ones(2), requires_grad=True), xp.asarray(np.ones(1), requires_grad=True)]
    tp = [torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)]
    opt = optim.SGD([{"params": [p[0]]}, {"params": [p[1]], "lr": 0.3}], lr=0.1)
    topt = torch.optim.SGD([{"params": [tp[0]]}, {"params": [tp[1]], "lr": 0.3}], lr=0.1)
    s, ts = make(optim)(opt), make(torch.optim.lr_scheduler)(topt)
    assert s.last_epoch == ts.last_epoch == 0
    lrs, tlrs = [s.get_last_lr()], [ts.get_last_lr()]
    for _ in range(n):
        opt.step()
        topt.step()
        s.step()
        ts.step()
        lrs.append(s.get_last_lr())
        tlrs.append(ts.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == lrs[-1]
    np.testing.assert_allclose(np.array(lrs), np.array(tlrs), rtol=1e-12, atol=1e-15)
    assert s.last_epoch == ts.last_epoch == n
    # Chained to an optimizer: the parameter trajectory follows the schedule.
    ours, _, _ = _run_ours(xp, lambda ps: optim.Adam(ps, lr=0.1), n, sched=make(optim))
    ref = _run_torch(
        torch,
        lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=False),
        n,
        sched=make(torch.optim.lr_scheduler),
    )
    _assert_same_trajectory(ours, ref)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(xp, norm_type, max_norm):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    rng = np.random.default_rng(7)
    g1, g2 = rng.standard_normal(4), rng.standard_normal((2, 3))
    p = [
        xp.asarray(np.zeros(4), requires_grad=True),
        xp.asarray(np.zeros((2, 3)), requires_grad=True),
    ]
    third = xp.asarray(np.zeros(2), requires_grad=True)  # no grad: ignored
    tp = [torch.zeros(4, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64)]
    for a, b, g in zip(p, tp, (g1, g2)):
        a.grad = xp.asarray(g)
        b.grad = torch.tensor(g)
    before = [a.grad for a in p]
    total = optim.clip_grad_norm_(p + [third], max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type=norm_type, foreach=False)
    assert isinstance(total, ad.Tensor) and total.shape == () and total.grad_fn is None
    assert total.__array_namespace__() is xp
    np.testing.assert_allclose(to_np(total), ttotal.numpy(), rtol=1e-13)
    for a, b in zip(p, tp):
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-13, atol=1e-15)
    assert all(x is a.grad for x, a in zip(before, p))
    if max_norm > 100:  # below the threshold: unchanged
        np.testing.assert_array_equal(to_np(p[0].grad), g1)


# -- hand-computed (no torch) ----------------------------------------------------
def _grad_step(xp, p, g):
    p.grad = xp.asarray(np.asarray(g, dtype=np.float64))


def test_sgd_by_hand(xp):
    p = xp.asarray([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.5, weight_decay=0.2)
    _grad_step(xp, p, [1.0, 1.0])
    opt.step()
    # d = g + 0.2 p = [1.2, 0.6]; buf = d; p = p - 0.1 d
    np.testing.assert_allclose(to_np(p), [0.88, -2.06], rtol=1e-15)
    _grad_step(xp, p, [0.0, 2.0])
    opt.step()
    # d = [0.176, 1.588]; buf = 0.5*[1.2, 0.6] + d = [0.776, 1.888]
    np.testing.assert_allclose(to_np(opt.state[p]["momentum_buffer"]), [0.776, 1.888])
    np.testing.assert_allclose(to_np(p), [0.88 - 0.0776, -2.06 - 0.1888], rtol=1e-14)


def test_sgd_nesterov_by_hand(xp):
    p = xp.asarray([0.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0, momentum=0.5, nesterov=True)
    for g, expect in (([1.0], [-1.5]), ([1.0], [-1.5 - 1.75])):
        # step 1: buf = 1, g' = 1 + 0.5; step 2: buf = 1.5, g' = 1 + 0.75
        _grad_step(xp, p, g)
        opt.step()
        np.testing.assert_allclose(to_np(p), expect, rtol=1e-15)


def test_adam_two_steps_by_hand(xp):
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
    p0 = np.array([1.0, -1.0, 0.5])
    gs = [np.array([0.5, -2.0, 0.0]), np.array([1.0, 1.0, -3.0])]
    p = xp.asarray(p0, requires_grad=True)
    opt = optim.Adam([p], lr=lr, betas=(b1, b2), eps=eps)
    x, m, v = p0.copy(), np.zeros(3), np.zeros(3)
    for t, g in enumerate(gs, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat, vhat = m / (1 - b1**t), v / (1 - b2**t)
        x = x - lr * mhat / (np.sqrt(vhat) + eps)
        _grad_step(xp, p, g)
        opt.step()
        np.testing.assert_allclose(to_np(p), x, rtol=1e-12, atol=1e-15)
    # first step: |update| = lr wherever g != 0 (mhat/sqrt(vhat) = sign g)
    assert opt.state[p]["step"] == 2
    np.testing.assert_allclose(to_np(opt.state[p]["exp_avg"]), m, rtol=1e-14)
    np.testing.assert_allclose(to_np(opt.state[p]["exp_avg_sq"]), v, rtol=1e-14)


def test_adam_first_step_is_lr_times_sign(xp):
    p = xp.asarray([1.0, 2.0, 3.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.01, eps=0.0)
    _grad_step(xp, p, [3.0, -0.25, 1e-3])
    opt.step()
    np.testing.assert_allclose(to_np(p), [0.99, 2.01, 2.99], rtol=1e-14)


def test_amsgrad_uses_max_of_second_moment(xp):
    b2 = 0.5
    p = xp.asarray([0.0], requires_grad=True)
    opt = optim.Adam([p], lr=1.0, betas=(0.0, b2), eps=0.0, amsgrad=True)
    _grad_step(xp, p, [2.0])
    opt.step()  # v = 0.5*4 = 2, vmax = 2; update = 2 / (sqrt(2)/sqrt(0.5)) = 1
    np.testing.assert_allclose(to_np(p), [-1.0], rtol=1e-15)
    _grad_step(xp, p, [0.0])
    opt.step()  # m = 0 (beta1 = 0): no move; v = 1 < vmax = 2 kept
    np.testing.assert_allclose(to_np(opt.state[p]["max_exp_avg_sq"]), [2.0])
    np.testing.assert_allclose(to_np(opt.state[p]["exp_avg_sq"]), [1.0])
    np.testing.assert_allclose(to_np(p), [-1.0], rtol=1e-15)


def test_adamw_decay_is_decoupled(xp):
    p = xp.asarray([2.0, -4.0], requires_grad=True)
    q = xp.asarray([2.0, -4.0], requires_grad=True)
    opt = optim.AdamW([p], lr=0.1, weight_decay=0.5, eps=0.0)
    ref = optim.Adam([q], lr=0.1, eps=0.0)
    for x in (p, q):
        _grad_step(xp, x, [1.0, 1.0])
    opt.step()
    ref.step()
    # p = p*(1 - 0.1*0.5) - 0.1*sign(g)
    np.testing.assert_allclose(to_np(p), [2.0 * 0.95 - 0.1, -4.0 * 0.95 - 0.1], rtol=1e-14)
    np.testing.assert_allclose(to_np(q), [1.9, -4.1], rtol=1e-14)
    assert optim.AdamW([p]).defaults["weight_decay"] == 1e-2


def test_maximize_goes_uphill(xp):
    for make in (
        lambda ps: optim.SGD(ps, lr=0.1, maximize=True),
        lambda ps: optim.Adam(ps, lr=0.1, eps=0.0, maximize=True),
    ):
        p = xp.asarray([1.0], requires_grad=True)
        opt = make([p])
        _grad_step(xp, p, [1.0])
        opt.step()
        np.testing.assert_allclose(to_np(p), [1.1], rtol=1e-14)


def test_clip_grad_norm_by_hand(xp):
    p = xp.asarray(np.zeros(2), requires_grad=True)
    q = xp.asarray(np.zeros(()), requires_grad=True)
    p.grad, q.grad = xp.asarray([3.0, 0.0]), xp.asarray(4.0)
    total = optim.clip_grad_norm_([p, q], 1.0)
    np.testing.assert_allclose(to_np(total), 5.0)
    c = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(to_np(p.grad), [3.0 * c, 0.0], rtol=1e-15)
    np.testing.assert_allclose(to_np(q.grad), 4.0 * c, rtol=1e-15)
    p.grad = xp.asarray([-3.0, 2.0])
    total = optim.clip_grad_norm_(p, 1.0, norm_type="inf")  # a single tensor; inf by name
    np.testing.assert_allclose(to_np(total), 3.0)
    np.testing.assert_allclose(to_np(p.grad), [-3.0 / (3.0 + 1e-6), 2.0 / (3.0 + 1e-6)])
    # below the threshold the coefficient is clamped to exactly 1
    p.grad = xp.asarray([0.3, 0.4])
    optim.clip_grad_norm_([p], 2.0)
    np.testing.assert_array_equal(to_np(p.grad), [0.3, 0.4])


def test_clip_grad_norm_edge_cases(xp):
    p = xp.asarray(np.zeros(2), requires_grad=True)
    total = optim.clip_grad_norm_([p], 1.0)  # no grads
    assert float(to_np(total)) == 0.0 and isinstance(total, ad.Tensor)
    p.grad = xp.asarray([math.inf, 1.0])
    with pytest.raises(RuntimeError, match="clip_grad_norm_: .*non-finite"):
        optim.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="clip_grad_norm_"):
        optim.clip_grad_norm_([], 1.0)


# -- schedules by hand -----------------------------------------------------------
def _sgd(xp, lr=1.0):
    return optim.SGD([xp.asarray([0.0], requires_grad=True)], lr=lr)


def test_schedules_by_hand(xp):
    s = optim.StepLR(_sgd(xp), step_size=2, gamma=0.1)
    seen = [s.get_last_lr()[0]]
    for _ in range(5):
        s.optimizer.step()
        s.step()
        seen.append(s.get_last_lr()[0])
    np.testing.assert_allclose(seen, [1, 1, 0.1, 0.1, 0.01, 0.01], rtol=1e-14)

    s = optim.LinearLR(_sgd(xp, 0.8), start_factor=0.25, total_iters=3)
    seen = [s.get_last_lr()[0]]
    for _ in range(5):
        s.step()
        seen.append(s.get_last_lr()[0])
    np.testing.assert_allclose(seen, [0.2, 0.4, 0.6, 0.8, 0.8, 0.8], rtol=1e-14)

    T = 4
    s = optim.CosineAnnealingLR(_sgd(xp, 2.0), T_max=T, eta_min=0.5)
    seen = [s.get_last_lr()[0]]
    for _ in range(3 * T):
        s.step()
        seen.append(s.get_last_lr()[0])
    closed = [0.5 + 1.5 * (1 + math.cos(math.pi * e / T)) / 2 for e in range(3 * T + 1)]
    np.testing.assert_allclose(seen, closed, rtol=1e-12, atol=1e-12)

    s = optim.LambdaLR(_sgd(xp, 0.5), lambda e: 1.0 / (e + 1))
    s.step()
    s.step()
    assert s.last_epoch == 2
    np.testing.assert_allclose(s.get_last_lr(), [0.5 / 3])


def test_scheduler_state_dict_round_trip(xp):
    opt = _sgd(xp)
    s = optim.CosineAnnealingLR(opt, T_max=5)
    for _ in range(3):
        s.step()
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3
    opt2 = optim.SGD([xp.asarray([0.0], requires_grad=True)], lr=opt.param_groups[0]["lr"])
    opt2.param_groups[0]["initial_lr"] = 1.0
    s2 = optim.CosineAnnealingLR(opt2, T_max=5, last_epoch=2)  # resuming needs initial_lr
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    for _ in range(6):
        s.step()
        s2.step()
        assert s2.get_last_lr() == s.get_last_lr()
    lam = optim.LambdaLR(_sgd(xp), lambda e: 0.5)
    assert lam.state_dict()["lr_lambdas"] == [None]
    with pytest.raises(KeyError, match="initial_lr"):
        optim.StepLR(_sgd(xp), 2, last_epoch=3)


def test_scheduler_errors(xp):
    with pytest.raises(TypeError, match="StepLR: .*not an Optimizer"):
        optim.StepLR(object(), 2)
    with pytest.raises(ValueError, match="LinearLR: start_factor"):
        optim.LinearLR(_sgd(xp), start_factor=0.0)
    with pytest.raises(ValueError, match="LambdaLR: expected 1"):
        optim.LambdaLR(_sgd(xp), [lambda e: 1.0, lambda e: 2.0])


# -- in place, identity, devices -------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: optim.SGD(ps, lr=0.1),
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
        lambda ps: optim.Adam(ps, lr=0.1, amsgrad=True, weight_decay=0.1),
        lambda ps: optim.AdamW(ps, lr=0.1, betas=(0.2, 0.9)),
    ],
    ids=["sgd", "nesterov", "adam-amsgrad", "adamw"],
)
def test_updates_in_place_and_stays_on_device(xp, make):
    strict = xp.__name__.endswith("array_api_strict")
    device = None
    if strict:
        import array_api_strict

        device = array_api_strict.Device("device1")
    w0, v0, cs, bs = _problem(3)
    # copies: on numpy, asarray shares memory with its argument
    params = [
        xp.asarray(w0.copy(), requires_grad=True, device=device),
        xp.asarray(v0.copy(), requires_grad=True, device=device),
        xp.asarray(np.float64(0.5), requires_grad=True, device=device),  # 0-d
    ]
    buffers = [p.data for p in params]
    opt = make(params)
    for k in range(3):
        opt.zero_grad()
        loss = _our_loss(xp, params[:2], cs[k], bs[k], device) + params[2] * params[2]
        loss.backward()
        opt.step()
    assert opt.param_groups[0]["params"][0] is params[0]
    for p, buf, x0 in zip(params, buffers, (w0, v0, 0.5)):
        assert not np.allclose(to_np(p), x0)  # it moved
        assert p.requires_grad and p.is_leaf
        assert p.data is buf  # the same buffer (numpy, cupy, strict all update in place)
        if strict:
            assert p.device == device
        for value in opt.state.get(p, {}).values():
            if hasattr(value, "shape"):
                assert value.shape == p.shape and value.dtype == p.dtype
                assert not isinstance(value, ad.Tensor)
                if strict:
                    assert value.device == device
                else:
                    assert isinstance(value, np.ndarray)
    if strict:
        for p in params:
            p.grad = xp.asarray(np.ones(p.shape), device=device)
        total = optim.clip_grad_norm_(params, 0.1)
        assert total.device == device
        assert all(p.grad.device == device for p in params)


def test_float32_stays_float32(xp):
    p = xp.asarray(np.ones(3, dtype=np.float32), requires_grad=True)
    opt = optim.Adam([p], lr=0.1, weight_decay=0.1)
    for _ in range(2):
        opt.zero_grad()
        xp.sum(p * p).backward()
        opt.step()
    assert p.dtype == xp.float32
    assert opt.state[p]["exp_avg"].dtype == xp.float32
    p.grad = xp.asarray(np.full(3, 10.0, dtype=np.float32))
    optim.clip_grad_norm_([p], 1.0)
    assert p.grad.dtype == xp.float32


def test_zero_grad(xp):
    p = xp.asarray([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    xp.sum(p * p).backward()
    opt.zero_grad()
    assert p.grad is None
    xp.sum(p * p).backward()
    g = p.grad
    buf = g.data
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and g.data is buf
    np.testing.assert_array_equal(to_np(p.grad), [0.0, 0.0])
    xp.sum(3 * p).backward()  # accumulates onto the zeros
    np.testing.assert_array_equal(to_np(p.grad), [3.0, 3.0])


def test_step_closure_returns_loss(xp):
    p = xp.asarray([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = xp.sum(p * p)
        loss.backward()
        return loss

    with ad.no_grad():  # the closure still records its graph
        loss = opt.step(closure)
    np.testing.assert_allclose(to_np(loss), 1.0)
    np.testing.assert_allclose(to_np(p), [0.0])


def test_step_invalidates_graphs_that_saved_the_parameter(xp):
    p = xp.asarray([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    xp.sum(p * p).backward()
    y = xp.sum(p * p)  # built before the step: saved the old p
    opt.step()
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


# -- state_dict ------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
        lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True),
        lambda ps: optim.AdamW([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.2}], lr=0.05),
    ],
    ids=["sgd", "adam", "adamw-groups"],
)
def test_state_dict_round_trip_continues_identically(xp, make):
    n, split = 8, 3
    w0, v0, cs, bs = _problem(n)

    def fresh():
        return [
            xp.asarray(w0.copy(), requires_grad=True),
            xp.asarray(v0.copy(), requires_grad=True),
        ]

    def run(params, opt, steps):
        for k in steps:
            opt.zero_grad()
            _our_loss(xp, params, cs[k], bs[k]).backward()
            opt.step()

    a = fresh()
    opt_a = make(a)
    run(a, opt_a, range(split))
    sd = opt_a.state_dict()
    saved = {
        i: {k: to_np(v) if hasattr(v, "shape") else v for k, v in s.items()}
        for i, s in sd["state"].items()
    }
    assert sorted(sd["state"]) == [0, 1]
    assert [g["params"] for g in sd["param_groups"]] in ([[0, 1]], [[0], [1]])

    b = fresh()
    with ad.no_grad():  # same parameter values as a after `split` steps
        for pb, pa in zip(b, a):
            pb.data[...] = pa.data
    opt_b = make(b)
    opt_b.load_state_dict(sd)
    run(a, opt_a, range(split, n))
    run(b, opt_b, range(split, n))
    for pa, pb in zip(a, b):
        np.testing.assert_array_equal(to_np(pa), to_np(pb))
    # the state dict is a snapshot: later steps did not change it
    for i, s in sd["state"].items():
        for k, v in s.items():
            np.testing.assert_array_equal(to_np(v) if hasattr(v, "shape") else v, saved[i][k])
    # loaded arrays are copies, not the dict's arrays
    for p in b:
        for v in opt_b.state[p].values():
            assert all(v is not x for x in sd["state"][0].values())


def test_state_dict_loads_across_namespaces():
    strict = pytest.importorskip("array_api_strict")
    xs, xn = ad.Autodiff(strict), ad.Autodiff(np)
    dev = strict.Device("device1")
    pn = xn.asarray([1.0, 2.0], requires_grad=True)
    on = optim.Adam([pn], lr=0.1)
    pn.grad = xn.asarray([1.0, -1.0])
    on.step()
    ps = xs.asarray([1.0, 2.0], requires_grad=True, device=dev)
    os_ = optim.Adam([ps], lr=0.1)
    os_.load_state_dict(on.state_dict())
    assert os_.state[ps]["exp_avg"].device == dev
    np.testing.assert_array_equal(to_np(os_.state[ps]["exp_avg"]), to_np(on.state[pn]["exp_avg"]))


def test_load_state_dict_errors(xp):
    p = xp.asarray(np.ones(3), requires_grad=True)
    q = xp.asarray(np.ones((2, 2)), requires_grad=True)
    opt = optim.SGD([p, q], lr=0.1, momentum=0.9)
    p.grad, q.grad = xp.asarray(np.ones(3)), xp.asarray(np.ones((2, 2)))
    opt.step()
    sd = opt.state_dict()
    other = optim.SGD([{"params": [p]}, {"params": [q]}], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=r"SGD.load_state_dict: .*1 parameter groups.* has 2"):
        other.load_state_dict(sd)
    fewer = optim.SGD([p], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="group 0 has 2 parameters .* 1 in the optimizer"):
        fewer.load_state_dict(sd)
    swapped = optim.SGD([q, p], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=r"'momentum_buffer' of parameter 0 has shape \(3,\)"):
        swapped.load_state_dict(sd)
    assert swapped.state == {}  # nothing was loaded
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})
    bad = {"state": {}, "param_groups": [{**sd["param_groups"][0], "lr": -1.0}]}
    with pytest.raises(ValueError, match="SGD: lr must be a number >= 0"):
        opt.load_state_dict(bad)
    assert opt.param_groups[0]["lr"] == 0.1
    # hyper-parameters come from the state dict, parameters stay the optimizer's
    sd["param_groups"][0]["lr"] = 0.01
    fresh = optim.SGD([p, q], lr=0.1, momentum=0.9)
    fresh.load_state_dict(sd)
    assert fresh.param_groups[0]["lr"] == 0.01
    assert fresh.param_groups[0]["params"][0] is p


# -- construction errors ---------------------------------------------------------
def test_construction_errors(xp):
    p = xp.asarray([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="Adam: parameter 0 .*does not require grad"):
        optim.Adam([xp.asarray([1.0])])
    with pytest.raises(ValueError, match="SGD: parameter 0 .*not a leaf"):
        optim.SGD([p * 2])
    with pytest.raises(ValueError, match="SGD: parameter 1 appears twice"):
        optim.SGD([p, p])
    with pytest.raises(ValueError, match="AdamW: .*already in another parameter group"):
        optim.AdamW([{"params": [p]}, {"params": [p]}])
    with pytest.raises(TypeError, match="SGD: .*not an autodiff Tensor"):
        optim.SGD([np.ones(2)])
    with pytest.raises(TypeError, match="SGD: params must be an iterable"):
        optim.SGD(p)
    with pytest.raises(ValueError, match="SGD: got an empty parameter list"):
        optim.SGD([])
    with pytest.raises(ValueError, match="SGD: lr must be a number >= 0"):
        optim.SGD([p], lr=-0.1)
    with pytest.raises(ValueError, match="SGD: momentum must be a number >= 0"):
        optim.SGD([p], momentum=-0.5)
    with pytest.raises(ValueError, match="SGD: nesterov"):
        optim.SGD([p], nesterov=True)
    with pytest.raises(ValueError, match="SGD: nesterov"):
        optim.SGD([p], momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"Adam: betas\[0\] must be a number in \[0, 1\)"):
        optim.Adam([p], betas=(1.0, 0.999))
    with pytest.raises(ValueError, match=r"AdamW: betas\[1\]"):
        optim.AdamW([p], betas=(0.9, -0.1))
    with pytest.raises(ValueError, match="Adam: eps must be a number >= 0"):
        optim.Adam([p], eps=-1.0)
    with pytest.raises(ValueError, match="Adam: weight_decay must be a number >= 0"):
        optim.Adam([p], weight_decay=-1.0)
    with pytest.raises(
        ValueError, match=r"Adam: lr must be a number >= 0"
    ):  # checked per group too
        optim.Adam([{"params": [p], "lr": -1.0}])


def test_add_param_group(xp):
    p = xp.asarray([1.0], requires_grad=True)
    q = xp.asarray([1.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    opt.add_param_group({"params": q, "betas": (0.5, 0.9)})
    assert len(opt.param_groups) == 2
    g = opt.param_groups[1]
    assert len(g["params"]) == 1 and g["params"][0] is q
    assert g["lr"] == 0.1 and g["betas"] == (0.5, 0.9) and g["eps"] == 1e-8
    with pytest.raises(ValueError, match="Adam: .*already in another parameter group"):
        opt.add_param_group({"params": [p]})
