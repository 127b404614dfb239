"""autodiff.optim: RMSprop, Adagrad, Adamax, NAdam, RAdam, the further schedules and
clip_grad_value_, against torch.optim (float64, a loss that changes every step, 25 steps,
parameters of several shapes). Every test runs on NumPy and array-api-strict (``xp``).

torch keeps its scalar state (``step``, NAdam's ``mu_product``) in the default dtype; the
comparisons set it to float64 (``torch64``), where it matches ours (Python floats).
"""

import math

import numpy as np
import pytest

import autodiff as ad
from autodiff import optim

TORCH_REASON = "torch is the reference for torch.optim's update rules"
N_STEPS = 25
SHAPES = [(3,), (2, 2), (), (2, 1, 3)]
MAX_DIFF: dict = {}  # name -> largest |ours - torch| seen (printed with -s)


def to_np(a):
    if isinstance(a, ad.Tensor):
        a = a.data
    return np.array(np.from_dlpack(a), copy=True)


@pytest.fixture
def torch64():
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield torch
    torch.set_default_dtype(old)


def _problem(n_steps=N_STEPS, seed=4321):
    rng = np.random.default_rng(seed)
    x0 = [rng.standard_normal(s) for s in SHAPES]
    cs = [rng.uniform(0.5, 2.0, (n_steps,) + s) for s in SHAPES]
    bs = [rng.standard_normal((n_steps,) + s) for s in SHAPES]
    return x0, cs, bs


def _loss(mod, params, cs, bs, k):
    """sum(c*p*p)/2 + sum(b*p) + sum(p^4)/20 per parameter; mod is xp or torch."""
    total = 0
    for p, c, b in zip(params, cs, bs):
        c = mod.asarray(c[k])
        b = mod.asarray(b[k])
        total = total + mod.sum(c * p * p) / 2 + mod.sum(b * p) + mod.sum(p * p * p * p) / 20
    return total


def _run(mod, params, opt, steps, cs, bs, sched=None):
    traj = []
    for k in steps:
        opt.zero_grad()
        _loss(mod, params, cs, bs, k).backward()
        opt.step()
        if sched is not None:
            sched.step()
        traj.append(
            [to_np(p) if isinstance(p, ad.Tensor) else p.detach().numpy().copy() for p in params]
        )
    return traj


def _ours(xp, x0):
    return [xp.asarray(x.copy(), requires_grad=True) for x in x0]


def _theirs(torch, x0):
    return [torch.tensor(x, requires_grad=True) for x in x0]


def _compare(name, ours, ref, rtol=1e-12, atol=1e-13):
    assert len(ours) == len(ref)
    worst = 0.0
    for k, (a, b) in enumerate(zip(ours, ref)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"{name} step {k}")
            worst = max(worst, float(np.max(np.abs(x - y), initial=0.0)))
    MAX_DIFF[name] = max(MAX_DIFF.get(name, 0.0), worst)
    return worst


