"""Backends whose arrays take no item assignment (JAX's; cubed's where installed): the
rules build new arrays, Tensor writes are functional copy-on-write updates that the
views of a tensor follow, and nn modules, nn.init, every optimizer and
array-api-extra's ``at`` train with NumPy's values (float64, 1e-12)."""

import copy

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn.functional as F
from autodiff import nn, optim

RTOL = ATOL = 1e-12


@pytest.fixture(scope="module")
def jnp():
    """JAX's namespace, in float64 while this module runs (restored afterwards)."""
    jax = pytest.importorskip("jax", reason="the JAX backend needs jax")
    before = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield jax.numpy
    jax.config.update("jax_enable_x64", before)


def _np(t):
    return np.asarray(t.detach().data if isinstance(t, ad.Tensor) else t)


def _close(a, b):
    np.testing.assert_allclose(_np(a), _np(b), rtol=RTOL, atol=ATOL)


X0 = np.array([[0.5, -1.0, 0.75, 2.0], [0.3, 0.8, -0.4, -1.5], [-0.6, 0.2, 0.9, 1.1]])
KEYS = [
    (slice(1, None),),
    (slice(None, None, -2), None),
    (1, Ellipsis),
    (Ellipsis, slice(3, 0, -2)),
    (slice(0, 3, 2), 2),
    (None, 2, slice(None, None, 3)),
    (np.array([2, 0, 2]),),
    (slice(None), np.array([3, 1])),
    (X0 > 0.4,),
]


def _loss_getitem(xp, x, key):
    return xp.sum(xp.sin(x[key]) * 2.0)


@pytest.mark.parametrize("key", KEYS, ids=str)
def test_getitem_gradient_on_jax(jnp, key):
    """x[key]'s gradient on JAX (slices with steps, integers, None, ..., integer and
    boolean arrays) equals NumPy's: the rule lays the cotangent out without writing."""
    ours = ad.grad(lambda x: _loss_getitem(ad.Autodiff(jnp), x, _key(jnp, key)))(
        ad.Autodiff(jnp).asarray(X0)
    )
    want = ad.grad(lambda x: _loss_getitem(ad.Autodiff(np), x, key))(X0)
    _close(ours, want)


def _key(lib, key):
    return tuple(lib.asarray(k) if isinstance(k, np.ndarray) else k for k in key)


SET_KEYS = [(slice(1, None), 0), (np.array([2, 0]),), (X0[:, 0] > 0,), (Ellipsis, slice(0, 4, 3))]


@pytest.mark.parametrize("key", SET_KEYS, ids=str)
def test_setitem_on_jax_records_and_differentiates(jnp, key):
    """``y[key] = v`` on a computed tensor: the value and the gradients of x and v
    equal NumPy's (the written region gets none of x's)."""

    def f(xp, lib):
        def loss(x, v):
            y = xp.exp(x)
            y[_key(lib, key)] = v * 3.0
            return xp.sum(y * y)

        return loss

    x0 = X0
    v0 = np.array(0.7)
    ours = ad.value_and_grad(f(ad.Autodiff(jnp), jnp), argnums=(0, 1))(jnp.asarray(x0), v0)
    want = ad.value_and_grad(f(ad.Autodiff(np), np), argnums=(0, 1))(x0, v0)
    _close(ours[0], want[0])
    _close(ours[1][0], want[1][0])
    _close(ours[1][1], want[1][1])


def test_writes_reach_the_views_on_jax(jnp):
    """A write into a tensor, or through a view or a ``detach()`` alias of it, is seen
    by all of them (one buffer, as on NumPy), also by in-place operators."""
    results = []
    for lib in (np, jnp):
        xp = ad.Autodiff(lib)
        t = xp.asarray([1.0, 2.0, 3.0, 4.0])
        view = t[1::2]
        alias = t.detach()
        t[0] = 5.0
        view[1] = 7.0
        alias[2] += 10.0
        view *= 2.0
        results.append([_np(a).copy() for a in (t, view, alias)])
    for ours, want in zip(results[1], results[0]):
        _close(ours, want)
    _close(results[1][0], np.array([5.0, 4.0, 13.0, 14.0]))


