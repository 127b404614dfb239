"""Every public function and module of ``autodiff.nn`` checks its arguments by
``autodiff.checks``: a wrong type is a TypeError, a wrong value a ValueError, and the
message names the owner (op or module) and the argument. Valid edge values still work."""

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn as nn
from autodiff.nn import functional as F
from autodiff.nn import init

XP = ad.Autodiff(np)


def _v():
    return XP.asarray(np.ones((2, 5)))


def _img():
    return XP.asarray(np.ones((1, 2, 6, 6)))


def _w():
    return XP.asarray(np.ones((3, 2, 3, 3)))


def _q():
    return XP.asarray(np.ones((1, 2, 3, 4)))


def _t():
    return XP.asarray(np.array([0, 1]))


def _param():
    return XP.asarray(np.ones((2, 3)), requires_grad=True)


def _mha_call(**kw):
    m = nn.MultiheadAttention(4, 2)
    z = m.xp.ones((3, 1, 4), dtype=m.xp.float32)
    return m(z, z, z, **kw)


def _flatten(start, end, shape):
    return nn.Flatten(start, end)(XP.ones(shape))


T, V = TypeError, ValueError

# (call, exception type, substrings the message holds: the owner, the argument, ...)
CASES = [
    # -- re-implemented: layer sizes (layers.sizes) and conv/pool pairs (conv.pair) ------
    (lambda: nn.Linear(-1, 2), V, ["Linear: in_features must be an int >= 0, got -1"]),
    (lambda: nn.Linear("a", 2), T, ["Linear: in_features must be an int", "'a'"]),
    (lambda: nn.Linear(2.0, 2), T, ["Linear: in_features must be an int", "2.0"]),
    (lambda: nn.Linear(True, 2), T, ["Linear: in_features must be an int", "True"]),
    (lambda: nn.Embedding(-2, 3), V, ["Embedding: num_embeddings must be an int >= 0"]),
    (lambda: nn.GRU(3, 0), V, ["GRU: hidden_size must be an int >= 1, got 0"]),
    (lambda: nn.GRU(3, 3, 0), V, ["GRU: num_layers must be an int >= 1"]),
    (lambda: nn.GRU(3, 3, 1.0), T, ["GRU: num_layers must be an int"]),
    (lambda: nn.GRU("a", 3), T, ["GRU: input_size must be an int"]),
    (lambda: nn.LSTMCell(3, 0), V, ["LSTMCell: hidden_size must be an int >= 1"]),
    (lambda: nn.GatedMemoryCell(0, 3), V, ["GatedMemoryCell: memory_size must be an int >= 1"]),
    (lambda: nn.MultiheadAttention(4, 0), V, ["MultiheadAttention: num_heads must be an int >= 1"]),
    (lambda: nn.MultiheadAttention("a", 2), T, ["MultiheadAttention: embed_dim must be an int"]),
    (lambda: nn.MultiheadAttention(4, 2.0), T, ["MultiheadAttention: num_heads must be an int"]),
    (lambda: nn.Conv2d(2, 3, 0), V, ["Conv2d: kernel_size must be an int >= 1, got 0"]),
    (lambda: nn.Conv2d(2, 3, 3, groups=0), V, ["Conv2d: groups must be an int >= 1, got 0"]),
    (lambda: nn.Conv2d(2, 4, 3, groups=2.0), T, ["Conv2d: groups must be an int"]),
    (lambda: nn.Conv2d(2, 3, 3, padding="full"), V, ["Conv2d: padding must be one of", "'same'"]),
    (lambda: nn.Conv2d(2, 3, 3, stride=2, padding="same"), V, ["Conv2d: padding='same'", "stride"]),
    (
        lambda: nn.ConvTranspose2d(2, 3, 3, output_padding=2),
        V,
        ["ConvTranspose2d: output_padding (2, 2) must be smaller"],
    ),
    (
        lambda: nn.ConvTranspose2d(2, 3, (3, "a")),
        T,
        ["ConvTranspose2d: kernel_size must be an int"],
    ),
    (lambda: F.conv2d(_img(), _w(), stride=0), V, ["conv2d: stride must be an int >= 1, got 0"]),
    (lambda: F.conv2d(_img(), _w(), padding=-1), V, ["conv2d: padding must be an int >= 0"]),
    (lambda: F.conv2d(_img(), _w(), dilation=(1, 0)), V, ["conv2d: dilation must be an int >= 1"]),
    (
        lambda: F.conv2d(_img(), _w(), stride=(1, True)),
        T,
        ["conv2d: stride must be an int", "True"],
    ),
    (lambda: F.conv2d(_img(), _w(), stride=1.0), T, ["conv2d: stride must be an int or a pair"]),
    (
        lambda: F.conv2d(_img(), _w(), stride=(1, 2, 3)),
        V,
        ["conv2d: stride must be an int or a pair"],
    ),
    (lambda: F.conv2d(_img(), _w(), padding="full"), V, ["conv2d: padding must be one of"]),
    (lambda: F.conv2d(_img(), _w(), groups="a"), T, ["conv2d: groups must be an int"]),
    (lambda: F.conv2d(_img(), _w(), groups=0), V, ["conv2d: groups must be an int >= 1"]),
    (
        lambda: F.conv_transpose2d(_img(), XP.ones((2, 3, 3, 3)), groups="a"),
        T,
        ["conv_transpose2d: groups must be an int"],
    ),
    (
        lambda: F.conv_transpose2d(_img(), XP.ones((2, 3, 3, 3)), output_padding=-1),
        V,
        ["conv_transpose2d: output_padding must be an int >= 0"],
    ),
    (lambda: F.max_pool2d(_img(), 0), V, ["max_pool2d: kernel_size must be an int >= 1"]),
    (lambda: F.max_pool2d(_img(), 2, stride=-1), V, ["max_pool2d: stride must be an int >= 1"]),
    (lambda: F.avg_pool2d(_img(), 2, stride=-1), V, ["avg_pool2d: stride must be an int >= 1"]),
    (lambda: nn.MaxPool2d(0), V, ["MaxPool2d: kernel_size must be an int >= 1"]),
    (lambda: nn.MaxPool2d(2, padding=2), V, ["MaxPool2d: padding (2, 2) must be at most half"]),
    (lambda: nn.AvgPool2d("a"), T, ["AvgPool2d: kernel_size must be an int or a pair"]),
    # -- re-implemented: dropout's p, reductions, label smoothing, gelu's approximate ---
    (lambda: F.dropout(_v(), p=-0.1), V, ["dropout: p must be a number in [0.0, 1.0], got -0.1"]),
    (lambda: F.dropout(_v(), p=1.5), V, ["dropout: p must be a number in [0.0, 1.0]"]),
    (lambda: nn.Dropout(2), V, ["Dropout: p must be a number in [0.0, 1.0], got 2"]),
    (
        lambda: F.cross_entropy(_v(), _t(), reduction="x"),
        V,
        ["cross_entropy: reduction must be one of 'none', 'mean', 'sum', got 'x'"],
    ),
    (lambda: F.cross_entropy(_v(), _t(), reduction=[]), V, ["cross_entropy: reduction must be"]),
    (lambda: F.mse_loss(_v(), _v(), reduction="avg"), V, ["mse_loss: reduction must be one of"]),
    (
        lambda: F.binary_cross_entropy_with_logits(_v(), _v(), reduction="x"),
        V,
        ["binary_cross_entropy_with_logits: reduction must be one of"],
    ),
    (
        lambda: F.cross_entropy(_v(), _t(), label_smoothing=2),
        V,
        ["cross_entropy: label_smoothing must be a number in [0.0, 1.0], got 2"],
    ),
    (
        lambda: F.cross_entropy(_v(), _t(), label_smoothing=float("nan")),
        V,
        ["cross_entropy: label_smoothing must be a number, got nan"],
    ),
    (
        lambda: F.gelu(_v(), approximate="erf"),
        V,
        ["gelu: approximate must be one of 'none', 'tanh'"],
    ),
    (
        lambda: nn.Embedding(5, 3, padding_idx=5),
        V,
        ["Embedding: padding_idx must be an int in [-5, 4], got 5"],
    ),
    (
        lambda: F.embedding(_t(), XP.ones((5, 3)), padding_idx=9),
        V,
        ["embedding: padding_idx 9 out of range"],
    ),
    # -- the probe's defects ---------------------------------------------------------
    (lambda: F.dropout(_v(), p="a"), T, ["dropout: p must be a number, got 'a' (str)"]),
    (lambda: nn.Dropout("a"), T, ["Dropout: p must be a number"]),
    (lambda: F.dropout(_v(), 0.5, training="yes"), T, ["dropout: training must be True or False"]),
    (lambda: F.dropout(_v(), 0.5, seed=1.5), T, ["dropout: seed must be an int"]),
    (lambda: F.dropout(_v(), 0.5, seed=-1), V, ["dropout: seed must be an int >= 0"]),
    (lambda: nn.Dropout(0.5, generator="g"), T, ["Dropout: generator must be a numpy.random"]),
    (lambda: F.layer_norm(_v(), (5,), eps=-1.0), V, ["layer_norm: eps must be a number >= 0"]),
    (lambda: F.layer_norm(_v(), (5,), eps="a"), T, ["layer_norm: eps must be a number"]),
    (
        lambda: F.layer_norm(_v(), 5.0),
        T,
        ["layer_norm: normalized_shape must be an int or a tuple"],
    ),
    (lambda: nn.LayerNorm(5, eps=-1), V, ["LayerNorm: eps must be a number >= 0, got -1"]),
    (lambda: nn.LayerNorm("a"), T, ["LayerNorm: normalized_shape must be an int or a tuple"]),
    (lambda: nn.LayerNorm(-1), V, ["LayerNorm: normalized_shape must be ints >= 0, got -1"]),
    (lambda: nn.LayerNorm(()), V, ["LayerNorm: normalized_shape must hold at least one"]),
    (
        lambda: nn.LayerNorm(5, elementwise_affine="y"),
        T,
        ["LayerNorm: elementwise_affine must be True or False"],
    ),
    (lambda: nn.LayerNorm(5, bias=1), T, ["LayerNorm: bias must be True or False"]),
    (lambda: F.softplus(_v(), beta=0), V, ["softplus: beta must be a number > 0, got 0"]),
    (lambda: F.softplus(_v(), beta=-1.0), V, ["softplus: beta must be a number > 0"]),
    (lambda: F.softplus(_v(), beta="a"), T, ["softplus: beta must be a number"]),
    (lambda: F.softplus(_v(), threshold="a"), T, ["softplus: threshold must be a number"]),
    (lambda: nn.Softplus(beta=0), V, ["Softplus: beta must be a number > 0"]),
    (lambda: nn.GELU("x"), V, ["GELU: approximate must be one of"]),
    (lambda: F.rope(_q(), base=0.0), V, ["rope: base must be a number > 0, got 0.0"]),
    (lambda: F.rope(_q(), base="a"), T, ["rope: base must be a number"]),
    (lambda: F.rope(_q(), interleaved="yes"), T, ["rope: interleaved must be True or False"]),
    (
        lambda: F.avg_pool2d(_img(), 2, ceil_mode="yes"),
        T,
        ["avg_pool2d: ceil_mode must be True or False"],
    ),
    (
        lambda: F.avg_pool2d(_img(), 2, count_include_pad="yes"),
        T,
        ["avg_pool2d: count_include_pad must be True or False"],
    ),
    (
        lambda: F.max_pool2d(_img(), 2, ceil_mode=1),
        T,
        ["max_pool2d: ceil_mode must be True or False"],
    ),
    (lambda: nn.MaxPool2d(2, ceil_mode="yes"), T, ["MaxPool2d: ceil_mode must be True or False"]),
    (
        lambda: nn.AvgPool2d(2, count_include_pad=1),
        T,
        ["AvgPool2d: count_include_pad must be True or False"],
    ),
    (lambda: nn.Linear(2, 2, bias="no"), T, ["Linear: bias must be True or False, got 'no'"]),
    (lambda: nn.Conv2d(2, 3, 3, bias="no"), T, ["Conv2d: bias must be True or False"]),
    (
        lambda: nn.ConvTranspose2d(2, 3, 3, bias=0),
        T,
        ["ConvTranspose2d: bias must be True or False"],
    ),
    (lambda: nn.GRU(3, 3, bias="y"), T, ["GRU: bias must be True or False"]),
    (lambda: nn.GRU(3, 3, batch_first="y"), T, ["GRU: batch_first must be True or False"]),
    (lambda: nn.GRUCell(3, 3, bias="y"), T, ["GRUCell: bias must be True or False"]),
    (lambda: nn.LSTMCell(3, 3, bias="y"), T, ["LSTMCell: bias must be True or False"]),
    (
        lambda: nn.GatedMemoryCell(3, 3, bias="y"),
        T,
        ["GatedMemoryCell: bias must be True or False"],
    ),
    (lambda: nn.MultiheadAttention(4, 2, bias="y"), T, ["MultiheadAttention: bias must be True"]),
    (
        lambda: nn.MultiheadAttention(4, 2, batch_first="y"),
        T,
        ["MultiheadAttention: batch_first must be True or False"],
    ),
    (lambda: nn.MultiheadAttention(4, 2, rope="y"), T, ["MultiheadAttention: rope must be True"]),
    (
        lambda: nn.MultiheadAttention(4, 2, rope=True, rope_base=0),
        V,
        ["MultiheadAttention: rope_base must be a number > 0"],
    ),
    (
        lambda: nn.MultiheadAttention(4, 2, dropout="a"),
        T,
        ["MultiheadAttention: dropout must be a number"],
    ),
    (
        lambda: nn.MultiheadAttention(4, 2, dropout=2.0),
        V,
        ["MultiheadAttention: dropout must be a number in [0.0, 1.0]"],
    ),
    (
        lambda: _mha_call(need_weights="y"),
        T,
        ["MultiheadAttention: need_weights must be True or False"],
    ),
    (lambda: _mha_call(is_causal="y"), T, ["MultiheadAttention: is_causal must be True or False"]),
    (
        lambda: _mha_call(average_attn_weights=None),
        T,
        ["MultiheadAttention: average_attn_weights must be True or False"],
    ),
    (lambda: nn.Flatten(start_dim="a"), T, ["Flatten: start_dim must be an int, got 'a'"]),
    (lambda: nn.Flatten(end_dim=1.5), T, ["Flatten: end_dim must be an int"]),
    (
        lambda: _flatten(5, -1, (2, 3, 4)),
        V,
        ["Flatten: start_dim must be an int in [-3, 2], got 5"],
    ),
    (lambda: _flatten(2, 1, (2, 3, 4)), V, ["Flatten: start_dim=2 comes after end_dim=1"]),
    (lambda: nn.Softmax("a"), T, ["Softmax: axis must be an int"]),
    (lambda: nn.LogSoftmax(1.0), T, ["LogSoftmax: axis must be an int"]),
    (lambda: F.softmax(_v(), axis="a"), T, ["softmax: axis must be an int, got 'a'"]),
    (lambda: F.log_softmax(_v(), axis=1.0), T, ["log_softmax: axis must be an int"]),
    (lambda: F.logsumexp(_v(), axis="a"), T, ["logsumexp: axis must be an int"]),
    (lambda: F.logsumexp(_v(), axis=(0, "a")), T, ["logsumexp: axis must be an int or a tuple"]),
    (lambda: F.logsumexp(_v(), keepdims="a"), T, ["logsumexp: keepdims must be True or False"]),
    (lambda: nn.Embedding(5, 3, padding_idx="a"), T, ["Embedding: padding_idx must be an int"]),
    (lambda: nn.Embedding(5, 3, padding_idx=1.0), T, ["Embedding: padding_idx must be an int"]),
    (
        lambda: F.embedding(_t(), XP.ones((5, 3)), padding_idx=1.0),
        T,
        ["embedding: padding_idx must be an int"],
    ),
    (
        lambda: F.cross_entropy(_v(), _t(), ignore_index="a"),
        T,
        ["cross_entropy: ignore_index must be an int"],
    ),
    (
        lambda: F.cross_entropy(_v(), _t(), ignore_index=1.5),
        T,
        ["cross_entropy: ignore_index must be an int"],
    ),
    (
        lambda: F.cross_entropy(_v(), _t(), label_smoothing="a"),
        T,
        ["cross_entropy: label_smoothing must be a number"],
    ),
    (
        lambda: F.binary_cross_entropy_with_logits(_v(), _v(), weight=XP.ones((3,))),
        V,
        ["binary_cross_entropy_with_logits: weight has shape (3,)", "(2, 5)"],
    ),
    (
        lambda: F.binary_cross_entropy_with_logits(_v(), _v(), pos_weight=XP.ones((2, 2, 5))),
        V,
        ["binary_cross_entropy_with_logits: pos_weight has shape (2, 2, 5)"],
    ),
    (
        lambda: F.binary_cross_entropy_with_logits(_v(), _v(), weight=[1.0]),
        T,
        ["binary_cross_entropy_with_logits: weight must be an array or a Tensor, got list"],
    ),
    (
        lambda: F.scaled_dot_product_attention(_q(), _q(), _q(), scale="a"),
        T,
        ["scaled_dot_product_attention: scale must be a number"],
    ),
    (
        lambda: F.scaled_dot_product_attention(_q(), _q(), _q(), is_causal="y"),
        T,
        ["scaled_dot_product_attention: is_causal must be True or False"],
    ),
    (
        lambda: F.scaled_dot_product_attention(_q(), _q(), _q(), dropout_p="a"),
        T,
        ["scaled_dot_product_attention: dropout_p must be a number"],
    ),
    (
        lambda: F.scaled_dot_product_attention(_q(), _q(), _q(), dropout_p=-1),
        V,
        ["scaled_dot_product_attention: dropout_p must be a number in [0.0, 1.0]"],
    ),
    (
        lambda: F.self_attention_packed(XP.ones((1, 3, 12)), "a"),
        T,
        ["self_attention_packed: heads must be an int"],
    ),
    (
        lambda: F.self_attention_packed(XP.ones((1, 3, 12)), 0),
        V,
        ["self_attention_packed: heads must be an int >= 1, got 0"],
    ),
    (
        lambda: F.self_attention_packed(XP.ones((1, 3, 12)), 2, is_causal="y"),
        T,
        ["self_attention_packed: is_causal must be True or False"],
    ),
    (
        lambda: F.self_attention_packed(XP.ones((1, 3, 12)), 2, scale="a"),
        T,
        ["self_attention_packed: scale must be a number"],
    ),
    (
        lambda: F.lstm_cell(XP.ones((2, 4)), XP.ones((2, 3)), XP.ones((12, 4)), XP.ones((12, 3))),
        T,
        ["lstm_cell: hx must be a pair (h, c)"],
    ),
    (
        lambda: F.lstm_cell(XP.ones((2, 4)), [XP.ones((2, 3))], XP.ones((12, 4)), XP.ones((12, 3))),
        V,
        ["lstm_cell: hx must be a pair (h, c), got 1"],
    ),
    # init
    (
        lambda: init.kaiming_uniform_(_param(), mode="x"),
        V,
        ["kaiming_uniform_: mode must be one of 'fan_in', 'fan_out', got 'x'"],
    ),
    (lambda: init.kaiming_uniform_(_param(), a="x"), T, ["kaiming_uniform_: a must be a number"]),
    (
        lambda: init.kaiming_uniform_(_param(), nonlinearity="x"),
        V,
        ["kaiming_uniform_: nonlinearity must be one of"],
    ),
    (
        lambda: init.kaiming_uniform_(XP.ones((3,), requires_grad=True)),
        V,
        ["kaiming_uniform_: fan in and fan out need a tensor of at least 2 dimensions"],
    ),
    (
        lambda: init.uniform_(_param(), 1.0, 0.0),
        V,
        ["uniform_: b must be a number >= 1.0, got 0.0"],
    ),
    (lambda: init.uniform_(_param(), "a"), T, ["uniform_: a must be a number"]),
    (
        lambda: init.uniform_(_param(), generator="g"),
        T,
        ["uniform_: generator must be a numpy.random"],
    ),
    (lambda: init.uniform_([1.0, 2.0]), T, ["uniform_: tensor must be an array or a Tensor"]),
    (lambda: init.normal_(_param(), 0, -1), V, ["normal_: std must be a number >= 0, got -1"]),
    (lambda: init.normal_(_param(), "a"), T, ["normal_: mean must be a number"]),
    (lambda: init.constant_(_param(), "a"), T, ["constant_: value must be a number"]),
    (
        lambda: init.xavier_uniform_(_param(), gain="a"),
        T,
        ["xavier_uniform_: gain must be a number"],
    ),
    (
        lambda: init.xavier_uniform_(_param(), gain=-1),
        V,
        ["xavier_uniform_: gain must be a number >= 0"],
    ),
    (
        lambda: init.xavier_normal_(_param(), gain=None),
        T,
        ["xavier_normal_: gain must be a number"],
    ),
    (lambda: init.calculate_gain("x"), V, ["calculate_gain: nonlinearity must be one of", "'x'"]),
    (lambda: init.calculate_gain("leaky_relu", "a"), T, ["calculate_gain: param must be a number"]),
    (
        lambda: init.calculate_gain("leaky_relu", True),
        T,
        ["calculate_gain: param must be a number"],
    ),
    (lambda: init.manual_seed("a"), T, ["manual_seed: seed must be an int"]),
    (lambda: init.manual_seed(-1), V, ["manual_seed: seed must be an int >= 0"]),
    # Module and containers
    (
        lambda: nn.Linear(2, 2).to("float99"),
        T,
        ["Module.to: xp must be an array namespace", "'float99'"],
    ),
    (
        lambda: nn.Linear(2, 2).to(dtype="float99"),
        V,
        ["Module.to: dtype 'float99' is not a dtype name"],
    ),
    (
        lambda: nn.Linear(2, 2).to(dtype="int64"),
        V,
        ["Module.to: dtype must be a real floating dtype"],
    ),
    (
        lambda: nn.Linear(2, 2).to(dtype=3),
        T,
        ["Module.to: dtype must be a dtype or its name, got 3"],
    ),
    (lambda: nn.Linear(2, 2).train("a"), T, ["Module.train: mode must be True or False"]),
    (
        lambda: nn.Linear(2, 2).zero_grad("a"),
        T,
        ["Module.zero_grad: set_to_none must be True or False"],
    ),
    (lambda: nn.Linear(2, 2).apply(3), T, ["Module.apply: fn must be callable, got int"]),
    (
        lambda: nn.Linear(2, 2).load_state_dict({}, strict="a"),
        T,
        ["load_state_dict: strict must be True or False"],
    ),
    (lambda: nn.Linear(2, 2).register_buffer(3, None), T, ["register_buffer: name must be a str"]),
    (
        lambda: nn.Linear(2, 2).add_module("a.b", None),
        V,
        ["add_module: name must be non-empty", "'a.b'"],
    ),
    (lambda: nn.Sequential(3), T, ["Sequential: module 0 must be a Module, got int"]),
    (lambda: nn.ModuleList(3), T, ["ModuleList: modules must be an iterable of Modules"]),
    (lambda: nn.ModuleList([nn.ReLU(), 3]), T, ["ModuleList: module 1 must be a Module, got int"]),
    (lambda: nn.Linear(2, 2, dtype="float99"), V, ["Linear: dtype 'float99' is not a dtype name"]),
    (lambda: nn.Linear(2, 2, xp="numpy"), T, ["Linear: xp must be an array namespace"]),
    (
        lambda: nn.Linear(2, 2, generator="g"),
        T,
        ["Linear: generator must be a numpy.random.Generator"],
    ),
    (lambda: nn.Embedding(5, 3, generator=1), T, ["Embedding: generator must be a numpy.random"]),
    (lambda: nn.GRU(3, 3, generator="g"), T, ["GRU: generator must be a numpy.random.Generator"]),
]