CASES = [
    ("RMSprop", {}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.005, "centered": True, "momentum": 0.5, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.3, "centered": True, "maximize": True}),  # lerp >= 0.5
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05}),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-3}),
    ("Adagrad", {"lr": 0.1, "weight_decay": 0.2, "maximize": True}),
    ("Adamax", {}),
    ("Adamax", {"lr": 0.05, "betas": (0.8, 0.95)}),
    ("Adamax", {"lr": 0.05, "betas": (0.3, 0.5), "eps": 1e-3}),
    ("Adamax", {"lr": 0.05, "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {}),
    ("NAdam", {"lr": 0.05, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", {"lr": 0.05, "betas": (0.4, 0.9), "maximize": True}),
    ("RAdam", {}),
    ("RAdam", {"lr": 0.05, "betas": (0.9, 0.9)}),  # rho_t > 5 from step 7 on
    ("RAdam", {"lr": 0.05, "betas": (0.5, 0.6), "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.05, "weight_decay": 0.2, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.05, "betas": (0.8, 0.7), "maximize": True}),
]
NAMES = ["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"]


def _ids(c):
    return c if isinstance(c, str) else ",".join(f"{k}={v}" for k, v in c.items()) or "defaults"


@pytest.mark.parametrize("name,kw", CASES, ids=_ids)
def test_optimizer_matches_torch(xp, torch64, name, kw):
    torch = torch64
    x0, cs, bs = _problem()
    ps, tps = _ours(xp, x0), _theirs(torch, x0)
    opt = getattr(optim, name)(ps, **kw)
    topt = getattr(torch.optim, name)(tps, foreach=False, **kw)
    ours = _run(xp, ps, opt, range(N_STEPS), cs, bs)
    ref = _run(torch, tps, topt, range(N_STEPS), cs, bs)
    _compare(name, ours, ref)
    # torch's state keys and values
    tsd, sd = topt.state_dict(), opt.state_dict()
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for i, ts in tsd["state"].items():
        assert set(sd["state"][i]) == set(ts), (name, i)
        for key, tv in ts.items():
            np.testing.assert_allclose(
                np.asarray(to_np(sd["state"][i][key]) if hasattr(sd["state"][i][key], "shape")
                           else sd["state"][i][key]),
                tv.numpy(), rtol=1e-11, atol=1e-13, err_msg=f"{name} state {key}",
            )  # fmt: skip
    for g, tg in zip(sd["param_groups"], tsd["param_groups"]):
        for key, v in g.items():
            assert tg[key] == v, (name, key)


@pytest.mark.parametrize("name", NAMES)
def test_defaults_are_torchs(name):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    import inspect

    ours = inspect.signature(getattr(optim, name)).parameters
    theirs = inspect.signature(getattr(torch.optim, name)).parameters
    for key, p in ours.items():
        if key != "params":
            assert theirs[key].default == p.default, (name, key)


@pytest.mark.parametrize("name", NAMES)
def test_param_groups_match_torch(xp, torch64, name):
    torch = torch64
    extra = {
        "RMSprop": {"momentum": 0.5, "centered": True},
        "Adagrad": {"lr_decay": 0.1},
        "Adamax": {"betas": (0.5, 0.9)},
        "NAdam": {"betas": (0.6, 0.95), "weight_decay": 0.1},
        "RAdam": {"betas": (0.7, 0.8), "weight_decay": 0.1, "decoupled_weight_decay": True},
    }[name]

    def groups(ps):
        return [{"params": ps[:2]}, {"params": ps[2:], "lr": 0.02, **extra}]

    x0, cs, bs = _problem()
    ps, tps = _ours(xp, x0), _theirs(torch, x0)
    opt = getattr(optim, name)(groups(ps), lr=0.01)
    topt = getattr(torch.optim, name)(groups(tps), lr=0.01, foreach=False)
    ours = _run(xp, ps, opt, range(N_STEPS), cs, bs)
    ref = _run(torch, tps, topt, range(N_STEPS), cs, bs)
    _compare(name, ours, ref)
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.02]


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_round_trip_matches_torch(xp, torch64, name):
    """10 steps, a state dict, a fresh optimizer loading it, 15 more: torch's 25 steps."""
    torch = torch64
    kw = {"lr": 0.02}
    if name == "RMSprop":
        kw.update(momentum=0.5, centered=True)
    x0, cs, bs = _problem()
    tps = _theirs(torch, x0)
    topt = getattr(torch.optim, name)(tps, foreach=False, **kw)
    ref = _run(torch, tps, topt, range(N_STEPS), cs, bs)

    ps = _ours(xp, x0)
    opt = getattr(optim, name)([{"params": ps[:1]}, {"params": ps[1:]}], **kw)
    first = _run(xp, ps, opt, range(10), cs, bs)
    sd = opt.state_dict()
    qs = [xp.asarray(to_np(p), requires_grad=True) for p in ps]
    opt2 = getattr(optim, name)([{"params": qs[:1]}, {"params": qs[1:]}], **kw)
    opt2.load_state_dict(sd)
    _run(xp, ps, opt, range(10, N_STEPS), cs, bs)  # the original goes on, changing nothing
    rest = _run(xp, qs, opt2, range(10, N_STEPS), cs, bs)
    _compare(name, first + rest, ref)


def test_complex_parameters_as_pairs(xp, torch64):
    torch = torch64
    rng = np.random.default_rng(3)
    z0 = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    c = rng.uniform(0.5, 2.0, 4)
    for name, kw in [
        ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}),
        ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.1}),
        ("Adamax", {"lr": 0.05}),
        ("NAdam", {"lr": 0.05}),
        ("RAdam", {"lr": 0.05, "betas": (0.9, 0.9)}),
        ("LBFGS", {"line_search_fn": "strong_wolfe", "max_iter": 5}),
        ("LBFGS", {"lr": 0.3, "max_iter": 5}),
    ]:
        z = xp.asarray(z0.copy(), requires_grad=True)
        tz = torch.tensor(z0.copy(), requires_grad=True)
        opt = getattr(optim, name)([z], **kw)
        extra = {} if name == "LBFGS" else {"foreach": False}
        topt = getattr(torch.optim, name)([tz], **kw, **extra)

        def closure():
            opt.zero_grad()
            zz = xp.real(z * xp.conj(z))
            loss = xp.sum(xp.asarray(c) * zz * zz + xp.real(z))
            loss.backward()
            return loss

        def tclosure():
            topt.zero_grad()
            tzz = (tz * tz.conj()).real
            loss = (torch.tensor(c) * tzz * tzz + tz.real).sum()
            loss.backward()
            return loss

        ours, ref = [], []
        for _ in range(6 if name == "LBFGS" else N_STEPS):
            opt.step(closure)
            topt.step(tclosure)
            ours.append([to_np(z)])
            ref.append([tz.detach().numpy().copy()])
        _compare(name + " (complex)", ours, ref)


