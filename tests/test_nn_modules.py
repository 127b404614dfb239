"""``autodiff.nn`` modules: against ``torch.nn`` with copied weights (float64), and
the Module API (parameters, modes, state dicts, moving, init, repr)."""

import math

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F

RNG = np.random.default_rng(5)


def _r(*shape):
    return RNG.standard_normal(shape)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _cnn(kw):
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1, **kw), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(4 * 3 * 3, 5, **kw),
    )  # fmt: skip


def _tcnn(t):
    return t.Sequential(t.Conv2d(1, 4, 3, padding=1), t.ReLU(), t.MaxPool2d(2), t.Flatten(),
                        t.Linear(4 * 3 * 3, 5))  # fmt: skip


_KPM = np.array([[False, False, True, False, True], [False] * 5])
_CAUSAL = np.triu(np.ones((3, 5), dtype=bool), 1)

# id: (ours(kw), theirs(torch.nn), inputs (numpy), call(module, *inputs) -> output(s))
SPECS = {
    "Linear": (lambda kw: nn.Linear(4, 3, **kw), lambda t: t.Linear(4, 3), [_r(5, 4)], None),
    "Linear 3-D input, no bias": (lambda kw: nn.Linear(4, 3, bias=False, **kw),
                                  lambda t: t.Linear(4, 3, bias=False), [_r(2, 5, 4)], None),
    "Conv2d stride 2 pad 1": (lambda kw: nn.Conv2d(2, 4, 3, stride=2, padding=1, **kw),
                              lambda t: t.Conv2d(2, 4, 3, stride=2, padding=1),
                              [_r(2, 2, 7, 7)], None),
    "Conv2d groups dilation same": (
        lambda kw: nn.Conv2d(4, 6, 3, dilation=2, groups=2, padding="same", **kw),
        lambda t: t.Conv2d(4, 6, 3, dilation=2, groups=2, padding="same"), [_r(2, 4, 8, 8)], None),
    "ConvTranspose2d": (
        lambda kw: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, **kw),
        lambda t: t.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1),
        [_r(2, 4, 5, 5)], None),
    "ConvTranspose2d groups no bias": (
        lambda kw: nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2, bias=False, **kw),
        lambda t: t.ConvTranspose2d(4, 6, 2, stride=2, groups=2, bias=False),
        [_r(2, 4, 3, 3)], None),
    "MaxPool2d": (lambda kw: nn.MaxPool2d(3, 2, padding=1, ceil_mode=True),
                  lambda t: t.MaxPool2d(3, 2, padding=1, ceil_mode=True), [_r(2, 3, 7, 7)], None),
    "AvgPool2d": (lambda kw: nn.AvgPool2d(2, padding=1, count_include_pad=False),
                  lambda t: t.AvgPool2d(2, padding=1, count_include_pad=False),
                  [_r(2, 3, 5, 5)], None),
    "Flatten": (lambda kw: nn.Flatten(1, 2), lambda t: t.Flatten(1, 2), [_r(2, 3, 4, 5)], None),
    "ReLU": (lambda kw: nn.ReLU(), lambda t: t.ReLU(), [_r(4, 5)], None),
    "GELU tanh": (lambda kw: nn.GELU("tanh"), lambda t: t.GELU("tanh"), [_r(4, 5)], None),
    "SiLU": (lambda kw: nn.SiLU(), lambda t: t.SiLU(), [_r(4, 5)], None),
    "Sigmoid": (lambda kw: nn.Sigmoid(), lambda t: t.Sigmoid(), [_r(4, 5)], None),
    "Tanh": (lambda kw: nn.Tanh(), lambda t: t.Tanh(), [_r(4, 5)], None),
    "Softplus": (lambda kw: nn.Softplus(2.0, 1.0), lambda t: t.Softplus(2.0, 1.0), [_r(4, 5)],
                 None),
    "Softmax": (lambda kw: nn.Softmax(axis=0), lambda t: t.Softmax(dim=0), [_r(4, 5)], None),
    "LogSoftmax": (lambda kw: nn.LogSoftmax(), lambda t: t.LogSoftmax(dim=-1), [_r(4, 5)], None),
    "Embedding padding_idx": (lambda kw: nn.Embedding(6, 3, padding_idx=1, **kw),
                              lambda t: t.Embedding(6, 3, padding_idx=1),
                              [np.array([[0, 1, 5], [1, 1, 2]])], None),
    "LayerNorm 2 axes": (lambda kw: nn.LayerNorm((3, 4), **kw), lambda t: t.LayerNorm((3, 4)),
                         [_r(2, 3, 4)], None),
    "GRUCell": (lambda kw: nn.GRUCell(4, 5, **kw), lambda t: t.GRUCell(4, 5),
                [_r(3, 4), _r(3, 5)], None),
    "GRUCell zero state": (lambda kw: nn.GRUCell(4, 5, **kw), lambda t: t.GRUCell(4, 5),
                           [_r(3, 4)], None),
    "LSTMCell": (lambda kw: nn.LSTMCell(4, 5, **kw), lambda t: t.LSTMCell(4, 5),
                 [_r(3, 4), _r(3, 5), _r(3, 5)], lambda m, x, h, c: m(x, (h, c))),
    "GRU 2 layers": (lambda kw: nn.GRU(4, 5, num_layers=2, **kw),
                     lambda t: t.GRU(4, 5, num_layers=2), [_r(6, 3, 4), _r(2, 3, 5)], None),
    "GRU batch_first zero state": (lambda kw: nn.GRU(4, 5, batch_first=True, **kw),
                                   lambda t: t.GRU(4, 5, batch_first=True), [_r(3, 6, 4)], None),
    "GRU unbatched no bias": (lambda kw: nn.GRU(4, 5, bias=False, **kw),
                              lambda t: t.GRU(4, 5, bias=False), [_r(6, 4)], None),
    "MultiheadAttention self": (lambda kw: nn.MultiheadAttention(8, 2, **kw),
                                lambda t: t.MultiheadAttention(8, 2), [_r(5, 2, 8)],
                                lambda m, x: m(x, x, x)),
    "MultiheadAttention cross, masks, weights": (
        lambda kw: nn.MultiheadAttention(8, 4, batch_first=True, **kw),
        lambda t: t.MultiheadAttention(8, 4, batch_first=True),
        [_r(2, 3, 8), _r(2, 5, 8), _r(2, 5, 8)],
        lambda m, q, k, v: m(q, k, v, key_padding_mask=_as(m, _KPM), attn_mask=_as(m, _CAUSAL),
                             need_weights=True)),
    "MultiheadAttention float mask, unbatched": (
        lambda kw: nn.MultiheadAttention(6, 3, **kw), lambda t: t.MultiheadAttention(6, 3),
        [_r(3, 6), _r(5, 6), _r(5, 6)],
        lambda m, q, k, v: m(q, k, v, attn_mask=_as(m, np.abs(_CAUSAL - 0.25)),
                             need_weights=True, average_attn_weights=False)),
    "Sequential CNN": (_cnn, _tcnn, [_r(2, 1, 6, 6)], None),
}  # fmt: skip


