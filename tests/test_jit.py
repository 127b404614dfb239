"""``ad.jit``: values equal eager (the same kernels run), gradients equal hand-derived
formulas, one trace per signature (a new shape, dtype, tree structure or static argument
traces again), host reads raise naming the user's line, data-dependent shapes and random
draws are never stale, and what writes state is refused."""

import copy
import inspect

import array_api_strict as xs
import numpy as np
import pytest
from array_api_compat import array_namespace
from autodiff.backends import generic

import autodiff as ad
import autodiff.nn as nn
import autodiff.nn.functional as F
from autodiff.transforms.jit import HostReadError
from gradcheck.specs import SPECS

xp = ad.Autodiff(np)
rng = np.random.default_rng(0)


def chain(x):
    """A chain of element-wise ops and a reduction, on the namespace of ``x``."""
    a = array_namespace(x)
    for _ in range(5):
        x = a.tanh(x * 1.01 + 0.1)
    return a.sum(x**2)


def sin2(x):
    a = array_namespace(x)
    return a.sum(a.sin(x) ** 2)  # d/dx = sin(2x)


# -- values -----------------------------------------------------------------------------------
@pytest.mark.parametrize("lib", ["numpy", "array_api_strict"])
def test_forward_grad_and_value_and_grad_equal_eager_bit_for_bit(lib):
    asarray = np.asarray if lib == "numpy" else xs.asarray
    for transform in (lambda f: f, ad.grad, ad.value_and_grad):
        eager, jitted = transform(chain), ad.jit(transform(chain))
        for _ in range(3):  # the trace, then two replays on new values
            x = asarray(rng.standard_normal(6))
            got, want = jitted(x), eager(x)
            for g, w in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want))):
                assert type(g) is type(w)
                assert np.array_equal(np.asarray(g), np.asarray(w))
        assert jitted.traces == 1


def test_replayed_gradient_equals_the_hand_derived_one():
    g = ad.jit(ad.grad(sin2))
    for _ in range(3):
        x = rng.standard_normal(5)
        np.testing.assert_allclose(g(x), np.sin(2 * x), rtol=1e-13, atol=1e-15)
    assert g.traces == 1


def test_tensors_in_give_tensors_out():
    jf = ad.jit(sin2)
    for _ in range(2):
        x = rng.standard_normal(4)
        out = jf(xp.asarray(x))
        assert type(out) is type(xp.asarray(x))
        assert out.data == np.sum(np.sin(x) ** 2)
    assert jf.traces == 1


def test_transforms_compose_under_jit():
    X0 = rng.standard_normal((4, 3))
    per_example = ad.jit(ad.vmap(ad.grad(sin2)))
    hess = ad.jit(ad.hessian(sin2))  # forward over reverse: d2/dx2 sin(x)^2 = 2 cos(2x)
    for X in (X0, X0 + 1):
        np.testing.assert_allclose(per_example(X), np.sin(2 * X), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(hess(X[0]), np.diag(2 * np.cos(2 * X[0])), atol=1e-14)
    assert per_example.traces == 1 and hess.traces == 1


def test_torch_tensors_in_give_torch_tensors_out():
    torch = pytest.importorskip("torch")
    g, eager = ad.jit(ad.grad(chain)), ad.grad(chain)
    for _ in range(2):
        x = torch.asarray(rng.standard_normal(5))
        got = g(x)
        assert type(got) is torch.Tensor and torch.equal(got, eager(x))
    assert g.traces == 1


def test_jit_called_inside_grad_is_differentiated_as_its_eager_self():
    jf = ad.jit(sin2)
    x = rng.standard_normal(3)
    np.testing.assert_allclose(ad.grad(lambda x: jf(x))(x), np.sin(2 * x), rtol=1e-13)
    assert jf.traces == 0  # a Tensor that requires grad runs f eagerly


def test_a_namespace_captured_outside_the_function_is_traced():
    def f(x):  # xp made outside f, as in eager code; its creation functions recorded
        y = xp.tanh(x * 1.01 + 0.1) + xp.ones(3)
        z = xp.zeros(3)
        z[0] = y[1]
        return xp.sum(y**2) + xp.sum(z)

    for transform in (lambda f: f, ad.grad, ad.value_and_grad):
        eager, jitted = transform(f), ad.jit(transform(f))
        for _ in range(2):
            x = rng.standard_normal(3)
            got, want = jitted(x), eager(x)
            for g, w in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want))):
                assert type(g) is type(w)
                assert np.array_equal(getattr(g, "data", g), getattr(w, "data", w))
        assert jitted.traces == 1


