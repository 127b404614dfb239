"""``nn.LSTM`` and ``nn.GRU`` (layers, batch_first, bidirectional, proj_size, dropout)
against ``torch.nn`` in float64: torch's state_dict loaded strictly, then outputs, h_n,
c_n and the gradient of every parameter and input; argument checks."""

import math

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
RNG = np.random.default_rng(11)
L, N, IN, H, P = 5, 3, 4, 6, 3


def _r(*shape):
    return RNG.standard_normal(shape)


def _flat(out):
    """(output, h_n) or (output, (h_n, c_n)) as a flat list."""
    o, st = out
    return [o, *st] if isinstance(st, tuple) else [o, st]


# id: (class name, constructor kwargs, batched, with initial state)
CASES = {}
for _cls in ("LSTM", "GRU"):
    for _layers in (1, 2):
        for _bf in (False, True):
            for _bi in (False, True):
                for _proj in (0, P) if _cls == "LSTM" else (0,):
                    for _state in (False, True):
                        kw = dict(num_layers=_layers, batch_first=_bf, bidirectional=_bi)
                        if _proj:
                            kw["proj_size"] = _proj
                        _id = (f"{_cls} layers={_layers} bf={_bf} bi={_bi} proj={_proj} "
                               f"state={_state}")  # fmt: skip
                        CASES[_id] = (_cls, kw, True, _state)
    for _bi in (False, True):
        for _state in (False, True):
            kw = dict(num_layers=2, bidirectional=_bi)
            CASES[f"{_cls} unbatched bi={_bi} state={_state}"] = (_cls, kw, False, _state)
            if _cls == "LSTM":
                kw = dict(kw, proj_size=P)
                CASES[f"LSTM unbatched proj bi={_bi} state={_state}"] = (_cls, kw, False, _state)
CASES["LSTM no bias"] = ("LSTM", dict(num_layers=2, bias=False, bidirectional=True), True, True)
CASES["GRU no bias"] = ("GRU", dict(num_layers=2, bias=False, bidirectional=True), True, True)
CASES["LSTM dropout eval"] = ("LSTM", dict(num_layers=3, dropout=0.5), True, False)
CASES["GRU dropout eval"] = ("GRU", dict(num_layers=3, dropout=0.5, bidirectional=True), True,
                             False)  # fmt: skip

MAX_DIFF = [0.0]