# -- clip_grad_value_ ------------------------------------------------------------
@pytest.mark.parametrize("clip", [0.5, 1e3, 0])
def test_clip_grad_value_matches_torch(xp, clip):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    rng = np.random.default_rng(11)
    gs = [rng.standard_normal(5), rng.standard_normal((2, 3))]
    ps = [xp.asarray(np.zeros(g.shape), requires_grad=True) for g in gs]
    tps = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in gs]
    nograd = xp.asarray(np.zeros(2), requires_grad=True)
    for p, tp, g in zip(ps, tps, gs):
        p.grad = xp.asarray(g.copy())
        tp.grad = torch.tensor(g)
    bufs = [p.grad for p in ps]
    assert optim.clip_grad_value_(ps + [nograd], clip) is None
    torch.nn.utils.clip_grad_value_(tps, clip, foreach=False)
    for p, tp, buf in zip(ps, tps, bufs):
        assert p.grad is buf
        np.testing.assert_array_equal(to_np(p.grad), tp.grad.numpy())
    assert nograd.grad is None
    p = xp.asarray(np.zeros(2), requires_grad=True)
    p.grad = xp.asarray(np.array([3.0, -3.0]))
    optim.clip_grad_value_(p, 1)  # a single tensor, an int bound
    np.testing.assert_array_equal(to_np(p.grad), [1.0, -1.0])


def test_clip_grad_value_errors(xp):
    p = xp.asarray(np.zeros(2), requires_grad=True)
    with pytest.raises(TypeError, match="clip_grad_value_: clip_value must be a number"):
        optim.clip_grad_value_([p], "1")
    with pytest.raises(ValueError, match="clip_grad_value_: clip_value must be a number >= 0"):
        optim.clip_grad_value_([p], -1.0)
    with pytest.raises(TypeError, match="clip_grad_value_: parameters must be Tensors"):
        optim.clip_grad_value_([np.zeros(2)], 1.0)


# -- construction errors ---------------------------------------------------------
@pytest.mark.parametrize(
    "name,kw,err,msg",
    [
        ("RMSprop", {"alpha": -0.1}, ValueError, "RMSprop: alpha must be a number >= 0"),
        ("RMSprop", {"momentum": -1}, ValueError, "RMSprop: momentum must be a number >= 0"),
        ("RMSprop", {"eps": "1e-8"}, TypeError, "RMSprop: eps must be a number"),
        ("RMSprop", {"centered": "yes"}, TypeError, "RMSprop: centered must be True or False"),
        ("Adagrad", {"lr_decay": -1}, ValueError, "Adagrad: lr_decay must be a number >= 0"),
        ("Adagrad", {"initial_accumulator_value": -1}, ValueError, "initial_accumulator_value"),
        ("Adagrad", {"lr": -1}, ValueError, "Adagrad: lr must be a number >= 0"),
        ("Adamax", {"betas": (1.0, 0.9)}, ValueError, r"Adamax: betas\[0\] must be a number in"),
        ("Adamax", {"betas": 0.9}, TypeError, "Adamax: betas must be a pair of numbers"),
        ("NAdam", {"momentum_decay": -1}, ValueError, "NAdam: momentum_decay must be a number"),
        ("NAdam", {"decoupled_weight_decay": 2}, TypeError, "NAdam: decoupled_weight_decay"),
        ("RAdam", {"betas": (0.9, 1.0)}, ValueError, r"RAdam: betas\[1\] must be a number in"),
        ("RAdam", {"weight_decay": -0.1}, ValueError, "RAdam: weight_decay must be a number"),
        ("RAdam", {"maximize": None}, TypeError, "RAdam: maximize must be True or False"),
    ],
)
def test_construction_errors(xp, name, kw, err, msg):
    p = xp.asarray([1.0], requires_grad=True)
    with pytest.raises(err, match=msg):
        getattr(optim, name)([p], **kw)
    with pytest.raises(err, match=msg):  # per group too
        getattr(optim, name)([{"params": [p], **kw}])


