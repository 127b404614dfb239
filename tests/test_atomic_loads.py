"""A ``load_state_dict`` that fails changes nothing: modules (parameters and buffers),
every optimizer, and the learning-rate schedules; the error names the class and the
entry. Each test compares the whole state, bit for bit, before and after."""

import copy

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn as nn
import autodiff.optim as optim
from autodiff.optim import lr_scheduler

xp = ad.Autodiff(np)


def _model():
    ad.nn.init.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def _snapshot(model):
    return {k: np.array(v.data) for k, v in model.state_dict().items()}


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize(
    "bad",
    [
        np.array(["a", "b"]),  # right shape, can't be read as a float
        np.array([object(), object()], dtype=object),
    ],
    ids=["strings", "objects"],
)
def test_module_load_with_a_bad_last_value_changes_nothing(bad):
    model = _model()
    before = _snapshot(model)
    good = {k: np.full(v.shape, 7.0) for k, v in before.items()}
    good["2.bias"] = bad  # the last entry: every other one would have been written first
    with pytest.raises(TypeError, match=r"Sequential.*'2\.bias'"):
        model.load_state_dict(good)
    _same(_snapshot(model), before)
    # a good dict still loads, all of it
    good["2.bias"] = np.full(2, 7.0)
    model.load_state_dict(good)
    _same(_snapshot(model), {k: np.full(v.shape, 7.0, dtype=v.dtype) for k, v in before.items()})


OPTIMIZERS = [
    (optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    (optim.Adam, {"lr": 0.1}),
    (optim.AdamW, {"lr": 0.1}),
    (optim.RMSprop, {"lr": 0.1, "momentum": 0.5}),
    (optim.Adagrad, {"lr": 0.1}),
    (optim.Adamax, {"lr": 0.1}),
    (optim.NAdam, {"lr": 0.1}),
    (optim.RAdam, {"lr": 0.1}),
]


def _stepped(cls, kwargs):
    model = _model()
    opt = cls(model.parameters(), **kwargs)
    for _ in range(2):
        opt.zero_grad()
        x = xp.asarray(np.linspace(-1, 1, 15).reshape(5, 3), dtype=xp.float32)
        xp.sum(model(x) ** 2).backward()
        opt.step()
    return model, opt


def _opt_snapshot(opt):
    sd = opt.state_dict()
    return copy.deepcopy(
        {
            "state": {
                i: {k: np.array(v) if hasattr(v, "shape") else v for k, v in s.items()}
                for i, s in sd["state"].items()
            },
            "param_groups": sd["param_groups"],
        }
    )


def _same_opt(a, b):
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for i in a["state"]:
        assert a["state"][i].keys() == b["state"][i].keys()
        for k in a["state"][i]:
            np.testing.assert_array_equal(a["state"][i][k], b["state"][i][k])


@pytest.mark.parametrize("cls, kwargs", OPTIMIZERS, ids=[c.__name__ for c, _ in OPTIMIZERS])
@pytest.mark.parametrize("what", ["string value", "wrong shape", "bad group", "entry"])
def test_optimizer_load_with_a_bad_entry_changes_nothing(cls, kwargs, what):
    _, opt = _stepped(cls, kwargs)
    before = _opt_snapshot(opt)
    other = _stepped(cls, {**kwargs, "lr": 0.05})[1].state_dict()  # good values everywhere
    last = max(other["state"])
    key = sorted(k for k, v in other["state"][last].items() if hasattr(v, "shape"))[-1]
    if what == "string value":
        other["state"][last][key] = "zz"
    elif what == "wrong shape":
        other["state"][last][key] = np.zeros((9, 9))
    elif what == "bad group":
        other["param_groups"][-1]["lr"] = "fast"
    else:
        other["state"][last] = [1, 2]
    with pytest.raises((TypeError, ValueError), match=cls.__name__):
        opt.load_state_dict(other)
    _same_opt(_opt_snapshot(opt), before)


def _schedules(opt):
    return {
        "StepLR": lambda: lr_scheduler.StepLR(opt, 2),
        "LambdaLR": lambda: lr_scheduler.LambdaLR(opt, lambda e: 0.5**e),
        "SequentialLR": lambda: lr_scheduler.SequentialLR(
            opt,
            [lr_scheduler.StepLR(opt, 2), lr_scheduler.ExponentialLR(opt, 0.5)],
            milestones=[3],
        ),
    }


@pytest.mark.parametrize("name", ["StepLR", "LambdaLR", "SequentialLR"])
def test_schedule_load_with_a_bad_entry_changes_nothing(name):
    _, opt = _stepped(optim.SGD, {"lr": 0.1})
    sched = _schedules(opt)[name]()
    for _ in range(4):
        sched.step()
    good = copy.deepcopy(sched.state_dict())
    bad = copy.deepcopy(good)
    bad["last_epoch"] = 99
    if name == "StepLR":
        bad["bogus"] = 1  # no state of a StepLR
    elif name == "LambdaLR":
        bad["lr_lambdas"] = ["not a dict"]
    else:
        bad["_schedulers"][1] = {"last_epoch": 5, "bogus": 2}  # the inner one fails
    skip = ("optimizer", "_schedulers")  # objects: each inner schedule is compared itself
    before = [
        copy.deepcopy({k: v for k, v in vars(s).items() if k not in skip})
        for s in [sched, *getattr(sched, "_schedulers", ())]
    ]
    with pytest.raises((TypeError, ValueError), match=r"LR\.load_state_dict"):
        sched.load_state_dict(bad)
    after = [
        {k: v for k, v in vars(s).items() if k not in skip}
        for s in [sched, *getattr(sched, "_schedulers", ())]
    ]
    assert before == after
    assert sched.last_epoch == good["last_epoch"]