def test_numpy_ufuncs_on_a_traced_numpy_array_are_recorded_other_functions_raise():
    """A ufunc on a traced NumPy array is the backend's own function: recorded (so is
    ``np.float64(2) * x``, which NumPy sends to the ufunc); NumPy's other functions
    raise naming the line."""
    f = ad.jit(lambda x: np.sin(x) * np.float64(2.0))
    for x in (np.ones(2), np.full(2, 0.5)):
        assert np.array_equal(f(x), np.sin(x) * 2.0)
    assert f.traces == 1
    match = f"numpy.concatenate called on a traced array at {__file__}"
    with pytest.raises(TypeError, match=match):
        ad.jit(lambda x: np.concatenate([x, x]))(np.ones(2))


# -- the signature ----------------------------------------------------------------------------
def test_same_signature_replays_and_a_new_one_traces_again():
    calls = []

    def f(x, y):
        calls.append(1)  # a Python side effect: at trace time only
        return x * y["a"]

    jf = ad.jit(f)
    x = np.ones(3)
    jf(x, {"a": 2 * x})
    assert np.array_equal(jf(x + 1, {"a": 3 * x}), [6.0, 6.0, 6.0])
    assert jf.traces == 1 and len(calls) == 1
    jf(np.ones(4), {"a": np.ones(4)})  # a new shape
    assert jf.traces == 2
    out = jf(np.ones(4, dtype=np.float32), {"a": np.ones(4, dtype=np.float32)})  # dtype
    assert jf.traces == 3 and out.dtype == np.float32
    jf(x, {"a": x, "b": x})  # a new tree structure
    assert jf.traces == 4
    jf(x, {"a": x})  # one array passed twice: aliasing is part of the signature
    assert jf.traces == 5
    jf(x, {"a": x + 1})  # back to the first signature: cached
    assert jf.traces == 5 and len(calls) == 5


@pytest.mark.parametrize("lib", [np, xs], ids=["numpy", "strict"])
def test_arrays_alone_replay_and_retrace_as_trees_do(lib):
    # positional arrays take the call's short path: the same signature rules hold there
    def f(x, y):
        return x * y + 1.0

    jf = ad.jit(f)
    x, y = lib.asarray([1.0, 2.0]), lib.asarray([3.0, 4.0])
    for _ in range(3):  # one trace; later calls find it by the short key
        out = jf(x, y)
    assert np.array_equal(np.asarray(out), [4.0, 9.0]) and jf.traces == 1
    assert np.array_equal(np.asarray(jf(y, x)), [4.0, 9.0]) and jf.traces == 1
    assert np.array_equal(np.asarray(jf(x, x)), [2.0, 5.0]) and jf.traces == 2  # aliased
    x32 = lib.asarray([1.0, 2.0], dtype=lib.float32)
    out = jf(x32, x32)  # a new dtype
    assert out.dtype == lib.float32 and jf.traces == 3
    assert np.array_equal(np.asarray(jf(lib.ones(3), lib.ones(3))), [2.0] * 3)  # a new shape
    assert jf.traces == 4
    with ad.no_grad():  # the recording mode is part of the signature
        assert np.array_equal(np.asarray(jf(x, y)), [4.0, 9.0])
    assert jf.traces == 5
    assert np.array_equal(np.asarray(jf(x, 2.0)), [3.0, 5.0])  # a Python number: by value
    assert np.array_equal(np.asarray(jf(x, 3.0)), [4.0, 7.0]) and jf.traces == 7


def test_an_array_the_function_closes_over_is_read_on_each_replay():
    scale = np.array([1.0, 2.0])
    jf = ad.jit(lambda x: x * scale)
    assert np.array_equal(jf(np.ones(2)), [1.0, 2.0])
    scale[...] = 3.0  # written in place: the replay sees it, as eager does
    assert np.array_equal(jf(np.ones(2)), [3.0, 3.0]) and jf.traces == 1