def test_adagrad_state_exists_from_the_start(xp):
    p = xp.asarray(np.ones(3), requires_grad=True)
    opt = optim.Adagrad([p], initial_accumulator_value=0.25)
    assert opt.state[p]["step"] == 0
    np.testing.assert_array_equal(to_np(opt.state[p]["sum"]), [0.25] * 3)
    q = xp.asarray(np.ones(2), requires_grad=True)
    opt.add_param_group({"params": [q], "initial_accumulator_value": 1.0})
    q.grad = xp.asarray(np.array([1.0, 2.0]))
    p.grad = xp.asarray(np.zeros(3))
    opt.step()
    np.testing.assert_allclose(to_np(opt.state[q]["sum"]), [2.0, 5.0])
    np.testing.assert_allclose(to_np(q), [1 - 0.01 / math.sqrt(2), 1 - 0.02 / math.sqrt(5)])


# -- schedules -------------------------------------------------------------------
def _sched_cases(mod):
    return {
        "exponential": lambda o: mod.ExponentialLR(o, gamma=0.9),
        "multistep": lambda o: mod.MultiStepLR(o, milestones=[3, 7, 7, 15], gamma=0.5),
        "warm_restarts": lambda o: mod.CosineAnnealingWarmRestarts(o, T_0=4, eta_min=0.001),
        "warm_restarts_mult": lambda o: mod.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
        "onecycle_cos": lambda o: mod.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=30),
        "onecycle_linear": lambda o: mod.OneCycleLR(
            o, max_lr=0.8, epochs=5, steps_per_epoch=6, pct_start=0.4,
            anneal_strategy="linear", div_factor=10.0, final_div_factor=100.0,
        ),
        "onecycle_three_phase": lambda o: mod.OneCycleLR(
            o, max_lr=2.0, total_steps=30, three_phase=True, base_momentum=0.8,
            max_momentum=[0.9, 0.99],
        ),
        "onecycle_no_momentum": lambda o: mod.OneCycleLR(
            o, max_lr=1.0, total_steps=30, cycle_momentum=False
        ),
        "sequential": lambda o: mod.SequentialLR(
            o,
            [mod.LinearLR(o, start_factor=0.1, total_iters=4), mod.CosineAnnealingLR(o, T_max=8)],
            milestones=[5],
        ),
        "sequential3": lambda o: mod.SequentialLR(
            o,
            [
                mod.ExponentialLR(o, gamma=0.8),
                mod.StepLR(o, step_size=2, gamma=0.5),
                mod.MultiStepLR(o, milestones=[2, 4]),
            ],
            milestones=[6, 13],
        ),
    }  # fmt: skip


SCHEDS = list(_sched_cases(optim))


def _groups_state(opt):
    """What a schedule writes: lr, and momentum or betas[0]."""
    return [
        (g["lr"], g.get("momentum"), g["betas"][0] if "betas" in g else None)
        for g in opt.param_groups
    ]


def _sched_run(opt, s, n):
    seen = [_groups_state(opt)]
    for _ in range(n):
        opt.step()
        s.step()
        seen.append(_groups_state(opt))
        assert s.get_last_lr() == [g["lr"] for g in opt.param_groups]
    return seen


def _close(a, b, rtol=1e-12):
    a = np.array([[[np.nan if x is None else x for x in t] for t in r] for r in a])
    b = np.array([[[np.nan if x is None else x for x in t] for t in r] for r in b])
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-15)
    return float(np.nanmax(np.abs(a - b)))


@pytest.mark.parametrize("which", SCHEDS)
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_schedules_match_torch(xp, which, opt_name):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    n, split = 29, 11
    kw = {"momentum": 0.9} if opt_name == "SGD" else {}

    def make_opt(mod, ps):
        return getattr(mod, opt_name)(
            [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.3}], lr=0.1, **kw
        )

    ps = [xp.asarray(np.ones(2), requires_grad=True), xp.asarray(np.ones(1), requires_grad=True)]
    tps = [torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)]
    topt = make_opt(torch.optim, tps)
    ref = _sched_run(topt, _sched_cases(torch.optim.lr_scheduler)[which](topt), n)
    opt = make_opt(optim, ps)
    s = _sched_cases(optim)[which](opt)
    ours = _sched_run(opt, s, split)
    # a checkpoint: a fresh optimizer and schedule, both state dicts loaded
    qs = [xp.asarray(np.ones(2), requires_grad=True), xp.asarray(np.ones(1), requires_grad=True)]
    opt2 = make_opt(optim, qs)
    s2 = _sched_cases(optim)[which](opt2)
    sd = s.state_dict()
    assert "optimizer" not in sd
    opt2.load_state_dict(opt.state_dict())
    s2.load_state_dict(sd)
    rest = _sched_run(opt2, s2, n - split)
    d = _close(ours + rest[1:], ref)
    MAX_DIFF["schedule " + which] = max(MAX_DIFF.get("schedule " + which, 0.0), d)
    assert s2.last_epoch == n