def test_write_refused_where_a_graph_needs_the_value_on_jax(jnp):
    """A no_grad write into a buffer a node saved makes that node's backward refuse
    (the version counter), as on NumPy, instead of a silently wrong gradient."""
    xp = ad.Autodiff(jnp)
    x = xp.asarray([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    z = xp.sum(y * y)
    with ad.no_grad():
        y[0] = 3.0
    with pytest.raises(RuntimeError):
        z.backward()


def _seeded(lib, make):
    nn.init.manual_seed(3)
    return make(lib)


def _mlp(lib):
    return nn.Sequential(
        nn.Linear(4, 8, xp=lib, dtype="float64"),
        nn.Tanh(),
        nn.Linear(8, 3, xp=lib, dtype="float64"),
    )


class _ConvNet(nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, stride=2, padding=1, xp=lib, dtype="float64")
        self.fc = nn.Linear(3 * 4 * 4, 3, xp=lib, dtype="float64")

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x)), 2, stride=1, padding=1)
        return self.fc(ad.Autodiff(x.__array_namespace__()).reshape(h, (h.shape[0], -1)))


def _batch(lib, conv):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 5, 5) if conv else (5, 4))
    y = np.array([0, 2, 1, 2, 0])
    xp = ad.Autodiff(lib)
    return xp.asarray(x), xp.asarray(y)


OPTIMIZERS = {
    "SGD": lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "Adam": lambda p: optim.Adam(p, lr=0.05, amsgrad=True, weight_decay=1e-3),
    "AdamW": lambda p: optim.AdamW(p, lr=0.05, weight_decay=1e-2),
    "RMSprop": lambda p: optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
    "Adagrad": lambda p: optim.Adagrad(p, lr=0.1, lr_decay=1e-3, weight_decay=1e-3),
    "Adamax": lambda p: optim.Adamax(p, lr=0.05),
    "NAdam": lambda p: optim.NAdam(p, lr=0.05, weight_decay=1e-2, decoupled_weight_decay=True),
    "RAdam": lambda p: optim.RAdam(p, lr=0.05),
    "LBFGS": lambda p: optim.LBFGS(p, lr=0.5, max_iter=2, history_size=4),
}


def _train(lib, make, opt_name, steps=3, conv=False):
    """``steps`` steps of ``opt_name`` on a seeded model; the parameters and losses."""
    model = _seeded(lib, make)
    opt = OPTIMIZERS[opt_name](model.parameters())
    x, y = _batch(lib, conv)
    losses = []

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    for _ in range(steps):
        losses.append(float(opt.step(closure) if opt_name == "LBFGS" else closure()))
        if opt_name != "LBFGS":
            opt.step()
    return [_np(p).copy() for p in model.parameters()], losses


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_mlp_trains_on_jax_as_on_numpy(jnp, opt_name):
    """nn.init, Linear and every optimizer on JAX: NumPy's trajectory."""
    ours, ours_loss = _train(jnp, _mlp, opt_name)
    want, want_loss = _train(np, _mlp, opt_name)
    np.testing.assert_allclose(ours_loss, want_loss, rtol=RTOL, atol=ATOL)
    for a, b in zip(ours, want):
        _close(a, b)


def test_conv_net_trains_on_jax_as_on_numpy(jnp):
    """Conv2d (padding, stride) and max_pool2d (overlapping windows) on JAX."""
    ours, ours_loss = _train(jnp, _ConvNet, "Adam", conv=True)
    want, want_loss = _train(np, _ConvNet, "Adam", conv=True)
    np.testing.assert_allclose(ours_loss, want_loss, rtol=RTOL, atol=ATOL)
    for a, b in zip(ours, want):
        _close(a, b)


def test_zero_grad_and_clip_in_place_on_jax(jnp):
    """``zero_grad(set_to_none=False)`` and ``clip_grad_value_`` rebind the gradient's
    buffer on JAX: zeros, and the clipped values."""
    xp = ad.Autodiff(jnp)
    p = xp.asarray([1.0, -2.0, 3.0], requires_grad=True)
    xp.sum(p * p * p).backward()
    optim.clip_grad_value_([p], 5.0)
    _close(p.grad, np.array([3.0, 5.0, 5.0]))
    opt = optim.SGD([p], lr=0.1)
    opt.zero_grad(set_to_none=False)
    _close(p.grad, np.zeros(3))


def test_init_functions_on_jax(jnp):
    """nn.init's fills (they write in place) give NumPy's values on JAX."""
    for fill in (
        lambda t: nn.init.uniform_(t, -0.5, 0.5),
        lambda t: nn.init.normal_(t, 0.0, 2.0),
        lambda t: nn.init.constant_(t, 0.25),
        nn.init.zeros_,
        nn.init.ones_,
        nn.init.kaiming_uniform_,
        nn.init.xavier_uniform_,
        nn.init.xavier_normal_,
    ):
        got = []
        for lib in (jnp, np):
            nn.init.manual_seed(0)
            t = ad.Autodiff(lib).zeros((3, 4), dtype=ad.Autodiff(lib).float64, requires_grad=True)
            fill(t)
            assert t.requires_grad and t.is_leaf
            got.append(_np(t))
        _close(got[0], got[1])