def test_static_arguments_are_part_of_the_signature():
    def power(x, n, *, scale):
        for _ in range(n):
            x = x * scale
        return x

    jp = ad.jit(power, static_argnums=1, static_argnames="scale")
    x = np.ones(2)
    assert np.array_equal(jp(x, 2, scale=3.0), [9.0, 9.0])
    assert np.array_equal(jp(x, 3, scale=3.0), [27.0, 27.0])
    assert np.array_equal(jp(x + 1, 3, scale=3.0), [54.0, 54.0])
    assert np.array_equal(jp(x, 3, scale=2.0), [8.0, 8.0])
    assert jp.traces == 3
    with pytest.raises(TypeError, match="static argument"):
        jp(x, [1], scale=1.0)


# -- never stale ------------------------------------------------------------------------------
def test_a_host_read_raises_naming_the_users_line():
    def branch(x):
        a = array_namespace(x)
        if a.sum(x) > 0:  # host read: the line the error names
            return x
        return -x

    def scalar(x):
        return x * float(array_namespace(x).max(x))  # host read

    for f, word in ((branch, "bool()"), (scalar, "float()")):
        line = next(i for i, s in enumerate(inspect.getsource(f).splitlines()) if "host read" in s)
        line += f.__code__.co_firstlineno
        with pytest.raises(HostReadError) as info:
            ad.jit(f)(np.ones(3))
        msg = str(info.value)
        assert word in msg and f"{__file__}, line {line}" in msg, msg
        with pytest.raises(TypeError):  # a TypeError, as jax's
            ad.jit(ad.grad(lambda x: f(x).sum()))(np.ones(3))


def test_a_data_dependent_shape_is_checked_on_replay():
    def positive(x):
        return array_namespace(x).sum(x[x > 0] ** 2)

    jf, jg = ad.jit(positive), ad.jit(ad.grad(positive))
    for x in ([1.0, -1.0, 2.0], [1.0, 1.0, 2.0], [-1.0, 3.0, -2.0]):
        x = np.array(x)
        assert jf(x) == np.sum(x[x > 0] ** 2)
        assert np.array_equal(jg(x), np.where(x > 0, 2 * x, 0.0))
    assert jf.traces == 3 and jg.traces == 3  # each new mask count traced again
    assert jf(np.array([5.0, -1.0, -7.0])) == 25.0  # the last count again: replayed
    assert jf.traces == 3


def test_dropout_draws_a_fresh_mask_on_each_replay_as_eager_does():
    def f(x):
        return F.dropout(x, 0.5)

    x = xp.ones(64)
    generic._rng = np.random.default_rng(7)  # the generator bernoulli draws from
    eager = [f(x).data for _ in range(3)]
    generic._rng = np.random.default_rng(7)
    jf = ad.jit(f)
    jitted = [jf(x).data for _ in range(3)]
    assert jf.traces == 1
    for e, j in zip(eager, jitted):
        assert np.array_equal(e, j)
    assert not np.array_equal(jitted[1], jitted[2])  # a fresh mask: P(equal) = 2**-64
    assert set(np.unique(jitted[2])) == {0.0, 2.0}


# -- state: not supported yet, refused --------------------------------------------------------
F32 = np.float32


def _mlp():
    nn.init.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def _x(n=5):
    return xp.asarray(rng.standard_normal((n, 3)).astype(F32))


def _snapshot(model):
    """Each parameter's and buffer's value and gradient, as NumPy copies."""
    out = {}
    for k, v in model.state_dict().items():
        out[k] = np.array(v.data, copy=True)
    for k, p in model.named_parameters():
        out[k + ".grad"] = None if p.grad is None else np.array(p.grad.data, copy=True)
    return out


def _unchanged(a, b):
    return a.keys() == b.keys() and all(
        (a[k] is None and b[k] is None) or np.array_equal(a[k], b[k]) for k in a
    )