def test_warm_restarts_with_fractional_epochs(xp):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    epochs = [0.5, 1.25, 2.0, 3.9, 4.0, 7.5, 12.3, 20.0, 2.5, 44.4]
    for mult in (1, 2, 3):
        opt = optim.SGD([xp.asarray([0.0], requires_grad=True)], lr=1.0)
        topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        s = optim.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=mult, eta_min=0.05)
        ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, 2, mult, 0.05)
        for e in epochs:
            s.step(e)
            ts.step(e)
            assert s.last_epoch == ts.last_epoch
            np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-12)
    with pytest.raises(ValueError, match="CosineAnnealingWarmRestarts.step: epoch"):
        s.step(-1)


PLATEAU_CASES = [
    {},
    {"mode": "max", "factor": 0.5, "patience": 2},
    {"patience": 1, "threshold": 0.1, "threshold_mode": "abs", "cooldown": 2},
    {"mode": "max", "threshold_mode": "abs", "patience": 0, "min_lr": [0.01, 0.05]},
    {"factor": 0.2, "patience": 1, "min_lr": 0.004, "eps": 1e-3},
]


@pytest.mark.parametrize("kw", PLATEAU_CASES, ids=_ids)
def test_reduce_lr_on_plateau_matches_torch(xp, kw):
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    rng = np.random.default_rng(5)
    metrics = np.concatenate([np.linspace(1, 0.5, 6), 0.5 + 0.01 * rng.standard_normal(40)])
    ps = [xp.asarray(np.ones(2), requires_grad=True), xp.asarray(np.ones(1), requires_grad=True)]
    tps = [torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)]
    opt = optim.SGD([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.3}], lr=0.1)
    topt = torch.optim.SGD([{"params": tps[:1]}, {"params": tps[1:], "lr": 0.3}], lr=0.1)
    s = optim.ReduceLROnPlateau(opt, **kw)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    lrs, tlrs = [], []
    for k, m in enumerate(metrics):
        if k == 20:  # a checkpoint
            s2 = optim.ReduceLROnPlateau(opt, **kw)
            s2.load_state_dict(s.state_dict())
            s = s2
        # a 0-d Tensor metric, or a number
        s.step(xp.asarray(m) if k % 2 else float(m))
        ts.step(float(m))
        lrs.append(s.get_last_lr())
        tlrs.append(ts.get_last_lr())
        assert s.num_bad_epochs == ts.num_bad_epochs and s.best == ts.best
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-12)
    assert lrs[-1] != lrs[0]  # it did reduce
    MAX_DIFF["schedule ReduceLROnPlateau"] = float(np.max(np.abs(np.subtract(lrs, tlrs))))


