"""Transformer encoder and decoder layers and stacks as ``torch.nn.Transformer*``:
same constructor arguments, submodule and parameter names (a torch state dict loads
one to one), post-norm and pre-norm (``norm_first``), torch's mask conventions.

Compositions of ``MultiheadAttention`` (built with the layer's ``dropout``, which it
applies to the attention weights while training, as torch's), ``Linear``,
``LayerNorm`` and ``Dropout``.
"""

from __future__ import annotations

import copy

from ... import checks
from ...engine.namespace import recorder_of
from .. import init
from .attention import MultiheadAttention
from .dropout import Dropout
from .linear import Linear
from .module import Module, ModuleList, factory, flags, sizes
from .normalization import LayerNorm

__all__ = [
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
]


def _relu(x):
    return recorder_of(x).xp.nn.relu(x)


def _gelu(x):
    return recorder_of(x).xp.nn.gelu(x, approximate="none")


def _activation(name, activation):
    if isinstance(activation, str):
        activation = checks.choice(name, "activation", activation, ("relu", "gelu"))
        return _relu if activation == "relu" else _gelu
    if not callable(activation):
        raise TypeError(
            f"{name}: activation must be 'relu', 'gelu' or a callable, got "
            f"{type(activation).__name__}"
        )
    return activation


