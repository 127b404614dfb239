"""Transformer encoder/decoder layers and stacks against torch.nn (float64): outputs,
every parameter gradient and every input gradient, after loading torch's state dict
strictly, in eval mode and in train mode with dropout 0."""

import numpy as np
import pytest

from autodiff import nn

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")

RNG = np.random.default_rng(7)
E, H, FF, S, T, N = 8, 2, 12, 5, 4, 3
MAX_DIFF = {}


def _r(*shape):
    return RNG.standard_normal(shape)


def _causal(n, m=None):
    return np.triu(np.ones((n, m or n), dtype=bool), k=1)  # True = may not attend


_KPM_S = np.zeros((N, S), dtype=bool)
_KPM_S[0, -1] = _KPM_S[2, -2:] = True
_KPM_T = np.zeros((N, T), dtype=bool)
_KPM_T[1, -1] = True
_FLOAT_S = _r(S, S) * 0.5
_BOOL_S = RNG.random((S, S)) < 0.3
np.fill_diagonal(_BOOL_S, False)  # every row attends somewhere
_FLOAT_TS = _r(T, S) * 0.5


def _as_torch(a):
    return None if a is None else torch.tensor(a)


def _run(xp, ours, theirs, inputs, call, train, rtol=1e-9, atol=1e-10, label=""):
    """Load torch's state dict strictly, run both, compare outputs and gradients."""
    theirs = theirs.double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.train(train)
    theirs.train(train)
    ts = [xp.asarray(a, requires_grad=True) for a in inputs]
    tt = [torch.tensor(a, requires_grad=True) for a in inputs]
    out = call(ours, ts, lambda a: None if a is None else xp.asarray(a))
    ref = call(theirs, tt, _as_torch)
    ref_np = ref.detach().numpy()
    assert tuple(out.shape) == ref_np.shape
    np.testing.assert_allclose(np.asarray(out.data), ref_np, rtol=rtol, atol=atol)
    diffs = [np.max(np.abs(np.asarray(out.data) - ref_np))]
    u = _r(*ref_np.shape)
    xp.sum(out * xp.asarray(u)).backward()
    (ref * torch.tensor(u)).sum().backward()
    named = dict(ours.named_parameters())
    for k, p in theirs.named_parameters():
        assert named[k].grad is not None, f"{k} got no gradient"
        g = p.grad.numpy()
        np.testing.assert_allclose(np.asarray(named[k].grad.data), g, rtol=rtol, atol=atol,
                                   err_msg=k)  # fmt: skip
        diffs.append(np.max(np.abs(np.asarray(named[k].grad.data) - g)))
    assert set(named) == {k for k, _ in theirs.named_parameters()}
    for i, (a, b) in enumerate(zip(ts, tt)):
        np.testing.assert_allclose(np.asarray(a.grad.data), b.grad.numpy(), rtol=rtol,
                                   atol=atol, err_msg=f"input {i}")  # fmt: skip
        diffs.append(np.max(np.abs(np.asarray(a.grad.data) - b.grad.numpy())))
    MAX_DIFF[label] = max(MAX_DIFF.get(label, 0.0), float(max(diffs)))


def _kw(xp):
    return {"xp": xp, "dtype": xp.float64}


# mask cases for the encoder: (src_mask, src_key_padding_mask, our is_causal, torch's)
ENC_MASKS = {
    "none": (None, None, False, False),
    "float mask": (_FLOAT_S, None, False, False),
    "bool mask + padding": (_BOOL_S, _KPM_S, False, False),
    "padding": (None, _KPM_S, False, False),
    "causal": (_causal(S), None, True, True),
}


def _enc_call(mask, kpm, causal, torch_causal, batch_first, stack=False):
    def call(m, xs, conv):
        is_c = causal if isinstance(m, nn.Module) else torch_causal
        (x,) = xs
        if stack:
            return m(x, mask=conv(mask), src_key_padding_mask=conv(kpm), is_causal=is_c)
        return m(x, src_mask=conv(mask), src_key_padding_mask=conv(kpm), is_causal=is_c)

    return call


def _src(batch_first):
    return _r(N, S, E) if batch_first else _r(S, N, E)


@pytest.mark.parametrize("masks", list(ENC_MASKS))
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_matches_torch(xp, masks, norm_first, activation, batch_first):
    args = (E, H, FF)
    opts = {"activation": activation, "batch_first": batch_first, "norm_first": norm_first}
    for train in (False, True):
        torch.manual_seed(0)
        theirs = torch.nn.TransformerEncoderLayer(*args, dropout=0.0 if train else 0.1, **opts)
        ours = nn.TransformerEncoderLayer(*args, dropout=0.0 if train else 0.1, **opts,
                                          **_kw(xp))  # fmt: skip
        _run(xp, ours, theirs, [_src(batch_first)],
             _enc_call(*ENC_MASKS[masks], batch_first), train, label="encoder layer")  # fmt: skip