def _close(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, what
    MAX_DIFF[0] = max(MAX_DIFF[0], float(np.max(np.abs(a - b), initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(xp, name):
    cls, kw, batched, with_state = CASES[name]
    torch.manual_seed(0)
    theirs = getattr(torch.nn, cls)(IN, H, **kw).double()
    ours = getattr(nn, cls)(IN, H, xp=xp, dtype=xp.float64, **kw)
    if "dropout" in kw:
        theirs.eval()
        ours.eval()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in theirs.named_parameters()]
    for (k, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert tuple(p.shape) == tuple(q.shape), k

    d = 2 if kw.get("bidirectional") else 1
    rows = kw.get("num_layers", 1) * d
    shape = ((N, L, IN) if kw.get("batch_first") else (L, N, IN)) if batched else (L, IN)
    arrays = [_r(*shape)]
    if with_state:
        lead = (rows, N) if batched else (rows,)
        arrays.append(_r(*lead, kw.get("proj_size") or H))
        if cls == "LSTM":
            arrays.append(_r(*lead, H))
    ts = [xp.asarray(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]

    def call(m, args):
        if len(args) == 1:
            return m(args[0])
        return m(args[0], tuple(args[1:]) if cls == "LSTM" else args[1])

    outs, refs = _flat(call(ours, ts)), _flat(call(theirs, tt))
    assert len(outs) == len(refs) == (3 if cls == "LSTM" else 2)
    total = ref_total = 0
    for i, (o, r) in enumerate(zip(outs, refs)):
        _close(o.data, r.detach().numpy(), f"output {i}")
        u = RNG.standard_normal(tuple(r.shape))
        total = total + xp.sum(o * xp.asarray(u))
        ref_total = ref_total + (r * torch.tensor(u)).sum()
    total.backward()
    ref_total.backward()
    for i, (t, r) in enumerate(zip(ts, tt)):
        _close(t.grad.data, r.grad.numpy(), f"gradient of input {i}")
    got = {k: p.grad for k, p in ours.named_parameters()}
    for k, q in theirs.named_parameters():
        assert got[k] is not None, k
        _close(got[k].data, q.grad.numpy(), k)


def test_max_difference_is_tiny():
    # after the comparisons above (in file order): a record of the worst difference
    assert MAX_DIFF[0] < 1e-11


def test_initialization_and_shapes():
    nn.init.manual_seed(0)
    m = nn.LSTM(30, 80, num_layers=2, bidirectional=True, proj_size=20)
    for k, p in m.named_parameters():
        assert p.dtype == m.xp.float32
        a = np.asarray(p.data, dtype=np.float64).ravel()
        bound = 1 / math.sqrt(80)
        assert a.min() >= -bound and a.max() <= bound, k
        assert abs(a.std() / (bound / math.sqrt(3)) - 1) < 0.1, k
    t = torch.nn.LSTM(30, 80, num_layers=2, bidirectional=True, proj_size=20)
    assert {k: tuple(p.shape) for k, p in m.named_parameters()} == {
        k: tuple(p.shape) for k, p in t.named_parameters()
    }
    assert "proj_size=20" in repr(m) and "bidirectional=True" in repr(m)
    g = nn.GRU(4, 5, 2, dropout=0.25, bidirectional=True)
    assert "dropout=0.25" in repr(g)


def test_dropout_in_training_mode_only(xp):
    x = xp.asarray(_r(L, N, IN))
    for cls in (nn.LSTM, nn.GRU):
        gen = np.random.default_rng(3)
        m = cls(IN, H, num_layers=2, dropout=0.5, xp=xp, dtype=xp.float64, generator=gen)
        ref = cls(IN, H, num_layers=2, xp=xp, dtype=xp.float64)
        ref.load_state_dict(m.state_dict())
        m.eval()
        np.testing.assert_array_equal(np.asarray(m(x)[0].data), np.asarray(ref(x)[0].data))
        m.train()
        a, b = np.asarray(m(x)[0].data), np.asarray(m(x)[0].data)
        assert not np.allclose(a, np.asarray(ref(x)[0].data))
        assert not np.allclose(a, b)  # a new mask every call
        # one layer: nothing between layers, so no dropout at all
        one = cls(IN, H, dropout=0.5, xp=xp, dtype=xp.float64)
        ref1 = cls(IN, H, xp=xp, dtype=xp.float64)
        ref1.load_state_dict(one.state_dict())
        np.testing.assert_array_equal(np.asarray(one(x)[0].data), np.asarray(ref1(x)[0].data))


def test_dropout_is_reproducible_from_the_generator():
    x = ad.Autodiff(np).asarray(_r(L, N, IN), dtype=np.float32)

    def run(seed):
        m = nn.LSTM(IN, H, num_layers=2, dropout=0.3, generator=np.random.default_rng(seed))
        return np.asarray(m(x)[0].data)

    np.testing.assert_array_equal(run(1), run(1))
    assert not np.array_equal(run(1), run(2))


V, T = ValueError, TypeError
BAD = [
    (lambda: nn.LSTM(3, 0), V, "LSTM: hidden_size must be an int >= 1, got 0"),
    (lambda: nn.LSTM(-1, 3), V, "LSTM: input_size must be an int >= 0"),
    (lambda: nn.LSTM("a", 3), T, "LSTM: input_size must be an int"),
    (lambda: nn.LSTM(3, 3, 0), V, "LSTM: num_layers must be an int >= 1"),
    (lambda: nn.LSTM(3, 3, 1.0), T, "LSTM: num_layers must be an int"),
    (lambda: nn.LSTM(3, 3, bias="y"), T, "LSTM: bias must be True or False"),
    (lambda: nn.LSTM(3, 3, batch_first=1), T, "LSTM: batch_first must be True or False"),
    (lambda: nn.LSTM(3, 3, bidirectional="y"), T, "LSTM: bidirectional must be True or False"),
    (lambda: nn.LSTM(3, 3, dropout=1.5), V, r"LSTM: dropout must be a number in \[0.0, 1.0\]"),
    (lambda: nn.LSTM(3, 3, dropout="x"), T, "LSTM: dropout must be a number"),
    (lambda: nn.LSTM(3, 3, dropout=True), T, "LSTM: dropout must be a number"),
    (lambda: nn.LSTM(3, 3, proj_size=-1), V, "LSTM: proj_size must be an int >= 0"),
    (lambda: nn.LSTM(3, 3, proj_size=3), V, "LSTM: proj_size must be smaller than hidden_size"),
    (lambda: nn.LSTM(3, 3, proj_size=1.0), T, "LSTM: proj_size must be an int"),
    (lambda: nn.LSTM(3, 3, generator=1), T, "LSTM: generator must be a numpy.random.Generator"),
    (lambda: nn.GRU(3, 3, bidirectional="y"), T, "GRU: bidirectional must be True or False"),
    (lambda: nn.GRU(3, 3, dropout=-0.1), V, "GRU: dropout must be a number"),
    (lambda: nn.GRU(3, 3, dropout=None), T, "GRU: dropout must be a number"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments(i):
    make, kind, match = BAD[i]
    with pytest.raises(kind, match=match):
        make()


def test_bad_inputs_and_states(xp):
    kw = dict(xp=xp, dtype=xp.float64)
    lstm = nn.LSTM(IN, H, num_layers=2, bidirectional=True, proj_size=P, **kw)
    x = xp.asarray(_r(L, N, IN))
    h, c = xp.asarray(_r(4, N, P)), xp.asarray(_r(4, N, H))
    assert tuple(lstm(x, (h, c))[0].shape) == (L, N, 2 * P)
    with pytest.raises(ValueError, match=r"LSTM: expected input \(L, N, 4\)"):
        lstm(xp.asarray(_r(L, N, IN + 1)))
    with pytest.raises(ValueError, match="LSTM: expected input"):
        lstm(xp.asarray(_r(IN)))
    with pytest.raises(ValueError, match=r"LSTM: h_0 must have shape \(4, 3, 3\)"):
        lstm(x, (c, c))
    with pytest.raises(ValueError, match=r"LSTM: c_0 must have shape \(4, 3, 6\)"):
        lstm(x, (h, h))
    with pytest.raises(TypeError, match="LSTM: hx must be a pair"):
        lstm(x, h)
    with pytest.raises(TypeError, match="LSTM: hx must be a pair"):
        lstm(x, (h, c, c))
    with pytest.raises(ValueError, match="LSTM: h_0 must have shape .* unbatched"):
        lstm(xp.asarray(_r(L, IN)), (h, c))
    gru = nn.GRU(IN, H, bidirectional=True, **kw)
    with pytest.raises(ValueError, match=r"GRU: h_0 must have shape \(2, 3, 6\)"):
        gru(x, xp.asarray(_r(1, N, H)))
    with pytest.raises(ValueError, match="GRU: expected input"):
        gru(xp.asarray(_r(2, L, N, IN)))