def _id(case):
    return case[2][0][:60]


@pytest.mark.parametrize("call, error, parts", CASES, ids=[_id(c) for c in CASES])
def test_bad_argument_is_refused_naming_owner_and_argument(call, error, parts):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error  # not a subclass (e.g. NumPy's AxisError)
    msg = str(info.value)
    for part in parts:
        assert part in msg, (part, msg)


def test_to_refuses_a_bad_dtype_before_moving_anything():
    m = nn.Sequential(nn.Linear(2, 2, dtype="float64"), nn.Linear(2, 1, dtype="float64"))
    before = [p.dtype for p in m.parameters()]
    with pytest.raises(ValueError, match="Module.to: dtype"):
        m.to(dtype="float99")
    assert [p.dtype for p in m.parameters()] == before == [XP.float64] * 4
    m.to(dtype="float32")
    assert all(p.dtype == XP.float32 for p in m.parameters())


# -- valid edge values still work ---------------------------------------------------------
def test_dropout_edges():
    x = XP.asarray(np.arange(1.0, 7.0))
    assert F.dropout(x, 0.0) is x and F.dropout(x, 0, seed=3) is x
    assert F.dropout(x, 0.9, training=False) is x
    np.testing.assert_array_equal(np.asarray(F.dropout(x, 1.0).data), np.zeros(6))
    np.testing.assert_array_equal(np.asarray(F.dropout(x, 1, seed=0).data), np.zeros(6))
    y = np.asarray(F.dropout(x, np.float32(0.5), seed=np.int64(4)).data)
    assert set(np.unique(y / np.arange(1.0, 7.0))) <= {0.0, 2.0}
    d = nn.Dropout(1.0)
    np.testing.assert_array_equal(np.asarray(d(x).data), np.zeros(6))
    assert d.eval()(x) is x and nn.Dropout(0)(x) is x