def _as(m, a):
    """``a`` as an array of the module's kind (torch tensor or autodiff tensor)."""
    if isinstance(m, nn.Module):
        return m.xp.asarray(a)
    import torch

    return torch.tensor(a)


def _torch_grads(theirs):
    return {k: p.grad.numpy() for k, p in theirs.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", list(SPECS))
def test_module_matches_torch(xp, name):
    torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
    make, make_theirs, inputs, call = SPECS[name]
    call = call or (lambda m, *a: m(*a))
    torch.manual_seed(0)
    theirs = make_theirs(torch.nn).double()
    ours = make({"xp": xp, "dtype": xp.float64})
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)  # strict: names and shapes are torch's
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in theirs.named_parameters()]

    floats = [np.issubdtype(a.dtype, np.floating) for a in inputs]
    ts = [xp.asarray(a, requires_grad=f) for a, f in zip(inputs, floats)]
    tt = [torch.tensor(a, requires_grad=bool(f)) for a, f in zip(inputs, floats)]
    out, ref = call(ours, *ts), call(theirs, *tt)
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
    refs = [r for r in (ref if isinstance(ref, tuple) else (ref,)) if r is not None]
    assert len(outs) == len(refs)
    total = ref_total = 0
    for i, (o, r) in enumerate(zip(outs, refs)):
        np.testing.assert_allclose(np.asarray(o.data), r.detach().numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=f"output {i}")  # fmt: skip
        u = RNG.standard_normal(tuple(r.shape))
        total = total + o.__array_namespace__().sum(o * xp.asarray(u))
        ref_total = ref_total + (r * torch.tensor(u)).sum()
    total.backward()
    ref_total.backward()
    for i, (t, r) in enumerate(zip(ts, tt)):
        if r.requires_grad:
            np.testing.assert_allclose(np.asarray(t.grad.data), r.grad.numpy(), rtol=1e-10,
                                       atol=1e-12, err_msg=f"gradient of input {i}")  # fmt: skip
    expected = _torch_grads(theirs)
    got = {k: np.asarray(p.grad.data) for k, p in ours.named_parameters() if p.grad is not None}
    assert set(got) == set(expected)
    for k in expected:
        np.testing.assert_allclose(got[k], expected[k], rtol=1e-10, atol=1e-12, err_msg=k)


