"""``ad.checkpoint``: gradients bit-identical to the plain ones (backward, grad, vjp,
create_graph, closures over module parameters, dropout, tuple outputs, keywords), clear
errors where a recomputation can't be trusted, and a measured drop in peak memory."""

import tracemalloc

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn.functional as F
from autodiff import nn

NP = ad.Autodiff(np)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 8))


def raw(a):
    return np.asarray(a.data if isinstance(a, ad.Tensor) else a)


def eq(a, b):
    np.testing.assert_array_equal(raw(a), raw(b))


def block(seed=0, dropout=0.0):
    nn.init.manual_seed(seed)
    layers = [nn.Linear(8, 8, dtype="float64"), nn.LayerNorm(8, dtype="float64"), nn.GELU()]
    return nn.Sequential(*layers, *([nn.Dropout(dropout)] if dropout else []))


def net(n=3, dropout=0.0):
    return [block(i, dropout) for i in range(n)]


def run(layers, wrap, x=X, xp=NP):
    """x.grad and every parameter's grad after sum(h^2).backward() through ``layers``."""
    for m in layers:
        m.zero_grad()
    x = xp.asarray(x, requires_grad=True)
    h = x
    for m in layers:
        h = wrap(m)(h)
    loss = xp.sum(h * h)
    loss.backward()
    return [loss, x.grad] + [p.grad for m in layers for p in m.parameters()]