def test_encoder_layer_causal_without_mask_and_unbatched(xp):
    # is_causal=True alone applies the causal mask (torch needs the mask with it).
    torch.manual_seed(1)
    theirs = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0)
    ours = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, **_kw(xp))

    def call(m, xs, conv):
        if isinstance(m, nn.Module):
            return m(xs[0], is_causal=True)
        return m(xs[0], src_mask=conv(_causal(S)), is_causal=True)

    _run(xp, ours, theirs, [_src(False)], call, True, label="encoder layer")
    torch.manual_seed(2)
    theirs = torch.nn.TransformerEncoderLayer(E, H, FF, norm_first=True)
    ours = nn.TransformerEncoderLayer(E, H, FF, norm_first=True, **_kw(xp))
    _run(xp, ours, theirs, [_r(S, E)], lambda m, xs, conv: m(xs[0], src_mask=conv(_FLOAT_S)),
         False, label="encoder layer")  # fmt: skip


def test_encoder_layer_callable_activation_and_no_bias(xp):
    torch.manual_seed(3)
    theirs = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation=torch.tanh,
                                              bias=False)  # fmt: skip
    ours = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation=xp.tanh, bias=False,
                                      **_kw(xp))  # fmt: skip
    _run(xp, ours, theirs, [_src(False)], lambda m, xs, conv: m(xs[0]), True,
         label="encoder layer")  # fmt: skip


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("masks", ["bool mask + padding", "causal", "float mask"])
def test_encoder_stack_with_final_norm_matches_torch(xp, norm_first, batch_first, masks):
    for train in (False, True):
        torch.manual_seed(4)
        opts = {"dropout": 0.0 if train else 0.1, "batch_first": batch_first,
                "norm_first": norm_first, "activation": "gelu"}  # fmt: skip
        layer = torch.nn.TransformerEncoderLayer(E, H, FF, **opts)
        theirs = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(E),
                                             enable_nested_tensor=False)  # fmt: skip
        ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, **opts, **_kw(xp)), 2,
                                     norm=nn.LayerNorm(E, **_kw(xp)))  # fmt: skip
        assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
        _run(xp, ours, theirs, [_src(batch_first)],
             _enc_call(*ENC_MASKS[masks], batch_first, stack=True), train,
             label="encoder stack")  # fmt: skip


# decoder cases: (tgt_mask, memory_mask, tgt_kpm, memory_kpm, tgt_is_causal)
DEC_MASKS = {
    "none": (None, None, None, None, False),
    "causal + paddings": (_causal(T), None, _KPM_T, _KPM_S, True),
    "float masks": (_r(T, T) * 0.5, _FLOAT_TS, None, None, False),
    "bool masks": (_causal(T), _causal(T, S), None, None, False),
}


def _dec_call(tm, mm, tk, mk, causal):
    def call(m, xs, conv):
        return m(xs[0], xs[1], tgt_mask=conv(tm), memory_mask=conv(mm),
                 tgt_key_padding_mask=conv(tk), memory_key_padding_mask=conv(mk),
                 tgt_is_causal=causal)  # fmt: skip

    return call


@pytest.mark.parametrize("masks", list(DEC_MASKS))
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_torch(xp, masks, norm_first, activation, batch_first):
    opts = {"activation": activation, "batch_first": batch_first, "norm_first": norm_first}
    tgt = _r(N, T, E) if batch_first else _r(T, N, E)
    for train in (False, True):
        torch.manual_seed(5)
        p = 0.0 if train else 0.1
        theirs = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=p, **opts)
        ours = nn.TransformerDecoderLayer(E, H, FF, dropout=p, **opts, **_kw(xp))
        _run(xp, ours, theirs, [tgt, _src(batch_first)], _dec_call(*DEC_MASKS[masks]), train,
             label="decoder layer")  # fmt: skip


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_stack_with_final_norm_matches_torch(xp, norm_first):
    for train in (False, True):
        torch.manual_seed(6)
        opts = {"dropout": 0.0 if train else 0.1, "norm_first": norm_first}
        theirs = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, FF, **opts),
                                             2, norm=torch.nn.LayerNorm(E))  # fmt: skip
        ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, **opts, **_kw(xp)), 2,
                                     norm=nn.LayerNorm(E, **_kw(xp)))  # fmt: skip
        _run(xp, ours, theirs, [_r(T, N, E), _src(False)],
             _dec_call(*DEC_MASKS["causal + paddings"]), train, label="decoder stack")  # fmt: skip