def test_array_api_extra_at_on_jax(jnp):
    """``xpx.at(x, idx).set(v)`` / ``.add(v)`` on a Tensor of JAX: the values and
    gradients of NumPy's."""
    xpx = pytest.importorskip("array_api_extra", reason="needs array-api-extra")

    def loss(x):
        xp = x.__array_namespace__()
        y = xpx.at(x * 2.0, (slice(None), 1)).set(xp.sum(x[0, :]))
        y = xpx.at(y, (0, slice(1, None))).add(x[1, 1:] ** 2)
        return xp.sum(y * xp.cos(y))

    ours = ad.value_and_grad(loss)(ad.Autodiff(jnp).asarray(X0))
    want = ad.value_and_grad(loss)(ad.Autodiff(np).asarray(X0))
    _close(ours[0], want[0])
    _close(ours[1], want[1])


@pytest.fixture(scope="module")
def cubed():
    return pytest.importorskip("cubed", reason="the cubed backend needs cubed")


def test_cubed_is_one_namespace(cubed):
    """``Autodiff(cubed)`` and ``Autodiff(cubed.array_api)`` are one namespace."""
    import cubed.array_api

    assert ad.Autodiff(cubed) is ad.Autodiff(cubed.array_api)


def test_mlp_trains_on_cubed_as_on_numpy(cubed):
    """nn.init, Linear, slicing and SGD on cubed (no item assignment): NumPy's values."""
    ours, ours_loss = _train(cubed, _mlp, "SGD", steps=2)
    want, want_loss = _train(np, _mlp, "SGD", steps=2)
    np.testing.assert_allclose(ours_loss, want_loss, rtol=RTOL, atol=ATOL)
    for a, b in zip(ours, want):
        _close(a, b)


def test_getitem_and_setitem_on_cubed(cubed):
    """Basic slicing and ``y[key] = v`` on cubed: NumPy's gradients (cubed's own
    indexing takes no steps other than 1)."""

    def loss(x):
        xp = x.__array_namespace__()
        y = x * 1.0
        y[1:, 1:3] = xp.sum(x[0, :])
        return xp.sum(xp.sin(y[:, 1:]) * x[2, 1:])

    ours = ad.grad(loss)(ad.Autodiff(cubed).asarray(X0))
    want = ad.grad(loss)(ad.Autodiff(np).asarray(X0))
    _close(ours, want)


def _central(f, x0, h=1e-6):
    """Central differences of the scalar ``f`` at ``x0`` (float64)."""
    g = np.zeros_like(x0)
    for i in np.ndindex(x0.shape):
        e = np.zeros_like(x0)
        e[i] = h
        g[i] = (f(x0 + e) - f(x0 - e)) / (2 * h)
    return g


@pytest.mark.parametrize("how", ["deepcopy", "copy", "deepcopy_in_a_dict"])
def test_gradient_flows_through_copies_of_computed_tensors(how):
    """``copy.deepcopy`` of a computed tensor is a recorded copy (as JAX differentiates
    through one): the gradient through it equals central differences, and the copy
    owns its buffer; ``copy.copy`` is the same value and node."""
    xp = ad.Autodiff(np)

    def f(x):
        y = xp.sin(x) * x
        if how == "deepcopy":
            c = copy.deepcopy(y)
        elif how == "copy":
            c = copy.copy(y)
        else:
            c = copy.deepcopy({"data": y, "name": "y"})["data"]
        return xp.sum(c * c + y)

    x0 = X0[0]
    g = ad.grad(f)(x0)
    want = _central(lambda a: float(f(a)), x0)
    np.testing.assert_allclose(_np(g), want, rtol=1e-7, atol=1e-8)
    y = xp.asarray(x0, requires_grad=True) * 2.0
    d = copy.deepcopy(y)
    with ad.no_grad():
        d[0] = 100.0
    _close(y, 2.0 * x0)


def test_deepcopy_leaf_is_independent():
    """deepcopy of a leaf: a new leaf (same requires_grad), no shared buffer."""
    xp = ad.Autodiff(np)
    x = xp.asarray([1.0, 2.0], requires_grad=True)
    y = copy.deepcopy(x)
    assert y.requires_grad and y.is_leaf and y is not x
    with ad.no_grad():
        y[0] = 9.0
    _close(x, np.array([1.0, 2.0]))