def test_schedule_errors(xp):
    def sgd():
        return optim.SGD([xp.asarray([0.0], requires_grad=True)], lr=0.1)

    plateau = optim.ReduceLROnPlateau
    ada = optim.Adagrad([xp.asarray([0.0], requires_grad=True)])
    cases = [
        (lambda: optim.ExponentialLR(sgd(), gamma="0.9"), TypeError, "ExponentialLR: gamma"),
        (lambda: optim.ExponentialLR(object(), 0.9), TypeError, "ExponentialLR: .*not an Opt"),
        (lambda: optim.MultiStepLR(sgd(), [2, -1]), ValueError, r"MultiStepLR: milestones\[1\]"),
        (lambda: optim.MultiStepLR(sgd(), 3), TypeError, "MultiStepLR: milestones"),
        (
            lambda: optim.CosineAnnealingWarmRestarts(sgd(), T_0=0),
            ValueError,
            "CosineAnnealingWarmRestarts: T_0 must be an int >= 1",
        ),
        (
            lambda: optim.CosineAnnealingWarmRestarts(sgd(), T_0=2, T_mult=1.5),
            TypeError,
            "CosineAnnealingWarmRestarts: T_mult must be an int",
        ),
        (lambda: optim.OneCycleLR(sgd(), 1.0), ValueError, "OneCycleLR: give total_steps"),
        (lambda: optim.OneCycleLR(sgd(), 1.0, total_steps=0), ValueError, "total_steps"),
        (
            lambda: optim.OneCycleLR(sgd(), 1.0, epochs=2, steps_per_epoch=0),
            ValueError,
            "OneCycleLR: steps_per_epoch",
        ),
        (
            lambda: optim.OneCycleLR(sgd(), 1.0, 10, pct_start=1.5),
            ValueError,
            "OneCycleLR: pct_start",
        ),
        (
            lambda: optim.OneCycleLR(sgd(), 1.0, 10, anneal_strategy="cosine"),
            ValueError,
            "OneCycleLR: anneal_strategy",
        ),
        (lambda: optim.OneCycleLR(sgd(), [1.0, 2.0], 10), ValueError, "OneCycleLR: expected 1"),
        (
            lambda: optim.OneCycleLR(ada, 1.0, 10),
            ValueError,
            "OneCycleLR: cycle_momentum needs",
        ),
        (lambda: optim.SequentialLR(sgd(), [], []), ValueError, "SequentialLR: expected at least"),
        (lambda: optim.SequentialLR(sgd(), [object()], []), TypeError, "SequentialLR: sched"),
        (lambda: plateau(sgd(), mode="up"), ValueError, "ReduceLROnPlateau: mode"),
        (lambda: plateau(sgd(), factor=1.0), ValueError, "ReduceLROnPlateau: factor"),
        (lambda: plateau(sgd(), patience=1.5), TypeError, "ReduceLROnPlateau: patience"),
        (
            lambda: plateau(sgd(), threshold_mode="x"),
            ValueError,
            "ReduceLROnPlateau: threshold_mode",
        ),
        (lambda: plateau(sgd(), min_lr=-1), ValueError, "ReduceLROnPlateau: min_lr"),
        (lambda: plateau(sgd(), cooldown=-1), ValueError, "ReduceLROnPlateau: cooldown"),
    ]  # fmt: skip
    for make, err, msg in cases:
        with pytest.raises(err, match=msg):
            make()
    o1, o2 = sgd(), sgd()
    with pytest.raises(ValueError, match=r"SequentialLR: schedulers\[1\] drives another"):
        optim.SequentialLR(o1, [optim.StepLR(o1, 2), optim.StepLR(o2, 2)], [3])
    with pytest.raises(ValueError, match="SequentialLR: expected 1 milestones"):
        optim.SequentialLR(o1, [optim.StepLR(o1, 2), optim.StepLR(o1, 2)], [3, 4])
    with pytest.raises(ValueError, match=r"SequentialLR: schedulers\[0\] is a ReduceLROnPlateau"):
        optim.SequentialLR(o1, [optim.ReduceLROnPlateau(o1)], [])
    s = optim.OneCycleLR(sgd(), 1.0, total_steps=3)
    for _ in range(3):
        s.step()
    with pytest.raises(ValueError, match="OneCycleLR: tried to step 4 times"):
        s.step()
    with pytest.raises(TypeError, match="ReduceLROnPlateau.step: metrics must be a number"):
        optim.ReduceLROnPlateau(sgd()).step("low")


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    if MAX_DIFF:
        print("\nlargest |ours - torch|:")
        for k, v in sorted(MAX_DIFF.items()):
            print(f"  {k}: {v:.3g}")


# -- LBFGS -----------------------------------------------------------------------
def _rosen(mod, x):
    return mod.sum(100.0 * (x[1:] - x[:-1] * x[:-1]) ** 2 + (1.0 - x[:-1]) ** 2)


def _lbfgs_loss(mod, ps):
    x, y = ps
    return _rosen(mod, x) + _rosen(mod, mod.reshape(y, (-1,)))


# max_iter=5 per step: run to convergence, L-BFGS amplifies rounding (torch against torch
# from a start moved by 1e-15 differs by 1e-9); these stay within 1e-12 of each other.
LBFGS_CASES = [
    {"line_search_fn": "strong_wolfe", "max_iter": 5},
    {"line_search_fn": "strong_wolfe", "history_size": 3, "max_iter": 5},
    {"lr": 0.5, "max_iter": 5},
    {"lr": 0.2, "history_size": 2, "max_iter": 10, "max_eval": 8},
]