def test_unbatched_decoder_layer_matches_torch(xp):
    torch.manual_seed(8)
    theirs = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, norm_first=True)
    ours = nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, norm_first=True, **_kw(xp))
    _run(xp, ours, theirs, [_r(T, E), _r(S, E)], lambda m, xs, conv: m(*xs), True,
         label="decoder layer")  # fmt: skip


def test_names_and_state_dict_keys_are_torchs():
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF), 2, norm=nn.LayerNorm(E))
    theirs = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, FF), 2,
                                         norm=torch.nn.LayerNorm(E))  # fmt: skip
    assert set(ours.state_dict()) == set(theirs.state_dict())
    enc = nn.TransformerEncoderLayer(E, H)
    assert {n for n, _ in enc.named_children()} >= {
        "self_attn",
        "linear1",
        "dropout",
        "linear2",
        "norm1",
        "norm2",
        "dropout1",
        "dropout2",
    }
    assert enc.linear1.weight.shape == (2048, E) and enc.dropout.p == 0.1


def test_attention_dropout_while_training(xp):
    """dropout > 0 in train mode drops attention weights too (as torch): outputs
    differ from eval mode, are reproducible from the seed, and gradients flow."""
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.5, **_kw(xp))
    x = xp.asarray(_src(False), requires_grad=True)
    layer.eval()
    ref = np.asarray(layer(x).data)
    layer.train()
    nn.init.manual_seed(11)
    a = layer(x)
    nn.init.manual_seed(11)
    b = layer(x)
    assert not np.allclose(np.asarray(a.data), ref)
    np.testing.assert_array_equal(np.asarray(a.data), np.asarray(b.data))
    xp.sum(a).backward()
    assert all(p.grad is not None for p in layer.parameters()) and x.grad is not None


@pytest.mark.parametrize("batch_first", [False, True])
def test_attention_dropout_path_matches_torch_when_nothing_is_dropped(xp, batch_first):
    """The train-mode path with dropout on the attention weights (p tiny: every
    weight kept, scale 1) gives torch's values, masks and layouts included."""
    p = 1e-300
    opts = {"batch_first": batch_first, "norm_first": batch_first}
    torch.manual_seed(9)
    theirs = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, **opts)
    ours = nn.TransformerEncoderLayer(E, H, FF, dropout=p, **opts, **_kw(xp))
    _run(xp, ours, theirs, [_src(batch_first)],
         _enc_call(*ENC_MASKS["bool mask + padding"], batch_first), True,
         label="attention-dropout path")  # fmt: skip
    tgt = _r(N, T, E) if batch_first else _r(T, N, E)
    theirs = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, **opts)
    ours = nn.TransformerDecoderLayer(E, H, FF, dropout=p, **opts, **_kw(xp))
    _run(xp, ours, theirs, [tgt, _src(batch_first)], _dec_call(*DEC_MASKS["causal + paddings"]),
         True, label="attention-dropout path")  # fmt: skip
    theirs = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, **opts)
    ours = nn.TransformerDecoderLayer(E, H, FF, dropout=p, **opts, **_kw(xp))
    _run(xp, ours, theirs, [_r(T, E), _r(S, E)], _dec_call(*DEC_MASKS["float masks"]), True,
         label="attention-dropout path")  # fmt: skip


BAD = [
    (lambda: nn.TransformerEncoderLayer(8, 3), ValueError, "d_model=8 is not divisible"),
    (lambda: nn.TransformerEncoderLayer(8, 0), ValueError, "nhead must be an int >= 1"),
    (lambda: nn.TransformerEncoderLayer(8.0, 2), TypeError, "d_model must be an int"),
    (lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=0), ValueError, "dim_feedforward"),
    (lambda: nn.TransformerEncoderLayer(8, 2, dropout=1.5), ValueError, "dropout"),
    (lambda: nn.TransformerEncoderLayer(8, 2, activation="tanh"), ValueError, "activation"),
    (lambda: nn.TransformerEncoderLayer(8, 2, activation=3), TypeError, "activation"),
    (lambda: nn.TransformerEncoderLayer(8, 2, layer_norm_eps=-1), ValueError, "layer_norm_eps"),
    (lambda: nn.TransformerEncoderLayer(8, 2, batch_first="y"), TypeError, "batch_first"),
    (lambda: nn.TransformerDecoderLayer(8, 2, norm_first=1), TypeError, "norm_first"),
    (lambda: nn.TransformerDecoderLayer(8, 2, bias=None), TypeError, "bias"),
    (lambda: nn.TransformerEncoder(nn.Linear(2, 2), 2), TypeError, "encoder_layer"),
    (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 0), ValueError,
     "num_layers"),
    (lambda: nn.TransformerDecoder(nn.TransformerEncoderLayer(8, 2), 1), TypeError,
     "decoder_layer"),
    (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 1, norm=3), TypeError,
     "norm"),
]  # fmt: skip


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments_name_the_module(i):
    make, err, msg = BAD[i]
    with pytest.raises(err, match=msg):
        make()