def test_module_parameters_are_read_on_each_replay():
    """State f reads (parameters it does not take) is an input of the program: an update
    made outside is seen by the next replay; a replaced parameter traces again."""
    model, x = _mlp(), _x()
    f = ad.jit(lambda x: model(x))
    assert np.array_equal(f(x).data, model(x).data)
    assert np.array_equal(f(x).data, model(x).data) and f.traces == 1
    with ad.no_grad():
        for p in model.parameters():
            p -= 0.25  # in place
    assert np.array_equal(f(x).data, model(x).data) and f.traces == 1
    model[0].weight.data = model[0].weight.data * 2  # a new buffer, same parameter
    assert np.array_equal(f(x).data, model(x).data) and f.traces == 1
    model[2].weight = nn.Parameter(xp.ones((2, 4), dtype=xp.float32))  # another parameter
    assert np.array_equal(f(x).data, model(x).data) and f.traces == 2


def test_a_gradient_through_state_equals_eager():
    model, x = _mlp(), _x()

    def loss(x):
        return xp.sum(model(x) ** 2)

    g = ad.jit(ad.grad(loss))
    for _ in range(3):
        x = _x()
        assert np.array_equal(g(x).data, ad.grad(loss)(x).data)
    assert g.traces == 1 and all(p.grad is None for p in model.parameters())


def test_a_closed_over_tensor_is_read_on_each_replay():
    w = xp.asarray(np.array([1.0, 2.0, 3.0]))
    f = ad.jit(lambda x: x * w)
    x = np.ones(3)
    assert np.array_equal(f(x), [1.0, 2.0, 3.0])
    w[0] = 5.0
    assert np.array_equal(f(x), [5.0, 2.0, 3.0]) and f.traces == 1


def test_mode_and_settings_retrace():
    """A module's mode (train/eval) and settings (a slope) are read when tracing: a
    replay needs the same, else f is traced again (once per mode: both are kept)."""
    nn.init.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.LeakyReLU(0.1))
    model.eval()
    x = _x()
    f = ad.jit(lambda x: model(x))
    assert np.array_equal(f(x).data, model(x).data) and f.traces == 1
    model[2].negative_slope = 0.3
    assert np.array_equal(f(x).data, model(x).data) and f.traces == 2
    model.train()  # BatchNorm writes its running statistics: state the replay writes
    twin = copy.deepcopy(model)
    for _ in range(3):
        assert np.array_equal(f(x).data, twin(x).data)
    assert _unchanged(_snapshot(model), _snapshot(twin)) and f.traces == 3
    model.eval()
    assert np.array_equal(f(x).data, model(x).data) and f.traces == 3  # eval's, kept


def _training(make, steps=20, jit=False, loss_of=None):
    """``steps`` torch-style training steps of ``make()``'s (model, optimizer, data):
    the losses, the model and the optimizer, and how many traces ``jit`` took."""
    model, opt, batches = make()

    def step(x, y):
        opt.zero_grad()
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        return loss

    run = ad.jit(step) if jit else step
    losses = [run(x, y).data for x, y in batches[:steps]]
    return losses, model, opt, getattr(run, "traces", None)


def _mlp_sgd(layers=None, opt=None):
    def make():
        nn.init.manual_seed(0)
        model = nn.Sequential(*(layers() if layers else (nn.Linear(4, 8), nn.Tanh(),
                                                         nn.Linear(8, 3))))  # fmt: skip
        data = np.random.default_rng(5)
        batches = [(xp.asarray(data.standard_normal((6, 4)).astype(F32)),
                    xp.asarray(data.integers(0, 3, 6))) for _ in range(20)]  # fmt: skip
        return (
            model,
            (opt or (lambda p: ad.optim.SGD(p, lr=0.1, momentum=0.9)))(model.parameters()),
            batches,
        )

    return make


def _gru():
    nn.init.manual_seed(0)
    model = nn.GRU(4, 6, batch_first=True)
    data = np.random.default_rng(6)
    batches = [(xp.asarray(data.standard_normal((3, 5, 4)).astype(F32)),
                xp.asarray(data.standard_normal((3, 5, 6)).astype(F32)))
               for _ in range(10)]  # fmt: skip
    return model, ad.optim.SGD(model.parameters(), lr=0.05, momentum=0.5), batches


def _cnn():
    """A small digits-style CNN: convolution, BatchNorm, pooling, Dropout; Adam."""
    nn.init.manual_seed(0)
    layers = (nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
              nn.Flatten(), nn.Dropout(0.25), nn.Linear(16, 3))  # fmt: skip
    model = nn.Sequential(*layers)
    data = np.random.default_rng(7)
    batches = [(xp.asarray(data.standard_normal((5, 1, 4, 4)).astype(F32)),
                xp.asarray(data.integers(0, 3, 5))) for _ in range(20)]  # fmt: skip
    return model, ad.optim.Adam(model.parameters(), lr=0.01), batches