@pytest.mark.parametrize("kw", LBFGS_CASES, ids=_ids)
def test_lbfgs_matches_torch(xp, torch64, kw):
    torch = torch64
    x0 = np.array([-1.2, 1.0, -0.5, 0.3, 1.5, 0.8])
    y0 = np.array([[0.5, -0.7], [1.1, 0.2]])
    ps = [xp.asarray(x0.copy(), requires_grad=True), xp.asarray(y0.copy(), requires_grad=True)]
    tps = [torch.tensor(x0, requires_grad=True), torch.tensor(y0, requires_grad=True)]
    opt = optim.LBFGS(ps, **kw)
    topt = torch.optim.LBFGS(tps, **kw)

    def closure():
        opt.zero_grad()
        loss = _lbfgs_loss(xp, ps)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = _lbfgs_loss(torch, tps)
        loss.backward()
        return loss

    ours, ref, losses = [], [], []
    for _ in range(6):
        loss = opt.step(closure)
        tloss = topt.step(tclosure)
        losses.append((float(loss), float(tloss.detach())))
        ours.append([to_np(p) for p in ps])
        ref.append([p.detach().numpy().copy() for p in tps])
    _compare("LBFGS " + str(kw.get("line_search_fn")), ours, ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(*zip(*losses), rtol=1e-10)
    assert losses[-1][0] < losses[0][0]
    st, tst = opt.state[ps[0]], topt.state[tps[0]]
    assert set(st) == set(tst)
    assert st["n_iter"] == tst["n_iter"] and st["func_evals"] == tst["func_evals"]


def test_lbfgs_state_dict_round_trip(xp):
    x0 = np.array([-1.2, 1.0, -0.5, 0.3, 1.5, 0.8])
    y0 = np.array([[0.5, -0.7], [1.1, 0.2]])

    def make():
        ps = [xp.asarray(x0.copy(), requires_grad=True), xp.asarray(y0.copy(), requires_grad=True)]
        return ps, optim.LBFGS(ps, line_search_fn="strong_wolfe", max_iter=4)

    def closure_for(ps, opt):
        def closure():
            opt.zero_grad()
            loss = _lbfgs_loss(xp, ps)
            loss.backward()
            return loss

        return closure

    a, oa = make()
    for _ in range(2):
        oa.step(closure_for(a, oa))
    sd = oa.state_dict()
    b, ob = make()
    with ad.no_grad():
        for pb, pa in zip(b, a):
            pb.data[...] = pa.data
    ob.load_state_dict(sd)
    for _ in range(3):
        oa.step(closure_for(a, oa))
        ob.step(closure_for(b, ob))
    for pa, pb in zip(a, b):
        np.testing.assert_array_equal(to_np(pa), to_np(pb))


def test_lbfgs_errors(xp):
    p = xp.asarray([1.0], requires_grad=True)
    q = xp.asarray([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="LBFGS: line_search_fn must be one of"):
        optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="LBFGS: history_size must be an int >= 1"):
        optim.LBFGS([p], history_size=0)
    with pytest.raises(TypeError, match="LBFGS: max_iter must be an int"):
        optim.LBFGS([p], max_iter=2.5)
    with pytest.raises(ValueError, match="LBFGS: lr must be a number >= 0"):
        optim.LBFGS([p], lr=-1)
    with pytest.raises(ValueError, match="LBFGS: doesn't support parameter groups"):
        optim.LBFGS([{"params": [p]}, {"params": [q]}])
    with pytest.raises(TypeError, match="LBFGS.step: closure must be callable"):
        optim.LBFGS([p]).step(None)


# -- without torch: in place, on the device, by hand -------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True, weight_decay=0.1),
        lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
        lambda ps: optim.Adamax(ps, lr=0.1, weight_decay=0.1),
        lambda ps: optim.NAdam(ps, lr=0.1, weight_decay=0.1, decoupled_weight_decay=True),
        lambda ps: optim.RAdam(ps, lr=0.1, betas=(0.5, 0.6), weight_decay=0.1),
        lambda ps: optim.LBFGS(ps, lr=0.1, max_iter=3),
    ],
    ids=NAMES + ["LBFGS"],
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_updates_in_place_on_the_device(xp, make, dtype):
    device = None
    if xp.__name__.endswith("array_api_strict"):
        import array_api_strict

        device = array_api_strict.Device("device1")
    x0, cs, bs = _problem(3)
    ps = [xp.asarray(x.astype(dtype), requires_grad=True, device=device) for x in x0]
    buffers = [p.data for p in ps]
    opt = make(ps)

    def closure():
        opt.zero_grad()
        loss = 0
        for p, c, b in zip(ps, cs, bs):
            c = xp.asarray(c[0].astype(dtype), device=device)
            b = xp.asarray(b[0].astype(dtype), device=device)
            loss = loss + xp.sum(c * p * p) / 2 + xp.sum(b * p)
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    for p, buf, x in zip(ps, buffers, x0):
        assert p.data is buf and p.dtype == getattr(xp, dtype)
        assert not np.allclose(to_np(p), x)
        if device is not None:
            assert p.device == device
    for s in opt.state.values():
        for v in s.values():
            for a in v if isinstance(v, list) else [v]:
                if hasattr(a, "shape"):
                    assert not isinstance(a, ad.Tensor) and a.dtype == getattr(xp, dtype)
                    if device is not None:
                        assert a.device == device