def test_bad_forward_arguments(xp):
    enc = nn.TransformerEncoderLayer(E, H, FF, **_kw(xp))
    dec = nn.TransformerDecoderLayer(E, H, FF, **_kw(xp))
    with pytest.raises(ValueError, match="TransformerEncoderLayer: src"):
        enc(xp.asarray(_r(S, N, E + 1)))
    with pytest.raises(TypeError, match="TransformerEncoderLayer: is_causal"):
        enc(xp.asarray(_r(S, N, E)), is_causal="yes")
    with pytest.raises(ValueError, match="TransformerDecoderLayer: memory"):
        dec(xp.asarray(_r(T, N, E)), xp.asarray(_r(S, N, 3)))
    with pytest.raises(ValueError, match="both be batched"):
        dec(xp.asarray(_r(T, N, E)), xp.asarray(_r(S, E)))
    with pytest.raises(TypeError, match="tgt_is_causal"):
        dec(xp.asarray(_r(T, N, E)), xp.asarray(_r(S, N, E)), tgt_is_causal=None)


def test_report_max_differences():
    print({k: f"{v:.1e}" for k, v in MAX_DIFF.items()})


# torch warns about its own nested-tensor fast path and about mixed mask types
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_torch(xp, batch_first, norm_first):
    """nn.Transformer (encoder + decoder stacks, final LayerNorms) loads torch's state
    dict strictly and gives torch's output and gradients, with its causal mask helper,
    padding masks and a memory mask."""
    opts = {"batch_first": batch_first, "norm_first": norm_first}
    torch.manual_seed(3)
    theirs = torch.nn.Transformer(E, H, 2, 2, FF, dropout=0.0, **opts)
    ours = nn.Transformer(E, H, 2, 2, FF, dropout=0.0, **opts, **_kw(xp))
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    causal = nn.Transformer.generate_square_subsequent_mask(T, xp=xp, dtype=xp.float64)
    ref_causal = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    np.testing.assert_array_equal(np.asarray(causal.data), ref_causal.numpy())
    src = _src(batch_first)
    tgt = _r(N, T, E) if batch_first else _r(T, N, E)

    def call(m, xs, conv):
        mine = isinstance(m, nn.Module)
        return m(xs[0], xs[1], tgt_mask=causal if mine else ref_causal,
                 memory_mask=conv(_FLOAT_TS), src_key_padding_mask=conv(_KPM_S),
                 tgt_key_padding_mask=conv(_KPM_T),
                 memory_key_padding_mask=conv(_KPM_S))  # fmt: skip

    _run(xp, ours, theirs, [src, tgt], call, True, label="Transformer")


def test_transformer_initialization_and_errors(xp):
    m = nn.Transformer(E, H, 1, 1, FF, **_kw(xp))
    for k, p in m.named_parameters():
        a = np.asarray(p.data)
        if a.ndim > 1:  # Xavier-uniform, as torch's _reset_parameters
            bound = np.sqrt(6 / (a.shape[0] + a.shape[1]))
            assert np.abs(a).max() <= bound and np.abs(a).max() > 0.5 * bound, k
    with pytest.raises(ValueError, match="Transformer: the feature number"):
        m(xp.asarray(_r(S, N, E + 1)), xp.asarray(_r(T, N, E)))
    with pytest.raises(ValueError, match="Transformer: the batch of src"):
        m(xp.asarray(_r(S, N, E)), xp.asarray(_r(T, N + 1, E)))
    with pytest.raises(TypeError, match="Transformer: custom_encoder must be a Module"):
        nn.Transformer(E, H, custom_encoder=3, **_kw(xp))
    with pytest.raises(ValueError, match="num_encoder_layers"):
        nn.Transformer(E, H, 0, **_kw(xp))