def same_runs(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        eq(u, v)


def plain(f):
    return f


# -- exact gradients ---------------------------------------------------------------------
def test_backward_module_and_closure_equal_plain(xp):
    layers = net()
    # xp: numpy and array_api_strict; the modules' parameters are numpy's
    if xp is not NP:
        layers = [m.to(xp) for m in layers]
    x = xp.asarray(X)
    ref = run(layers, plain, x, xp)
    same_runs(run(layers, ad.checkpoint, x, xp), ref)
    same_runs(run(layers, lambda m: ad.checkpoint(lambda h: m(h)), x, xp), ref)


def test_grad_and_vjp_equal_plain():
    m = block()

    def loss(f):
        return lambda x: NP.sum(f(x) ** 2)

    x = NP.asarray(X)
    eq(ad.grad(loss(ad.checkpoint(m)))(x), ad.grad(loss(m))(x))
    out, f_vjp = ad.vjp(ad.checkpoint(m), x)
    out0, f_vjp0 = ad.vjp(m, x)
    eq(out, out0)
    g = NP.asarray(RNG.standard_normal(out.shape))
    eq(f_vjp(g)[0], f_vjp0(g)[0])
    eq(f_vjp(g)[0], f_vjp0(g)[0])  # vjp_fn keeps the graph: twice
    eq(ad.jacobian(ad.checkpoint(m))(x[0]), ad.jacobian(m)(x[0]))


def test_second_order_create_graph_and_nested_grad():
    def f(x):
        return NP.sum(NP.tanh(x) * NP.exp(x))

    x0 = X[0]
    results = []
    for wrap in (plain, ad.checkpoint):
        x = NP.asarray(x0, requires_grad=True)
        w = NP.asarray(X[1], requires_grad=True)  # closed over
        y = wrap(lambda t: NP.sin(t * w) * NP.tanh(t))(x)
        NP.sum(y * y).backward(create_graph=True)
        g, gw = x.grad, w.grad
        x.grad = w.grad = None
        NP.sum(g * g * gw).backward()
        results.append((g, gw, x.grad, w.grad))
        gg = ad.grad(lambda t: NP.sum(ad.grad(wrap(f))(t) ** 2))(NP.asarray(x0))
        results.append((gg,))
        results.append((ad.hessian(wrap(f))(NP.asarray(x0)),))
    for a, b in zip(results[:3], results[3:]):
        same_runs(a, b)


def test_tuple_outputs_kwargs_and_non_array_args():
    w = NP.asarray(RNG.standard_normal((8, 8)), requires_grad=True)

    def f(x, n, scale=None, *, power=2, bias):
        h = x @ w
        for _ in range(n):
            h = NP.tanh(h)
        if scale is not None:
            h = h * scale
        return h**power, (NP.sum(h), None, x * bias)

    outs = []
    for wrap in (plain, ad.checkpoint):
        w.grad = None
        x = NP.asarray(X, requires_grad=True)
        a, (s, none, c) = wrap(f)(x, 3, power=3, bias=NP.asarray(X[0]))
        assert none is None
        (NP.sum(a) + s * 2.0 + NP.sum(c * c)).backward()
        outs.append([a, s, c, x.grad, w.grad])
    same_runs(*outs)


def test_same_tensor_twice_closure_over_intermediate_and_nesting():
    outs = []
    for wrap in (plain, ad.checkpoint):
        x = NP.asarray(X, requires_grad=True)
        u = NP.exp(x)  # an intermediate f closes over

        def inner(t):
            return NP.sin(t) * u

        def outer(a, b):
            return wrap(inner)(a * b) + NP.cos(a)

        y = wrap(outer)(x, x)
        NP.sum(y * y).backward()
        outs.append([y, x.grad])
    same_runs(*outs)


def test_retain_graph_twice_and_freed_after():
    m = block()
    x = NP.asarray(X, requires_grad=True)
    y = NP.sum(ad.checkpoint(m)(x) ** 2)
    y.backward(retain_graph=True)
    g1 = np.asarray(x.grad.data).copy()
    y.backward()
    eq(x.grad, 2 * g1)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_in_place_write_recorded_inside_f_is_copy_on_write():
    def f(x):
        x = x * 1.0
        x *= 3.0  # recorded: copy-on-write
        x[0] = 0.0
        return NP.tanh(x)

    outs = []
    for wrap in (plain, ad.checkpoint):
        x = NP.asarray(X, requires_grad=True)
        NP.sum(wrap(f)(x) ** 2).backward()
        outs.append(x.grad)
    eq(outs[0], outs[1])


def test_no_grad_runs_f_plainly():
    m = block()
    with ad.no_grad():
        y = ad.checkpoint(m)(NP.asarray(X))
    assert not y.requires_grad
    eq(y, m(NP.asarray(X)).detach())


# -- dropout ----------------------------------------------------------------------------
def test_dropout_module_masks_and_generator_state():
    layers = net(3, dropout=0.5)
    grads, draws = [], []
    for wrap in (plain, ad.checkpoint):
        nn.init.manual_seed(7)
        grads.append(run(layers, wrap))
        draws.append(nn.init.default_generator().integers(2**62))  # no extra draw
    same_runs(*grads)
    assert draws[0] == draws[1]


def test_dropout_module_with_own_generator():
    grads, draws = [], []
    for wrap in (plain, ad.checkpoint):
        gen = np.random.default_rng(5)
        nn.init.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 8, dtype="float64"), nn.Dropout(0.5, generator=gen))
        grads.append(run([m], wrap))
        draws.append(gen.integers(2**62))
    same_runs(*grads)
    assert draws[0] == draws[1]


def test_functional_dropout_without_seed_recomputes_its_mask():
    x = NP.asarray(X, requires_grad=True)
    y = ad.checkpoint(lambda t: F.dropout(NP.exp(t), p=0.5))(x)
    NP.sum(y).backward()
    # d sum(mask * exp(x) * 2) / dx = mask * 2 * exp(x) = y: the forward's mask
    eq(x.grad, y)
    assert 0 < int(np.count_nonzero(np.asarray(y.data))) < y.size


# -- errors -------------------------------------------------------------------------------
def test_input_modified_in_place_after_forward_raises():
    x0 = NP.asarray(X, requires_grad=True)
    x = x0 * 1.0
    y = NP.sum(ad.checkpoint(block())(x))
    with ad.no_grad():
        x += 1.0  # into the buffer the checkpoint saved
    with pytest.raises(RuntimeError, match="argument 0 .* modified in place"):
        y.backward()


def test_f_modifying_its_input_in_place_unrecorded_raises():
    def f(x):
        with ad.no_grad():
            x *= 2.0
        return NP.tanh(x)

    x = NP.asarray(X, requires_grad=True) * 1.0
    y = NP.sum(ad.checkpoint(f)(x))
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_parameter_stepped_before_backward_raises():
    m = block()
    opt = ad.optim.SGD(m.parameters(), lr=0.1)
    for p in m.parameters():
        p.grad = NP.ones_like(p.detach())
    y = NP.sum(ad.checkpoint(m)(NP.asarray(X)))
    opt.step()
    with pytest.raises(RuntimeError, match="parameter"):
        y.backward()


