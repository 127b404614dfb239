"""``autodiff.training``: minibatches, the fit loop, its history and plots."""

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn, optim
from autodiff.nn import functional as F
from autodiff.training import History, batches, fit, plot_losses


def test_batches_cover_every_row_once(xp):
    X = xp.asarray(np.arange(23.0)[:, None] * np.ones((1, 2)))
    Y = xp.asarray(np.arange(23))
    b = batches(X, Y, batch_size=5, seed=0)
    assert len(b) == 5
    parts = list(b)
    assert [tuple(x.shape) for x, _ in parts] == [(5, 2)] * 4 + [(3, 2)]
    seen = np.concatenate([np.asarray(y.data) for _, y in parts])
    assert sorted(seen) == list(range(23)) and list(seen) != list(range(23))
    for x, y in parts:  # rows stay paired
        np.testing.assert_array_equal(np.asarray(x.data)[:, 0], np.asarray(y.data))
    again = np.concatenate([np.asarray(y.data) for _, y in b])
    assert list(again) != list(seen)  # a fresh permutation each pass
    first = [np.asarray(y.data) for _, y in batches(X, Y, batch_size=5, seed=0)]
    assert all(np.array_equal(a, np.asarray(y.data)) for a, (_, y) in zip(first, parts))


def test_batches_options_and_errors(xp):
    X = xp.asarray(np.arange(10.0))
    b = batches(X, batch_size=4, shuffle=False, drop_last=True)
    assert len(b) == 2
    assert [list(np.asarray(x.data)) for (x,) in b] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="share their first axis, got 10 and 3"):
        batches(X, xp.asarray(np.arange(3.0)), batch_size=2)
    with pytest.raises(ValueError, match="batch_size must be positive"):
        batches(X, batch_size=0)


def test_batches_stay_on_the_device():
    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    X = strict.asarray(np.arange(12.0).reshape(6, 2), device=dev)
    for (x,) in batches(X, batch_size=4):
        assert x.device == dev


def _problem(xp):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
    return xp.asarray(x), xp.asarray(y)


def test_fit_trains_and_records(xp):
    X, Y = _problem(xp)
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16, xp=xp, dtype=xp.float64), nn.Tanh(),
                          nn.Linear(16, 2, xp=xp, dtype=xp.float64))  # fmt: skip
    opt = optim.Adam(model.parameters(), lr=0.05)
    sched = optim.StepLR(opt, step_size=1, gamma=0.9)
    calls = []

    def evaluate(m):
        calls.append((m.training, ad.is_grad_enabled()))
        pred = xp.argmax(m(X), axis=1)
        return {"accuracy": float(xp.mean(xp.astype(pred == Y, xp.float64)))}

    h = fit(model, F.cross_entropy, opt, batches(X, Y, batch_size=32, seed=1), epochs=30,
            scheduler=sched, evaluate=evaluate, progress=False)  # fmt: skip
    assert len(h.losses) == 30 * 3 and len(h.epoch_losses) == 30
    np.testing.assert_allclose(h.epoch_losses[0], np.mean(h.losses[:3]))
    assert h.epoch_losses[-1] < 0.5 * h.epoch_losses[0]
    assert len(h.metrics["accuracy"]) == 30 and h.metrics["accuracy"][-1] > 0.9
    assert calls[0] == (False, False) and model.training  # eval mode, no graph; back to train
    np.testing.assert_allclose(opt.param_groups[0]["lr"], 0.05 * 0.9**30)
    assert h.seconds > 0 and "epochs=30" in repr(h)
    # the recorded loss is the loss of the batch before its step
    x0, y0 = next(iter(batches(X, Y, batch_size=96, shuffle=False)))
    before = float(F.cross_entropy(model(x0), y0))
    h2 = fit(model, F.cross_entropy, opt, [(x0, y0)], epochs=1, progress=False, history=h)
    assert h2 is h and h.losses[-1] == pytest.approx(before, rel=1e-12)


def test_fit_clips_the_gradient_norm():
    xp = ad.Autodiff(np)
    X, Y = _problem(xp)
    model = nn.Linear(2, 2, xp=xp, dtype=xp.float64)
    w0 = np.asarray(model.weight.data).copy()
    b0 = np.asarray(model.bias.data).copy()
    opt = optim.SGD(model.parameters(), lr=1.0)
    fit(model, lambda out, y: 1000 * F.cross_entropy(out, y), opt, [(X, Y)], progress=False,
        clip_grad_norm=0.5)  # fmt: skip
    dw = np.asarray(model.weight.data) - w0
    db = np.asarray(model.bias.data) - b0
    step = np.sqrt(np.sum(dw**2) + np.sum(db**2))  # lr 1: the step is the clipped gradient
    np.testing.assert_allclose(step, 0.5, rtol=1e-5)


def test_fit_progress_bar_shows_the_loss(capsys):
    xp = ad.Autodiff(np)
    X, Y = _problem(xp)
    model = nn.Linear(2, 2, xp=xp, dtype=xp.float64)
    opt = optim.SGD(model.parameters(), lr=0.1)
    fit(model, F.cross_entropy, opt, batches(X, Y, batch_size=8), epochs=1, log_every=2)
    err = capsys.readouterr().err
    assert "epoch 1/1" in err and "12/12" in err and "loss=" in err


def test_plots():
    matplotlib = pytest.importorskip("matplotlib", reason="plots need matplotlib")
    matplotlib.use("Agg")
    h = History()
    h.losses = [1.0, 0.5, 0.25, 0.2]
    h.epoch_losses = [0.75, 0.225]
    h.metrics = {"accuracy": [0.5, 0.9]}
    ax = h.plot()
    lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    assert list(lines["step loss"]) == h.losses and list(lines["epoch mean"]) == h.epoch_losses
    assert ax.get_yscale() == "log"
    ax = plot_losses({"a": [1.0, -1.0]})
    assert ax.get_yscale() == "linear"  # a negative value: no log scale
