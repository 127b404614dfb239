"""nn.Parameter, ModuleDict, ParameterList, ParameterDict: torch's behaviour, state-dict
keys and a strict load of torch's state dict."""

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn

torch = pytest.importorskip("torch", reason="the containers are compared with torch.nn")
xp = ad.Autodiff(np)


def test_parameter_is_a_leaf_that_requires_grad_and_shares_the_buffer():
    a = np.array([1.0, 2.0])
    p = nn.Parameter(a)
    assert isinstance(p, nn.Parameter) and isinstance(p, ad.Tensor)
    assert p.requires_grad and p.is_leaf
    a[0] = 5.0  # the same buffer, as torch.nn.Parameter(torch.from_numpy(a))
    assert float(p[0]) == 5.0
    q = nn.Parameter(xp.asarray([1.0]), requires_grad=False)
    assert not q.requires_grad and not isinstance(q, nn.Parameter)
    assert not isinstance(p * 2, nn.Parameter)  # computed: no parameter
    assert nn.Parameter().shape == (0,)
    with pytest.raises(TypeError, match="Parameter: data must be a Tensor or an array"):
        nn.Parameter("x")
    with pytest.raises(TypeError, match="Parameter: requires_grad must be True or False"):
        nn.Parameter(a, requires_grad="yes")


def make_net(lib):
    """The same model on our nn or torch.nn."""
    if lib is nn:
        mk = lambda *s: nn.Parameter(xp.ones(s, dtype=xp.float64))  # noqa: E731
    else:
        mk = lambda *s: torch.nn.Parameter(torch.ones(*s, dtype=torch.float64))  # noqa: E731

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.heads = lib.ModuleDict({"a": lib.Linear(3, 2), "b": lib.Linear(3, 1)})
            self.scales = lib.ParameterList([mk(2), mk(1)])
            self.extra = lib.ParameterDict({"shift": mk(3)})

        def forward(self, x):
            x = x + self.extra["shift"]
            return self.heads["a"](x) * self.scales[0], self.heads["b"](x) * self.scales[1]

    return Net()


def test_state_dict_keys_equal_torch_and_a_strict_load_gives_torch_gradients():
    ours, theirs = make_net(nn).to(xp, dtype=xp.float64), make_net(torch.nn).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((4, 3))
    a, b = ours(xp.asarray(x))
    (xp.sum(a * a) + xp.sum(b)).backward()
    ta, tb = theirs(torch.tensor(x))
    ((ta * ta).sum() + tb.sum()).backward()
    np.testing.assert_allclose(np.asarray(a.detach()), ta.detach().numpy(), rtol=1e-14)
    for (k, p), (k2, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert k == k2
        np.testing.assert_allclose(np.asarray(p.grad), q.grad.numpy(), rtol=1e-13, err_msg=k)


def test_dict_and_list_operations():
    d = nn.ModuleDict()
    d["x"] = nn.Identity()
    d.update([("y", nn.Tanh())])
    assert list(d) == ["x", "y"] and len(d) == 2 and "y" in d
    assert isinstance(d.pop("x"), nn.Identity) and d.keys() == ["y"]
    with pytest.raises(KeyError, match="ModuleDict: no entry 'z'"):
        d["z"]
    with pytest.raises(TypeError, match="must be a Module"):
        d["z"] = 3
    with pytest.raises(ValueError, match="name must be non-empty and hold no '.'"):
        d["a.b"] = nn.Tanh()
    pl = nn.ParameterList([np.ones(2)])
    pl.append(np.zeros(3))
    assert len(pl) == 2 and pl[-1].shape == (3,) and isinstance(pl[0], nn.Parameter)
    pl[0] = np.full(2, 7.0)
    assert float(pl[0][1]) == 7.0 and [p.shape for p in pl] == [(2,), (3,)]
    with pytest.raises(IndexError, match="ParameterList: index 2 out of range"):
        pl[2]
    with pytest.raises(ValueError, match="a parameter must be a leaf"):
        pl.append(pl[0] * 2)
    pd = nn.ParameterDict({"w": np.ones(2)})
    assert list(pd.state_dict()) == ["w"] and len(list(pd.parameters())) == 1
    del pd["w"]
    assert len(pd) == 0


def test_summary_lists_layers_output_shapes_and_parameter_counts_as_torch_has_them():
    m = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Sequential(nn.Flatten(), nn.Linear(144, 10))
    )
    t = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3),
        torch.nn.ReLU(),
        torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(144, 10)),
    )
    s = nn.summary(m, (2, 1, 8, 8))
    shapes = {}
    for name, mod in t.named_modules():
        mod.register_forward_hook(lambda mm, a, o, name=name: shapes.__setitem__(name, o.shape))
    t(torch.zeros(2, 1, 8, 8))
    assert [r[0] for r in s.rows] == ["", "0", "1", "2", "2.0", "2.1"]
    for name, _kind, shape, count, _ in s.rows:
        assert shape == tuple(shapes[name]), name
        assert count == sum(p.numel() for p in t.get_submodule(name).parameters()), name
    assert s.total_params == s.trainable_params == 1490
    text = str(s)
    assert "  0 (Conv2d)" in text and "Total params: 1,490" in text
    assert "<table>" in s._repr_html_()
    with pytest.raises(TypeError, match="summary: model must be an nn.Module"):
        nn.summary(3, (1,))