# -- initialization ------------------------------------------------------------------
def _uniform_ok(a, bound):
    """Values inside [-bound, bound] with the moments of U(-bound, bound)."""
    a = np.asarray(a.data, dtype=np.float64).ravel()
    assert a.min() >= -bound and a.max() <= bound
    assert abs(a.mean()) < 4 * bound / math.sqrt(3 * a.size)
    assert abs(a.std() / (bound / math.sqrt(3)) - 1) < 0.05


def test_default_initialization_is_torchs():
    nn.init.manual_seed(0)
    lin = nn.Linear(400, 300)
    _uniform_ok(lin.weight, 1 / math.sqrt(400))
    _uniform_ok(lin.bias, 1 / math.sqrt(400))
    assert lin.weight.dtype == lin.xp.float32
    conv = nn.Conv2d(8, 64, 5, groups=2)
    _uniform_ok(conv.weight, 1 / math.sqrt(4 * 25))
    tconv = nn.ConvTranspose2d(64, 8, 5, groups=2)
    _uniform_ok(tconv.weight, 1 / math.sqrt(4 * 25))
    gru = nn.GRU(50, 100)
    for _, p in gru.named_parameters():
        _uniform_ok(p, 1 / math.sqrt(100))
    emb = nn.Embedding(300, 200, padding_idx=3)
    w = np.asarray(emb.weight.data, dtype=np.float64)
    assert np.all(w[3] == 0)
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 0.01 and abs(rest.std() - 1) < 0.01
    mha = nn.MultiheadAttention(64, 4)
    _uniform_ok(mha.in_proj_weight, math.sqrt(6 / (64 + 3 * 64)))
    assert np.all(np.asarray(mha.in_proj_bias.data) == 0)
    assert np.all(np.asarray(mha.out_proj.bias.data) == 0)
    ln = nn.LayerNorm(7)
    assert np.all(np.asarray(ln.weight.data) == 1) and np.all(np.asarray(ln.bias.data) == 0)