CROSS_ENTROPY = lambda model, x, y: F.cross_entropy(model(x), y)  # noqa: E731
TRAININGS = {
    "mlp, SGD with momentum": (_mlp_sgd(), CROSS_ENTROPY, 2),
    "mlp, Adam": (_mlp_sgd(opt=lambda p: ad.optim.Adam(p, lr=0.01)), CROSS_ENTROPY, 2),
    "mlp, NAdam": (_mlp_sgd(opt=lambda p: ad.optim.NAdam(p, lr=0.01)), CROSS_ENTROPY, 2),
    # RAdam's step count decides a branch in Python: each step traces again
    "mlp, RAdam": (_mlp_sgd(opt=lambda p: ad.optim.RAdam(p, lr=0.01)), CROSS_ENTROPY, 20),
    "BatchNorm, SGD": (
        _mlp_sgd(lambda: (nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))),
        CROSS_ENTROPY,
        2,
    ),
    "GRU, SGD": (_gru, lambda model, x, y: F.mse_loss(model(x)[0], y), 2),
    "CNN with BatchNorm and Dropout, Adam": (_cnn, CROSS_ENTROPY, 2),
}


@pytest.mark.parametrize("case", sorted(TRAININGS))
def test_a_training_step_under_jit_leaves_what_eager_leaves(case):
    """opt.zero_grad(); loss.backward(); opt.step() under jit: the same losses, parameters,
    gradients, buffers and optimizer state as eager, bit for bit. The first trace makes
    the optimizer's state and the gradients, the second replays from then on (Adam's
    step count, a Python number, is read anew by each replay)."""
    make, loss_of, traces = TRAININGS[case]
    want_losses, want_model, want_opt, _ = _training(make, loss_of=loss_of)
    losses, model, opt, n = _training(make, jit=True, loss_of=loss_of)
    steps = len(want_losses)
    assert all(np.array_equal(a, b) for a, b in zip(losses, want_losses))
    assert _unchanged(_snapshot(model), _snapshot(want_model))
    for p, q in zip(opt.state.values(), want_opt.state.values()):
        assert p.keys() == q.keys()
        for k in p:
            assert np.array_equal(np.asarray(p[k]), np.asarray(q[k]))
    assert n == min(traces, steps)