def _one_step(xp, opt_cls, g, **kw):
    p = xp.asarray(np.array([1.0, -2.0, 0.5]), requires_grad=True)
    opt = opt_cls([p], **kw)
    p.grad = xp.asarray(np.asarray(g, dtype=np.float64))
    opt.step()
    return to_np(p), opt.state[p]


def test_first_steps_by_hand(xp):
    p0, g = np.array([1.0, -2.0, 0.5]), np.array([0.5, -4.0, 2.0])
    lr, eps = 0.1, 1e-3
    x, st = _one_step(xp, optim.RMSprop, g, lr=lr, alpha=0.9, eps=eps)
    np.testing.assert_allclose(x, p0 - lr * g / (np.sqrt(0.1 * g * g) + eps), rtol=1e-14)
    np.testing.assert_allclose(to_np(st["square_avg"]), 0.1 * g * g, rtol=1e-14)
    x, st = _one_step(xp, optim.RMSprop, g, lr=lr, alpha=0.9, eps=eps, centered=True)
    ga = 0.1 * g
    np.testing.assert_allclose(x, p0 - lr * g / (np.sqrt(0.1 * g * g - ga * ga) + eps))
    x, st = _one_step(xp, optim.Adagrad, g, lr=lr, initial_accumulator_value=1.0)
    np.testing.assert_allclose(x, p0 - lr * g / (np.sqrt(1.0 + g * g) + 1e-10), rtol=1e-14)
    x, st = _one_step(xp, optim.Adamax, g, lr=lr, eps=eps)
    # m = 0.1 g, u = |g| + eps: p -= lr/(1-0.9) * m/u
    np.testing.assert_allclose(x, p0 - lr * g / (np.abs(g) + eps), rtol=1e-14)
    np.testing.assert_allclose(to_np(st["exp_inf"]), np.abs(g) + eps, rtol=1e-15)
    x, st = _one_step(xp, optim.RAdam, g, lr=lr)  # rho_1 < 5: p -= lr * m/(1-b1) = lr*g
    np.testing.assert_allclose(x, p0 - lr * g, rtol=1e-14)
    x, st = _one_step(xp, optim.NAdam, g, lr=lr, eps=0.0)
    b1, md = 0.9, 4e-3
    mu1 = b1 * (1 - 0.5 * 0.96**md)
    mu2 = b1 * (1 - 0.5 * 0.96 ** (2 * md))
    sign = g / np.abs(g)  # sqrt(v/(1-b2)) = |g|, m = (1-b1) g
    expect = p0 - lr * (1 - mu1) / (1 - mu1) * sign - lr * mu2 / (1 - mu1 * mu2) * 0.1 * sign
    np.testing.assert_allclose(x, expect, rtol=1e-13)
    assert st["mu_product"] == mu1 and st["step"] == 1


def test_reduce_lr_on_plateau_by_hand(xp):
    opt = optim.SGD([xp.asarray([0.0], requires_grad=True)], lr=1.0)
    s = optim.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1, min_lr=0.2)
    seen = []
    for m in [5, 4, 4, 4, 4, 4, 4, 4, 4]:
        s.step(m)
        seen.append(s.get_last_lr()[0])
    # bad epochs: 4 is no better from the 3rd on; 2 in a row reduce; cooldown skips one
    assert seen == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25]
    s.step(4)
    assert s.get_last_lr() == [0.2]  # clamped at min_lr


def test_lbfgs_minimizes_rosenbrock(xp):
    x = xp.asarray(np.array([-1.2, 1.0]), requires_grad=True)
    opt = optim.LBFGS(
        [x], line_search_fn="strong_wolfe", max_iter=200, max_eval=500, tolerance_change=1e-15
    )

    def closure():
        opt.zero_grad()
        loss = _rosen(xp, x)
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(to_np(x), [1.0, 1.0], atol=1e-6)