def test_manual_seed_makes_models_reproducible():
    def weights(seed):
        nn.init.manual_seed(seed)
        return [np.asarray(p.data).copy() for p in _cnn({}).parameters()]

    a, b, c = weights(1), weights(1), weights(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    gen = np.random.default_rng(3)
    w1 = nn.Linear(3, 3, generator=gen).weight
    w2 = nn.Linear(3, 3, generator=np.random.default_rng(3)).weight
    assert np.array_equal(np.asarray(w1.data), np.asarray(w2.data))


# -- Module API ---------------------------------------------------------------------------
class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
        self.head = nn.Linear(4, 2)
        self.scale = 2.0
        self.register_buffer("counts", self.head.xp.zeros((2,)))
        self.shared = self.head  # the same module twice: its parameters are listed once

    def forward(self, x):
        return self.head(self.body(x)) * self.scale


def test_parameters_children_and_state_dict():
    net = _Net()
    names = [k for k, _ in net.named_parameters()]
    assert names == ["body.0.weight", "body.0.bias", "head.weight", "head.bias"]
    assert len(list(net.parameters())) == 4
    assert [k for k, _ in net.named_children()] == ["body", "head", "shared"]
    assert [k for k, _ in net.named_modules()] == ["", "body", "body.0", "body.1", "head"]
    assert list(net.state_dict()) == ["counts"] + names  # own entries first, as torch
    sd = net.state_dict()
    assert sd["head.weight"].requires_grad is False
    assert np.shares_memory(sd["head.weight"].data, net.head.weight.data)
    assert net.scale == 2.0 and "scale" not in sd


def test_attributes_follow_the_tables_when_reassigned_or_deleted():
    m = nn.Linear(2, 3)
    w = m.weight
    assert m.weight is m._parameters["weight"]
    m.weight = None  # no longer a parameter
    assert m.weight is None and "weight" not in m._parameters
    m.weight = w
    assert m.weight is w and sorted(k for k, _ in m.named_parameters()) == ["bias", "weight"]
    del m.bias
    assert "bias" not in m._parameters
    with pytest.raises(AttributeError):
        _ = m.bias
    m.register_buffer("bias", w.detach())
    assert m.bias is m._buffers["bias"] and "bias" not in m._parameters
    child = nn.ReLU()
    m.add_module("act", child)
    assert m.act is child
    m.act = 3  # a plain value replaces the child
    assert m.act == 3 and "act" not in m._modules


def test_load_state_dict_copies_into_the_same_buffers():
    a, b = _Net(), _Net()
    w = b.head.weight
    before = w.data
    b.load_state_dict({k: np.asarray(v.data) for k, v in a.state_dict().items()})
    assert b.head.weight is w and w.data is before
    for (k, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items()):
        assert np.array_equal(np.asarray(p.data), np.asarray(q.data)), k
    x = a.xp.asarray(RNG.standard_normal((5, 3)), dtype=a.xp.float32)
    assert np.array_equal(np.asarray(a(x).data), np.asarray(b(x).data))


def test_load_state_dict_errors_name_the_keys():
    net = _Net()
    sd = dict(net.state_dict())
    del sd["head.bias"]
    sd["head.extra"] = np.zeros(2)
    sd["body.0.weight"] = np.zeros((3, 4))
    with pytest.raises(RuntimeError) as e:
        net.load_state_dict(sd)
    msg = str(e.value)
    assert "_Net" in msg and "missing keys: 'head.bias'" in msg
    assert "unexpected keys: 'head.extra'" in msg
    assert "'body.0.weight' has shape (3, 4) in the state dict, (4, 3) in the model" in msg
    sd["body.0.weight"] = np.zeros((4, 3))
    missing, unexpected = net.load_state_dict(sd, strict=False)
    assert missing == ["head.bias"] and unexpected == ["head.extra"]
    assert np.all(np.asarray(net.body[0].weight.data) == 0)
    with pytest.raises(TypeError, match="expected a dict"):
        net.load_state_dict([1, 2])


def test_train_eval_and_dropout():
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Dropout(0.25), nn.Linear(2, 2))
    assert model.training and model[0].training
    x = model.xp.ones((400, 50))
    y = model[0](x)
    kept = np.asarray(y.data) != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(np.asarray(y.data)[kept], 1 / 0.75)
    model.eval()
    assert not model.training and not model[0].training
    assert model[0](x) is x
    model.train()
    assert model[0].training