class _Layer(Module):
    """What the encoder and decoder layers share: arguments, the feed-forward block."""

    def _setup(self, name, d_model, nhead, dim_feedforward, dropout, activation,
               layer_norm_eps, batch_first, norm_first, bias, norms, kw):  # fmt: skip
        sizes(name, ("d_model", "nhead", "dim_feedforward"), d_model=d_model, nhead=nhead,
              dim_feedforward=dim_feedforward)  # fmt: skip
        checks.number(name, "dropout", dropout, 0.0, 1.0)
        checks.number(name, "layer_norm_eps", layer_norm_eps, low=0)
        flags(name, batch_first=batch_first, norm_first=norm_first, bias=bias)
        act = _activation(name, activation)
        if d_model % nhead:
            raise ValueError(f"{name}: d_model={d_model} is not divisible by nhead={nhead}")
        gen = kw["generator"]
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias=bias,
                                            batch_first=batch_first, **kw)  # fmt: skip
        self._extra_attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias, **kw)
        self.dropout = Dropout(dropout, generator=gen)
        self.linear2 = Linear(dim_feedforward, d_model, bias, **kw)
        self.norm_first = norm_first
        ln = {k: v for k, v in kw.items() if k != "generator"}
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **ln))
        for i in range(1, norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout, generator=gen))
        self.activation = act
        self.batch_first = batch_first

    def _extra_attention(self):
        pass

    def _sa(self, mha, x, mem, mask, kpm, is_causal, drop):
        out = mha(x, mem, mem, key_padding_mask=kpm, need_weights=False, attn_mask=mask,
                  is_causal=is_causal)[0]  # fmt: skip
        return drop(out)

    def _ff(self, x, drop):
        return drop(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def extra_repr(self):
        return f"norm_first={self.norm_first}" if self.norm_first else ""


def _check_input(name, what, x, d_model):
    if not hasattr(x, "shape"):
        raise TypeError(f"{name}: {what} must be an array or a Tensor, got {type(x).__name__}")
    if x.ndim not in (2, 3) or x.shape[-1] != d_model:
        shape = tuple(getattr(x, "shape", ()))
        raise ValueError(
            f"{name}: {what} must be (seq, d_model) or 3-D ending with d_model={d_model}, "
            f"got shape {shape}"
        )


class TransformerEncoderLayer(_Layer):
    """Self-attention and a feed-forward block, each with a residual connection and
    a LayerNorm after it (``norm_first=False``, torch's default) or before it.

    ``layer(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``: ``src``
    is (S, N, E), (N, S, E) with ``batch_first``, or unbatched (S, E). Masks as
    ``MultiheadAttention`` (boolean True = may not attend; float masks are added).
    ``is_causal=True`` applies the causal mask (torch takes it as a hint that
    ``src_mask`` is causal and needs that mask; here it may be left out).
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, *,
                 xp=None, dtype=None, device=None, generator=None):  # fmt: skip
        super().__init__()
        kw = {"xp": xp, "dtype": dtype, "device": device, "generator": generator}
        self._setup("TransformerEncoderLayer", d_model, nhead, dim_feedforward, dropout,
                    activation, layer_norm_eps, batch_first, norm_first, bias, 2, kw)  # fmt: skip

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        name = "TransformerEncoderLayer"
        is_causal = checks.flag(name, "is_causal", is_causal)
        _check_input(name, "src", src, self.self_attn.embed_dim)
        x = src
        if self.norm_first:
            y = self.norm1(x)
            x = x + self._sa(self.self_attn, y, y, src_mask, src_key_padding_mask, is_causal,
                             self.dropout1)  # fmt: skip
            x = x + self._ff(self.norm2(x), self.dropout2)
        else:
            x = self.norm1(x + self._sa(self.self_attn, x, x, src_mask, src_key_padding_mask,
                                        is_causal, self.dropout1))  # fmt: skip
            x = self.norm2(x + self._ff(x, self.dropout2))
        return x


class TransformerDecoderLayer(_Layer):
    """Self-attention, attention over ``memory`` and a feed-forward block, each with
    a residual connection and a LayerNorm after it (or before, ``norm_first=True``).

    ``layer(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``;
    layouts and masks as ``TransformerEncoderLayer``.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, *,
                 xp=None, dtype=None, device=None, generator=None):  # fmt: skip
        super().__init__()
        kw = {"xp": xp, "dtype": dtype, "device": device, "generator": generator}
        self._kw = kw
        self._setup("TransformerDecoderLayer", d_model, nhead, dim_feedforward, dropout,
                    activation, layer_norm_eps, batch_first, norm_first, bias, 3, kw)  # fmt: skip
        del self._kw

    def _extra_attention(self):
        sa = self.self_attn
        bias = sa.in_proj_bias is not None
        self.multihead_attn = MultiheadAttention(
            sa.embed_dim,
            sa.num_heads,
            sa.dropout,
            bias=bias,
            batch_first=sa.batch_first,
            **self._kw,
        )

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False,
                memory_is_causal=False):  # fmt: skip
        name = "TransformerDecoderLayer"
        tgt_is_causal = checks.flag(name, "tgt_is_causal", tgt_is_causal)
        memory_is_causal = checks.flag(name, "memory_is_causal", memory_is_causal)
        E = self.self_attn.embed_dim
        _check_input(name, "tgt", tgt, E)
        _check_input(name, "memory", memory, E)
        if memory.ndim != tgt.ndim:
            raise ValueError(
                f"{name}: tgt and memory must both be batched or both unbatched, got shapes "
                f"{tuple(tgt.shape)} and {tuple(memory.shape)}"
            )
        x = tgt
        sa = (self.self_attn, tgt_mask, tgt_key_padding_mask, tgt_is_causal, self.dropout1)
        ca = (self.multihead_attn, memory_mask, memory_key_padding_mask, memory_is_causal,
              self.dropout2)  # fmt: skip
        if self.norm_first:
            y = self.norm1(x)
            x = x + self._sa(sa[0], y, y, *sa[1:])
            x = x + self._sa(ca[0], self.norm2(x), memory, *ca[1:])
            x = x + self._ff(self.norm3(x), self.dropout3)
        else:
            x = self.norm1(x + self._sa(sa[0], x, x, *sa[1:]))
            x = self.norm2(x + self._sa(ca[0], x, memory, *ca[1:]))
            x = self.norm3(x + self._ff(x, self.dropout3))
        return x