OPTIMIZERS = {  # the numbers each reads anew on a replay: its lr, its step count...
    "Adam": lambda p: ad.optim.Adam(p, lr=0.01),
    "AdamW, amsgrad": lambda p: ad.optim.AdamW(p, lr=0.01, amsgrad=True),
    "NAdam": lambda p: ad.optim.NAdam(p, lr=0.01),
    "Adamax": lambda p: ad.optim.Adamax(p),
    "Adagrad": lambda p: ad.optim.Adagrad(p, lr=0.1, lr_decay=0.01),
    "RMSprop": lambda p: ad.optim.RMSprop(p, lr=0.01, centered=True, momentum=0.9),
    "SGD": lambda p: ad.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_step_counts_and_a_schedule_are_read_by_each_replay(name, dtype):
    """An optimizer's step count and a schedule's learning rate change every step: each
    replay reads them (no trace per step) and leaves what eager leaves, bit for bit,
    with no promotion of float32 parameters (the numbers stay Python's)."""

    def run(jit):
        nn.init.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(dtype=dtype)
        opt = OPTIMIZERS[name](model.parameters())
        sched = ad.optim.lr_scheduler.StepLR(opt, 3, gamma=0.5)
        data = np.random.default_rng(1)
        x = xp.asarray(data.standard_normal((16, 4)).astype(dtype))
        y = xp.asarray(data.integers(0, 3, 16))

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        f = ad.jit(step) if jit else step
        losses = []
        for _ in range(12):
            losses.append(f(x, y).data)
            sched.step()
        return losses, model, opt, getattr(f, "traces", None)

    want, want_model, want_opt, _ = run(False)
    got, model, opt, traces = run(True)
    assert traces == 2  # the first step makes the state, the second is replayed from then
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert _unchanged(_snapshot(model), _snapshot(want_model))
    assert all(p.data.dtype == np.dtype(dtype) for p in model.parameters())
    for p, q in zip(opt.state.values(), want_opt.state.values()):
        assert {k: type(v) for k, v in p.items()} == {k: type(v) for k, v in q.items()}
        assert all(np.array_equal(np.asarray(p[k]), np.asarray(q[k])) for k in p)
    assert opt.param_groups[0]["lr"] == want_opt.param_groups[0]["lr"]


def test_other_hyper_parameters_retrace():
    nn.init.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = ad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = xp.asarray(np.ones((4, 3), dtype=F32)), xp.asarray(np.array([0, 1, 1, 0]))

    @ad.jit
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step(x, y)
    assert step.traces == 2
    opt.param_groups[0]["lr"] = 0.05  # read by the replay
    step(x, y)
    assert step.traces == 2
    opt.param_groups[0]["momentum"] = 0.5  # baked into the program: traced again
    step(x, y)
    assert step.traces == 3


def test_state_written_outside_modules_is_written_on_each_replay():
    w = xp.zeros(3, dtype=xp.float32)

    def record(x):
        w[0] = x[0]  # a Tensor f closes over, written in place
        w[1:] += 1.0
        return x * 2

    f = ad.jit(record)
    for i in range(3):
        f(xp.asarray(np.full(2, i, dtype=F32)))
    assert np.array_equal(w.data, [2.0, 3.0, 3.0]) and f.traces == 1


def test_a_failed_trace_leaves_the_state_as_it_was():
    model, x = _mlp(), _x(4)
    opt = ad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        xp.sum(model(x) ** 2).backward()
        opt.step()  # writes the parameters in place, makes the momentum buffers
        raise ValueError("after the step")

    before = _snapshot(model)
    with pytest.raises(ValueError, match="after the step"):
        ad.jit(step)(x)
    assert _unchanged(_snapshot(model), before) and opt.state == {}


def test_dropout_modules_draw_their_seeds_on_each_replay_as_eager_does():
    """nn.Dropout, MultiheadAttention's and a GRU's dropout draw a seed from nn.init's
    generator per call: each replay draws it again (fresh masks, the losses of eager bit
    for bit), from the generator in place then (manual_seed replaces it)."""

    def run(jit):
        nn.init.manual_seed(0)
        mlp = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.ReLU(), nn.Linear(16, 3))
        mha = nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True)
        gru = nn.GRU(4, 5, num_layers=2, dropout=0.4, batch_first=True)
        params = [*mlp.parameters(), *mha.parameters(), *gru.parameters()]
        opt = ad.optim.Adam(params, lr=0.01)
        data = np.random.default_rng(0)
        x, y = xp.asarray(data.standard_normal((8, 4)).astype(F32)), xp.asarray(np.arange(8) % 3)
        s = xp.asarray(data.standard_normal((2, 5, 8)).astype(F32))
        q = xp.asarray(data.standard_normal((2, 5, 4)).astype(F32))

        def step(x, y, s, q):
            opt.zero_grad()
            loss = F.cross_entropy(mlp(x), y) + xp.mean(mha(s, s, s)[0] ** 2)
            loss = loss + xp.mean(gru(q)[0] ** 2)
            loss.backward()
            opt.step()
            return loss

        f = ad.jit(step) if jit else step
        losses = [f(x, y, s, q).data for _ in range(6)]
        nn.init.manual_seed(7)  # a new generator: the replay draws from it
        losses += [f(x, y, s, q).data for _ in range(3)]
        return losses, [p.data for p in params], getattr(f, "traces", None)

    want, want_params, _ = run(False)
    got, params, traces = run(True)
    assert traces == 2 and len({float(v) for v in got}) == len(got)  # fresh masks
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert all(np.array_equal(a, b) for a, b in zip(params, want_params))


def test_what_reads_state_to_python_or_draws_a_host_seed_is_refused():
    model = _mlp()
    w = xp.ones(3, dtype=xp.float32)
    before, w0 = _snapshot(model), np.array(w.data, copy=True)
    made = lambda x: nn.Linear(3, 3)(x)  # noqa: E731  (initialized by nn.init's generator)

    for f in (lambda x: x * float(w[0]), made, lambda x: model(x) * w[0].item()):
        for x in (_x(4), _x(4).data):  # Tensors in, raw arrays in
            with pytest.raises(NotImplementedError, match="not supported"):
                ad.jit(f)(x)
            assert _unchanged(_snapshot(model), before) and np.array_equal(w.data, w0)