CUBED_FUNCTIONS = {
    "prod": lambda xp, x: xp.prod(x, axis=1),
    "prod_all": lambda xp, x: xp.prod(x),
    "take": lambda xp, x: xp.take(x, xp.asarray([2, 0, 2]), axis=1),
    "cumulative_prod": lambda xp, x: xp.cumulative_prod(x, axis=1),
}


@pytest.mark.parametrize("name", sorted(CUBED_FUNCTIONS))
def test_rules_use_what_cubed_has(cubed, name):
    """cubed has no ``argsort`` and no ``cumulative_prod(include_initial=True)``: the
    rules of ``take`` (a scatter-add) and ``prod`` fall back to what it has; NumPy's
    gradients, a zero in the input included."""
    f = CUBED_FUNCTIONS[name]
    x0 = X0.copy()
    x0[1, 2] = 0.0

    def loss(x):
        xp = x.__array_namespace__()
        return xp.sum(f(xp, x) ** 2)

    _close(ad.grad(loss)(ad.Autodiff(cubed).asarray(x0)), ad.grad(loss)(x0))


def test_sparse_scalar_index_is_a_tensor():
    """pydata sparse's ``x[0, 1]`` is a ``numpy.float64``: it comes back as a 0-d
    Tensor of the namespace, with the element's value."""
    sparse = pytest.importorskip("sparse", reason="the sparse backend needs sparse")
    xp = ad.Autodiff(sparse)
    x = xp.asarray(X0)
    s = x[0, 1]
    assert isinstance(s, ad.Tensor) and s.shape == ()
    assert float(s) == X0[0, 1]
    assert float(x[2, 3] * 2.0) == 2.0 * X0[2, 3]


# pydata sparse: fill values. A sum's cotangent broadcast to a shape is stored as a fill
# value of 1, and exp fills with 1; sparse's products want zero fills and its joins one
# fill. Each function's gradient against central differences of the dense function.
B0 = np.array([[3.0, 0.0], [1.0, 0.0], [0.0, 4.0], [0.5, -1.0]])
SPARSE_CASES = {
    "sum(x @ b)": lambda xp, x, b: xp.sum(x @ b),
    "sum(exp(x) @ b)": lambda xp, x, b: xp.sum(xp.exp(x) @ b),
    "sum(x^T @ x)": lambda xp, x, b: xp.sum(x.mT @ x),
    "tensordot": lambda xp, x, b: xp.sum(xp.tensordot(x, b, axes=1) ** 2),
    "vecdot": lambda xp, x, b: xp.sum(xp.vecdot(x, x)),
    "concat with exp": lambda xp, x, b: xp.sum(xp.concat([xp.exp(x), x]) * 2.0),
    "stack": lambda xp, x, b: xp.sum(xp.stack([x, xp.exp(x)]) ** 2),
    "slice": lambda xp, x, b: xp.sum(x[0:2, 1:3]),
    "step slice": lambda xp, x, b: xp.sum(x[:, ::2] * 2.0),
    "reversed step slice": lambda xp, x, b: xp.sum(x[:, ::-2] ** 2),
    "take": lambda xp, x, b: xp.sum(xp.take(x, xp.asarray(np.array([0, 3, 3])), axis=1)),
}


@pytest.mark.parametrize("case", sorted(SPARSE_CASES))
def test_sparse_gradients_whatever_the_fill_values(case):
    sparse = pytest.importorskip("sparse", reason="the sparse backend needs sparse")
    f = SPARSE_CASES[case]
    xp = ad.Autodiff(sparse)
    x0 = X0.copy()
    x0[1, 2] = x0[0, 0] = 0.0  # stored zeros: a sparse x
    x = xp.asarray(sparse.COO.from_numpy(x0), requires_grad=True)
    b = xp.asarray(sparse.COO.from_numpy(B0))
    f(xp, x, b).backward()
    dense = ad.Autodiff(np)
    want = _central(lambda a: float(f(dense, dense.asarray(a), dense.asarray(B0)).data), x0)
    np.testing.assert_allclose(x.grad.data.todense(), want, rtol=1e-7, atol=1e-7)


def test_sparse_arange_is_the_standards():
    sparse = pytest.importorskip("sparse", reason="the sparse backend needs sparse")
    xp = ad.Autodiff(sparse)
    np.testing.assert_array_equal(xp.arange(1, 9, 3).data.todense(), [1, 4, 7])
    assert xp.arange(4.0).dtype == xp.float64