def test_layer_norm_edges():
    x = XP.asarray(np.array([[1.0, 3.0], [2.0, 4.0]]))
    y = F.layer_norm(x, 2, eps=0)  # eps 0 is allowed: rows with variance are exact
    np.testing.assert_allclose(np.asarray(y.data)[0], [-1.0, 1.0])
    y = F.layer_norm(x, [np.int64(2)], eps=np.float64(0.5))
    np.testing.assert_allclose(np.asarray(y.data)[0], [-1 / np.sqrt(1.5), 1 / np.sqrt(1.5)])
    m = nn.LayerNorm(2, eps=0, dtype="float64")
    assert m.eps == 0.0 and m.normalized_shape == (2,)
    np.testing.assert_allclose(np.asarray(m(x).data)[0], [-1.0, 1.0])
    assert nn.LayerNorm(0).weight.shape == (0,)  # as torch
    assert nn.LayerNorm(4, elementwise_affine=False).weight is None


def test_other_valid_edges():
    v = XP.asarray(np.array([[0.0, 1.0, 2.0]]))
    np.testing.assert_allclose(
        np.asarray(F.softplus(v, beta=1e-3).data), np.log1p(np.exp(1e-3 * v.data)) / 1e-3
    )
    np.testing.assert_allclose(np.asarray(F.softplus(v, threshold=-1).data), v.data)  # x itself
    np.testing.assert_allclose(np.asarray(nn.Softplus(2)(v).data), np.logaddexp(0, 2 * v.data) / 2)
    e = np.exp(v.data - v.data.max())
    np.testing.assert_allclose(np.asarray(F.softmax(v, axis=None).data), e / e.sum())
    np.testing.assert_allclose(np.asarray(nn.Softmax(np.int64(1))(v).data), e / e.sum())
    np.testing.assert_allclose(float(F.logsumexp(v, axis=[0, 1])), np.log(np.exp(v.data).sum()))
    q = XP.asarray(np.random.default_rng(0).standard_normal((1, 2, 3, 4)))
    # base 1 (any base > 0): every pair turns by its position itself
    c, s_ = np.cos(np.arange(3.0))[:, None], np.sin(np.arange(3.0))[:, None]
    a, b = q.data[..., :2], q.data[..., 2:]
    turned = np.concatenate([a * c - b * s_, a * s_ + b * c], axis=-1)
    np.testing.assert_allclose(np.asarray(F.rope(q, base=1).data), turned, rtol=1e-12)
    out = F.scaled_dot_product_attention(q, q, q, scale=0)  # uniform weights: the mean of v
    np.testing.assert_allclose(
        np.asarray(out.data), np.broadcast_to(q.data.mean(-2, keepdims=True), q.shape)
    )
    img = XP.asarray(np.arange(16.0).reshape(1, 1, 4, 4))
    pooled = F.max_pool2d(img, [2, 2], ceil_mode=True)
    np.testing.assert_array_equal(np.asarray(pooled.data), [[[[5.0, 7.0], [13.0, 15.0]]]])
    pooled = nn.AvgPool2d((2, 2), count_include_pad=False)(img)
    np.testing.assert_array_equal(np.asarray(pooled.data), [[[[2.5, 4.5], [10.5, 12.5]]]])
    assert nn.Conv2d(2, 3, np.int64(3), padding="same").padding == "same"
    assert nn.Conv2d(2, 3, (3, 1), stride=[2, 1]).stride == (2, 1)
    assert nn.Embedding(5, 3, padding_idx=-5).padding_idx == 0
    assert nn.Flatten(0, -1)(XP.asarray(3.0)).shape == (1,)  # a 0-d input, as torch
    assert nn.Flatten(-3, 1)(XP.ones((2, 3, 4))).shape == (6, 4)
    t, z = XP.asarray(np.array([0, 1])), XP.asarray(np.zeros((2, 2)))
    np.testing.assert_allclose(float(F.cross_entropy(z, t, ignore_index=np.int64(1))), np.log(2))
    w = XP.ones((2, 3), requires_grad=True)
    init.uniform_(w, 0.5, 0.5)
    np.testing.assert_array_equal(np.asarray(w.data), np.full((2, 3), 0.5))
    init.normal_(w, 2.0, 0)
    np.testing.assert_array_equal(np.asarray(w.data), np.full((2, 3), 2.0))
    init.constant_(w, True)
    np.testing.assert_array_equal(np.asarray(w.data), np.ones((2, 3)))
    init.xavier_uniform_(w, gain=0)
    np.testing.assert_array_equal(np.asarray(w.data), np.zeros((2, 3)))
    assert init.kaiming_uniform_(XP.ones((0, 3), requires_grad=True), mode="fan_out").shape == (
        0,
        3,
    )
    assert init.calculate_gain("conv1d") == 1.0 and init.calculate_gain("leaky_relu", 0) == np.sqrt(
        2
    )
    m = nn.Linear(2, 2, generator=np.random.default_rng(0))
    assert m.train(False).training is False and m.train().training is True
    m.to(np, dtype=np.float64)
    assert m.weight.dtype == XP.float64