def _stack(owner, self, layer, cls, num_layers, norm):
    if not isinstance(layer, cls):
        what = owner[len("Transformer") :].lower()
        raise TypeError(f"{owner}: {what}_layer must be a {cls.__name__}, got "
                        f"{type(layer).__name__}")  # fmt: skip
    checks.integer(owner, "num_layers", num_layers, low=1)
    if norm is not None and not isinstance(norm, Module):
        raise TypeError(f"{owner}: norm must be a Module or None, got {type(norm).__name__}")
    # Deep copies that share the layer's generators (copies of a generator would
    # draw the same dropout masks in every layer).
    gens = [m.generator for m in layer.modules() if isinstance(m, Dropout)]
    gens += [m._generator for m in layer.modules() if isinstance(m, MultiheadAttention)]
    memo = {id(g): g for g in gens if g is not None}
    self.layers = ModuleList([copy.deepcopy(layer, dict(memo)) for _ in range(num_layers)])
    self.num_layers = num_layers
    self.norm = norm


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``layers.0`` ...), then
    ``norm`` if given. ``enc(src, mask=None, src_key_padding_mask=None,
    is_causal=None)``."""

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        _stack("TransformerEncoder", self, encoder_layer, TransformerEncoderLayer, num_layers,
               norm)  # fmt: skip

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        is_causal = False if is_causal is None else is_causal
        is_causal = checks.flag("TransformerEncoder", "is_causal", is_causal)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=is_causal)  # fmt: skip
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` (``layers.0`` ...), then
    ``norm`` if given; ``dec(tgt, memory, ...)`` with the layer's masks."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        _stack("TransformerDecoder", self, decoder_layer, TransformerDecoderLayer, num_layers,
               norm)  # fmt: skip

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None,
                memory_is_causal=False):  # fmt: skip
        tgt_is_causal = False if tgt_is_causal is None else tgt_is_causal
        tgt_is_causal = checks.flag("TransformerDecoder", "tgt_is_causal", tgt_is_causal)
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)  # fmt: skip
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder model of "Attention is all you need", as ``torch.nn.Transformer``:
    ``encoder`` (``num_encoder_layers`` encoder layers, then a LayerNorm) and ``decoder``
    (the same for decoder layers), the same arguments, parameter names and
    initialization (Xavier-uniform for every parameter of more than one axis).

    ``model(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)``; layouts and masks
    as the layers'. ``custom_encoder``/``custom_decoder`` replace the stacks.
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, *, xp=None, dtype=None, device=None, generator=None):  # fmt: skip
        super().__init__()
        name = "Transformer"
        checks.integer(name, "num_encoder_layers", num_encoder_layers, low=1)
        checks.integer(name, "num_decoder_layers", num_decoder_layers, low=1)
        kw = {"xp": xp, "dtype": dtype, "device": device, "generator": generator}
        ln = {k: v for k, v in kw.items() if k != "generator"}
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                batch_first, norm_first, bias)  # fmt: skip
        for what, custom in (("custom_encoder", custom_encoder),
                             ("custom_decoder", custom_decoder)):  # fmt: skip
            if custom is not None and not isinstance(custom, Module):
                raise TypeError(f"{name}: {what} must be a Module or None, got "
                                f"{type(custom).__name__}")  # fmt: skip
        if custom_encoder is None:
            layer = TransformerEncoderLayer(*args, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **ln)
            custom_encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is None:
            layer = TransformerDecoderLayer(*args, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **ln)
            custom_decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self.encoder, self.decoder = custom_encoder, custom_decoder
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():  # as torch's _reset_parameters
            if p.ndim > 1:
                init.xavier_uniform_(p, generator=generator)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):  # fmt: skip
        name = "Transformer"
        if src.ndim != tgt.ndim:
            raise ValueError(f"{name}: src and tgt must both be batched or both unbatched, "
                             f"got shapes {tuple(src.shape)} and {tuple(tgt.shape)}")  # fmt: skip
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise ValueError(f"{name}: the batch of src ({src.shape[batch]}) and tgt "
                             f"({tgt.shape[batch]}) must be equal")  # fmt: skip
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(f"{name}: the feature number of src and tgt must be "
                             f"d_model={self.d_model}, got {src.shape[-1]} and "
                             f"{tgt.shape[-1]}")  # fmt: skip
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)  # fmt: skip
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None, *, xp=None):
        """The (sz, sz) float causal mask: 0 on and below the diagonal, -inf above (as
        torch's), in namespace ``xp`` (default: the layers' default namespace)."""
        name = "generate_square_subsequent_mask"
        checks.integer(name, "sz", sz, low=0)
        xp, dtype, device = factory(xp, dtype, device, name)
        ones = xp.ones((sz, sz), dtype=xp.bool, device=device)
        zero = xp.zeros((sz, sz), dtype=dtype, device=device)
        return xp.where(xp.triu(ones, k=1), xp.full_like(zero, -float("inf")), zero)