def test_structure_changed_raises():
    calls = []

    def f(x):
        calls.append(1)
        return NP.exp(x) if len(calls) == 1 else NP.sin(x)

    x = NP.asarray(X, requires_grad=True)
    y = NP.sum(ad.checkpoint(f)(x))
    with pytest.raises(RuntimeError, match="did not record what its forward did"):
        y.backward()
    assert x.grad is None


def test_shape_changed_raises():
    n = [8]

    def f(x):
        return NP.sum(NP.exp(x[:, : n[0]]))

    x = NP.asarray(X, requires_grad=True)
    y = ad.checkpoint(f)(x)
    n[0] = 4
    with pytest.raises(RuntimeError, match="did not record what its forward did"):
        y.backward()


def test_module_switched_to_eval_raises():
    m = block(dropout=0.5)
    y = NP.sum(ad.checkpoint(m)(NP.asarray(X, requires_grad=True)))
    m.eval()
    with pytest.raises(RuntimeError, match="dropout masks"):
        y.backward()


def test_error_inside_recomputation_names_it():
    calls = []

    def f(x):
        calls.append(1)
        if len(calls) > 1:
            raise ValueError("boom")
        return NP.exp(x)

    y = NP.sum(ad.checkpoint(f)(NP.asarray(X, requires_grad=True)))
    with pytest.raises(ValueError, match="boom .*recomputing checkpointed 'f'"):
        y.backward()


def test_not_callable():
    with pytest.raises(TypeError, match="callable"):
        ad.checkpoint(3)


# -- memory -------------------------------------------------------------------------------
def _peak(wrap, layers, x):
    """(bytes alive after the forward, peak over forward + backward), beyond the start."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        h = x
        for m in layers:
            h = wrap(m)(h)
        loss = NP.mean(h * h)
        del h
        after = tracemalloc.get_traced_memory()[0] - base
        loss.backward()
        return after, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_checkpoint_reduces_peak_memory():
    width, batch = 64, 1024
    layers = []
    for i in range(8):
        nn.init.manual_seed(i)
        layers.append(nn.Sequential(nn.Linear(width, width, dtype="float64"),
                                    nn.LayerNorm(width, dtype="float64"), nn.GELU(),
                                    nn.Dropout(0.1)))  # fmt: skip
    x = NP.asarray(RNG.standard_normal((batch, width)))
    unit = batch * width * 8
    plain_after, plain_peak = _peak(plain, layers, x)
    ck_after, ck_peak = _peak(ad.checkpoint, layers, x)
    # plain keeps 4 activations per layer (Linear's input, LayerNorm's, GELU's, the
    # mask); checkpointed only each layer's input (the output of the one before)
    assert plain_after > 3.5 * 8 * unit
    assert ck_after < 1.3 * 8 * unit
    assert ck_peak < 0.6 * plain_peak, (ck_peak, plain_peak)


def test_forward_mode_recomputes_too():
    xp = ad.Autodiff(np)
    f = ad.checkpoint(lambda x: xp.sin(xp.exp(x) * x))
    x, t = np.array([0.3, -0.4]), np.array([1.0, 2.0])
    _, tangent = ad.jvp(f, (x,), (t,))
    # d/dx sin(x e^x) = cos(x e^x) (e^x + x e^x)
    np.testing.assert_allclose(np.asarray(tangent), np.cos(x * np.exp(x)) * np.exp(x) * (1 + x) * t)
    # forward over reverse through the checkpoint: H v of sum(f), by hand
    _, hv = ad.hvp(lambda x: xp.sum(f(x)), (x,), (t,))
    u, du = x * np.exp(x), np.exp(x) * (1 + x)
    d2 = -np.sin(u) * du**2 + np.cos(u) * np.exp(x) * (2 + x)
    np.testing.assert_allclose(np.asarray(hv), d2 * t, rtol=1e-13)