# -- every op of the registry ---------------------------------------------------------------
def _spec_functions(sample):
    def forward(*ins):
        return sample.call(array_namespace(*ins), *ins)

    def loss(*ins):  # every floating output summed (complex: real and imaginary parts)
        a = array_namespace(*ins)
        out = sample.call(a, *ins)
        total = 0.0
        for v in out if isinstance(out, (tuple, list)) else (out,):
            if a.isdtype(v.dtype, "complex floating"):
                v = a.real(v) + a.imag(v)
            if a.isdtype(v.dtype, "real floating"):
                total = total + a.sum(v)
        return total

    argnums = tuple(range(len(sample.inputs)))
    return forward, ad.grad(loss, argnums=argnums)


def _same(got, want):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w)
        g, w = np.asarray(getattr(g, "data", g)), np.asarray(getattr(w, "data", w))
        assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_op_under_jit_equals_eager_bit_for_bit(name):
    """Forward (Tensors in) and gradient (arrays in) of each spec sample: the trace, a
    replay and a replay on other values equal eager exactly (the same NumPy kernels run)."""
    for sample in SPECS[name].samples():
        forward, gradient = _spec_functions(sample)
        arrays = [np.asarray(i) for i in sample.inputs]
        moved = [np.asarray(a * 1.001) if a.dtype.kind in "fc" else a for a in arrays]
        for f, tensors in ((forward, True), (gradient, False)):
            jf = ad.jit(f)
            for ins in (arrays, arrays, moved):
                ins = [xp.asarray(a) for a in ins] if tensors else ins
                _same(jf(*ins), f(*ins))
            assert jf.traces == 1, sample.label


@pytest.mark.parametrize("clip", [None, 0.5])
def test_fit_with_jit_trains_as_without(clip):
    """training.fit(..., jit=True): the same losses and parameters, bit for bit, over two
    epochs whose last batch is shorter (another shape: traced again, then replayed)."""
    from autodiff.training import fit

    data = np.random.default_rng(7)
    x = data.standard_normal((50, 4)).astype(F32)
    y = data.integers(0, 3, 50)
    batches = [(xp.asarray(x[i : i + 16]), xp.asarray(y[i : i + 16])) for i in range(0, 50, 16)]
    results = []
    for jit in (False, True):
        model, opt, _ = _mlp_sgd()()
        history = fit(model, F.cross_entropy, opt, batches, epochs=2, clip_grad_norm=clip,
                      progress=False, jit=jit)  # fmt: skip
        results.append((history.losses, _snapshot(model)))
    (want, want_model), (got, got_model) = results
    assert got == want and _unchanged(got_model, want_model)


def test_a_trace_in_one_thread_leaves_the_eager_code_of_others_alone():
    """While one thread traces, another runs a module eagerly: its parameters are not
    lifted into the program, its result is a plain array, and the trace still replays."""
    import threading

    nn.init.manual_seed(0)
    traced, other = nn.Linear(3, 2), nn.Linear(3, 2)
    inside, done = threading.Event(), threading.Event()
    x = xp.asarray(np.arange(6.0, dtype=F32).reshape(2, 3))

    def f(x):
        y = traced(x)
        if not done.is_set():  # the first call: let the other thread run mid-trace
            inside.set()
            done.wait(timeout=60)
        return xp.sum(y)

    got = {}

    def eager():
        inside.wait(timeout=60)
        try:
            got["y"] = other(x)
        finally:
            done.set()

    thread = threading.Thread(target=eager)
    thread.start()
    jf = ad.jit(f)
    first = jf(x)
    thread.join(timeout=60)
    w, b = other.weight.data, other.bias.data
    assert type(got["y"].data) is np.ndarray and type(w) is np.ndarray
    assert np.array_equal(got["y"].data, x.data @ w.T + b)
    assert np.array_equal(jf(x).data, first.data) and jf.traces == 1
    assert np.array_equal(first.data, f(x).data)