def test_zero_grad():
    net = _Net()
    x = net.xp.asarray(RNG.standard_normal((5, 3)), dtype=net.xp.float32)
    net.xp.sum(net(x)).backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(np.asarray(p.grad.data) == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_to_another_namespace_keeps_the_tensor_objects():
    strict = pytest.importorskip("array_api_strict")
    net = _Net()
    x = RNG.standard_normal((5, 3))
    ref = np.asarray(net(net.xp.asarray(x, dtype=net.xp.float32)).data)
    params = list(net.parameters())
    net.to(strict)
    xs = ad.Autodiff(strict)
    assert net.xp is xs and [p for p in net.parameters()] == params
    assert all(p.__array_namespace__() is xs and p.requires_grad for p in params)
    assert net.counts.__array_namespace__() is xs
    out = net(xs.asarray(x, dtype=xs.float32))
    np.testing.assert_array_equal(np.asarray(out.data), ref)
    xs.sum(out).backward()
    assert net.head.weight.grad.__array_namespace__() is xs
    net.to(dtype="float64")
    assert all(p.dtype == xs.float64 for p in net.parameters())
    dev = strict.Device("device1")
    net.to(device=dev)
    assert all(p.device == dev for p in net.parameters())


def test_module_repr_is_a_tree():
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                          nn.Sequential(nn.Flatten(), nn.Linear(8, 2, bias=False)))  # fmt: skip
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Flatten(start_dim=1, end_dim=-1)\n"
        "    (1): Linear(in_features=8, out_features=2, bias=False)\n"
        "  )\n"
        ")"
    )
    # arguments and children: the arguments get their own line, as torch prints them
    assert repr(nn.MultiheadAttention(8, 2, batch_first=True)) == (
        "MultiheadAttention(\n"
        "  embed_dim=8, num_heads=2, batch_first=True\n"
        "  (out_proj): Linear(in_features=8, out_features=8, bias=True)\n"
        ")"
    )


def test_module_errors():
    with pytest.raises(ValueError, match="Conv2d: groups=3 must divide in_channels=4"):
        nn.Conv2d(4, 6, 3, groups=3)
    with pytest.raises(ValueError, match="Linear: expected input with last axis 3"):
        nn.Linear(3, 2)(nn.Linear(3, 2).xp.ones((2, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="not divisible by num_heads=3"):
        nn.MultiheadAttention(8, 3)
    with pytest.raises(ValueError, match="GRU: h_0 must have shape"):
        g = nn.GRU(2, 3)
        g(g.xp.ones((4, 1, 2), dtype=np.float32), g.xp.ones((1, 2, 3), dtype=np.float32))
    with pytest.raises(TypeError, match="weight is a parameter"):
        nn.Linear(2, 2).weight = 3

    class NoInit(nn.Module):
        def __init__(self):
            self.a = 1

    with pytest.raises(AttributeError, match="super\\(\\).__init__\\(\\)"):
        NoInit()


def test_gated_memory_cell_module_matches_its_formula():
    nn.init.manual_seed(4)
    cell = nn.GatedMemoryCell(3, 2, dtype="float64")
    xp = cell.xp
    m, x = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 2))
    out = cell(xp.asarray(x), xp.asarray(m))
    u = np.concatenate([m, x], axis=-1)
    wz, wc = np.asarray(cell.w_z.data), np.asarray(cell.w_c.data)
    z = 1 / (1 + np.exp(-(u @ wz)))
    expected = (1 - z) * m + z * np.tanh(u @ wc)
    np.testing.assert_allclose(np.asarray(out.data), expected, rtol=1e-12)
    zero = cell(xp.asarray(x))
    z0 = 1 / (1 + np.exp(-(np.concatenate([np.zeros((4, 3)), x], -1) @ wz)))
    np.testing.assert_allclose(
        np.asarray(zero.data),
        z0 * np.tanh(np.concatenate([np.zeros((4, 3)), x], -1) @ wc),
        rtol=1e-12,
    )


def test_training_a_module_reduces_the_loss(xp):
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16, xp=xp, dtype="float64"), nn.Tanh(),
                          nn.Linear(16, 1, xp=xp, dtype="float64"))  # fmt: skip
    x = RNG.standard_normal((64, 2))
    y = np.sin(x[:, :1]) + x[:, 1:] ** 2
    X, Y = xp.asarray(x), xp.asarray(y)
    losses = []
    for _ in range(200):
        loss = F.mse_loss(model(X), Y)
        model.zero_grad()
        loss.backward()
        with ad.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        losses.append(float(loss))
    assert losses[-1] < 0.1 * losses[0]
