"""Recurrent layers: ``GRUCell``, ``GRU`` and ``LSTM`` (over a sequence) and ``LSTMCell`` with
torch's parameter names, layouts and initialization (every weight and bias from
U(-1/sqrt(hidden), 1/sqrt(hidden))), and ``GatedMemoryCell`` (see its docstring)."""

from __future__ import annotations

import math

from ... import checks
from ...backends import device_of
from .. import functional as F
from .. import init
from ..functional.dropout import _dropout
from .module import Module, factory, flags, sizes, uniform_parameter

__all__ = ["GRUCell", "GRU", "LSTMCell", "LSTM", "GatedMemoryCell"]


class _Cell(Module):
    gates = 1

    def __init__(self, input_size, hidden_size, bias, xp, dtype, device, generator):
        super().__init__()
        name = type(self).__name__
        sizes(name, ("hidden_size",), input_size=input_size, hidden_size=hidden_size)
        flags(name, bias=bias)
        xp, dtype, device = factory(xp, dtype, device, name, generator)
        self.input_size, self.hidden_size = input_size, hidden_size
        g, k = self.gates * hidden_size, 1.0 / math.sqrt(hidden_size)
        args = (dtype, device, generator)
        self.weight_ih = uniform_parameter(xp, (g, input_size), k, *args)
        self.weight_hh = uniform_parameter(xp, (g, hidden_size), k, *args)
        self.bias_ih = uniform_parameter(xp, (g,), k, *args) if bias else None
        self.bias_hh = uniform_parameter(xp, (g,), k, *args) if bias else None

    def _zeros(self, x):
        xp = self.weight_ih.__array_namespace__()
        shape = (self.hidden_size,) if x.ndim == 1 else (x.shape[0], self.hidden_size)
        return xp.zeros(shape, dtype=self.weight_ih.dtype, device=device_of(self.weight_ih))

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        return s if self.bias_ih is not None else s + ", bias=False"


class GRUCell(_Cell):
    """One GRU step: ``h_next = cell(x, h)`` (h defaults to zeros)."""

    gates = 3

    def __init__(self, input_size, hidden_size, bias=True, *, xp=None, dtype=None,
                 device=None, generator=None):  # fmt: skip
        super().__init__(input_size, hidden_size, bias, xp, dtype, device, generator)

    def forward(self, input, hx=None):
        hx = self._zeros(input) if hx is None else hx
        return F.gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class LSTMCell(_Cell):
    """One LSTM step: ``(h, c) = cell(x, (h, c))`` (the state defaults to zeros)."""

    gates = 4

    def __init__(self, input_size, hidden_size, bias=True, *, xp=None, dtype=None,
                 device=None, generator=None):  # fmt: skip
        super().__init__(input_size, hidden_size, bias, xp, dtype, device, generator)

    def forward(self, input, hx=None):
        if hx is None:
            hx = (self._zeros(input), self._zeros(input))
        return F.lstm_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih,
                           self.bias_hh)  # fmt: skip


class _RNNBase(Module):
    """What ``GRU`` and ``LSTM`` share: torch's constructor checks, parameter names
    (``weight_ih_l{k}[_reverse]``, ``weight_hh_l{k}...``, ``bias_ih_l{k}...``,
    ``bias_hh_l{k}...``, the LSTM's ``weight_hr_l{k}...``) in torch's order, and the
    handling of the input's layouts.

    ``dropout`` zeroes each layer's output but the last's in training mode only, with
    masks seeded from ``generator`` (or ``autodiff.nn.init``'s default generator, which
    ``manual_seed`` seeds), as ``nn.Dropout``; the masks are not torch's.
    """

    gates = 3

    def __init__(self, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                 bidirectional, proj_size, xp, dtype, device, generator):  # fmt: skip
        super().__init__()
        name = type(self).__name__
        sizes(name, ("hidden_size", "num_layers"), input_size=input_size,
              hidden_size=hidden_size, num_layers=num_layers, proj_size=proj_size)  # fmt: skip
        flags(name, bias=bias, batch_first=batch_first, bidirectional=bidirectional)
        checks.number(name, "dropout", dropout, 0.0, 1.0)
        if proj_size >= hidden_size:
            raise ValueError(
                f"{name}: proj_size must be smaller than hidden_size={hidden_size}, got {proj_size}"
            )
        xp, dtype, device = factory(xp, dtype, device, name, generator)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        self.generator = generator
        k = 1.0 / math.sqrt(hidden_size)
        args = (dtype, device, generator)
        g, out = self.gates * hidden_size, proj_size or hidden_size
        for layer in range(num_layers):
            n_in = input_size if layer == 0 else out * self._directions
            for sfx in self._suffixes:
                new = lambda what, shape: setattr(
                    self, f"{what}_l{layer}{sfx}", uniform_parameter(xp, shape, k, *args)
                )
                new("weight_ih", (g, n_in))
                new("weight_hh", (g, out))
                if bias:
                    new("bias_ih", (g,))
                    new("bias_hh", (g,))
                if proj_size:
                    new("weight_hr", (proj_size, hidden_size))

    @property
    def _directions(self):
        return 2 if self.bidirectional else 1

    @property
    def _suffixes(self):
        return ("", "_reverse") if self.bidirectional else ("",)

    def _layer(self, k, sfx=""):
        p = self._parameters
        return (p[f"weight_ih_l{k}{sfx}"], p[f"weight_hh_l{k}{sfx}"], p.get(f"bias_ih_l{k}{sfx}"),
                p.get(f"bias_hh_l{k}{sfx}"))  # fmt: skip

    def _sequence(self, input):
        """(x as (L, N, in), whether unbatched, the namespace)."""
        xp = self.weight_ih_l0.__array_namespace__()
        if input.ndim not in (2, 3) or input.shape[-1] != self.input_size:
            raise ValueError(
                f"{type(self).__name__}: expected input (L, N, {self.input_size}) or "
                f"(L, {self.input_size}), got shape {tuple(input.shape)}"
            )
        unbatched = input.ndim == 2
        x = xp.expand_dims(input, axis=1) if unbatched else input
        if self.batch_first and not unbatched:
            x = xp.permute_dims(x, (1, 0, 2))
        return x, unbatched, xp

    def _state(self, xp, h, n, size, unbatched, what):
        """An initial state (num_layers * directions, N, size): zeros, or ``h`` checked."""
        shape = (self.num_layers * self._directions, n, size)
        w = self.weight_ih_l0
        if h is None:
            return xp.zeros(shape, dtype=w.dtype, device=device_of(w))
        if unbatched:
            if h.ndim != 2:
                raise ValueError(
                    f"{type(self).__name__}: {what} must have shape {(shape[0], size)} for an "
                    f"unbatched input, got {tuple(h.shape)}"
                )
            h = xp.expand_dims(h, axis=1)
        if tuple(h.shape) != shape:
            raise ValueError(
                f"{type(self).__name__}: {what} must have shape {shape}, got {tuple(h.shape)}"
            )
        return h

    def _between_layers(self, x, k):
        """Dropout on layer ``k``'s output (training mode, not after the last layer)."""
        if not self.training or self.dropout == 0.0 or k == self.num_layers - 1:
            return x
        return _dropout(x, self.dropout, init.next_seed(self))

    def _output(self, xp, output, unbatched):
        if unbatched:
            return output[:, 0, :]
        return xp.permute_dims(output, (1, 0, 2)) if self.batch_first else output

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        return s


class GRU(_RNNBase):
    """A GRU over a sequence, as ``torch.nn.GRU``: ``output, h_n = gru(x, h_0)``.

    ``x`` is (L, N, input_size), (N, L, input_size) when ``batch_first``, or
    unbatched (L, input_size); ``h_0`` (num_layers * D, N, hidden), default zeros, with
    D = 2 when ``bidirectional`` (else 1). ``output`` (L, N, D * hidden) holds the last
    layer's state at every step (forward and reverse concatenated on the feature axis);
    ``h_n`` (num_layers * D, N, hidden) every layer's and direction's last.
    Parameters are ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
    ``bias_hh_l{k}`` (and ``..._reverse``); each direction of a layer is one
    ``F.gru_sequence`` op. ``dropout``: see ``_RNNBase``.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, *, xp=None, dtype=None, device=None,
                 generator=None):  # fmt: skip
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, xp, dtype, device, generator)  # fmt: skip

    def forward(self, input, hx=None):
        x, unbatched, xp = self._sequence(input)
        hx = self._state(xp, hx, x.shape[1], self.hidden_size, unbatched, "h_0")
        hs, last = xp.unstack(hx, axis=0), []
        for k in range(self.num_layers):
            outs = []
            for d, sfx in enumerate(self._suffixes):
                h0 = hs[k * self._directions + d]
                if d == 0:
                    y = F.gru_sequence(x, h0, *self._layer(k))  # one op per layer
                    last.append(y[-1, ...])
                else:
                    y = F.gru_sequence(xp.flip(x, axis=0), h0, *self._layer(k, sfx))
                    last.append(y[-1, ...])
                    y = xp.flip(y, axis=0)
                outs.append(y)
            x = outs[0] if len(outs) == 1 else xp.concat(outs, axis=-1)
            x = self._between_layers(x, k)
        h_n = xp.stack(last, axis=0)
        return self._output(xp, x, unbatched), (h_n[:, 0, :] if unbatched else h_n)


class LSTM(_RNNBase):
    """An LSTM over a sequence, as ``torch.nn.LSTM``: ``output, (h_n, c_n) = lstm(x, hx)``.

    ``x`` is (L, N, input_size), (N, L, input_size) when ``batch_first``, or unbatched
    (L, input_size); ``hx = (h_0, c_0)`` of shapes (num_layers * D, N, H_out) and
    (num_layers * D, N, hidden), default zeros, with D = 2 when ``bidirectional`` and
    H_out = ``proj_size`` or ``hidden_size``. ``output`` (L, N, D * H_out): the last
    layer's h at every step (directions concatenated on the feature axis); ``h_n``,
    ``c_n`` every layer's and direction's last. With ``proj_size`` > 0, h is projected
    by ``weight_hr_l{k}`` (proj_size, hidden) after every step, as torch. Each step is one
    ``F.lstm_cell`` op (or, with a projection, a few ops of the namespace). ``dropout``:
    see ``_RNNBase``.
    """

    gates = 4

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, *, xp=None, dtype=None,
                 device=None, generator=None):  # fmt: skip
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, xp, dtype, device, generator)  # fmt: skip

    def _run(self, xp, xs, h, c, k, sfx, reverse):
        """One direction of layer ``k`` over the steps ``xs``: (outputs (L, N, H_out), h, c)."""
        w_ih, w_hh, b_ih, b_hh = self._layer(k, sfx)
        w_hr = self._parameters.get(f"weight_hr_l{k}{sfx}")
        H = self.hidden_size
        outs = [None] * len(xs)
        for t in reversed(range(len(xs))) if reverse else range(len(xs)):
            if w_hr is None:
                h, c = F.lstm_cell(xs[t], (h, c), w_ih, w_hh, b_ih, b_hh)
            else:
                pre = F.linear(xs[t], w_ih, b_ih) + F.linear(h, w_hh, b_hh)
                i, f = F.sigmoid(pre[:, :H]), F.sigmoid(pre[:, H : 2 * H])
                g, o = xp.tanh(pre[:, 2 * H : 3 * H]), F.sigmoid(pre[:, 3 * H :])
                c = f * c + i * g
                h = F.linear(o * xp.tanh(c), w_hr)
            outs[t] = h
        return xp.stack(outs, axis=0), h, c

    def forward(self, input, hx=None):
        x, unbatched, xp = self._sequence(input)
        n = x.shape[1]
        if hx is None:
            h0 = c0 = None
        elif not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"LSTM: hx must be a pair (h_0, c_0), got {type(hx).__name__}")
        else:
            h0, c0 = hx
        h0 = self._state(xp, h0, n, self.proj_size or self.hidden_size, unbatched, "h_0")
        c0 = self._state(xp, c0, n, self.hidden_size, unbatched, "c_0")
        hs, cs = xp.unstack(h0, axis=0), xp.unstack(c0, axis=0)
        h_last, c_last = [], []
        for k in range(self.num_layers):
            xs, outs = xp.unstack(x, axis=0), []
            for d, sfx in enumerate(self._suffixes):
                j = k * self._directions + d
                y, h, c = self._run(xp, xs, hs[j], cs[j], k, sfx, reverse=d == 1)
                outs.append(y)
                h_last.append(h)
                c_last.append(c)
            x = outs[0] if len(outs) == 1 else xp.concat(outs, axis=-1)
            x = self._between_layers(x, k)
        h_n, c_n = xp.stack(h_last, axis=0), xp.stack(c_last, axis=0)
        if unbatched:
            h_n, c_n = h_n[:, 0, :], c_n[:, 0, :]
        return self._output(xp, x, unbatched), (h_n, c_n)


class GatedMemoryCell(Module):
    """m_next = (1 - z) m + z c, z = sigmoid([m, x] W_z + b_z), c = tanh([m, x] W_c + b_c).

    ``W_z``, ``W_c`` are (memory + input, memory), drawn from U(-1/sqrt(memory + input),
    1/sqrt(memory + input)); biases zero. A convex update: the memory stays in [-1, 1]
    once it starts there, so a free rollout stays bounded with no clamp.
    """

    def __init__(self, memory_size, input_size, bias=True, *, xp=None, dtype=None,
                 device=None, generator=None):  # fmt: skip
        super().__init__()
        name = type(self).__name__
        sizes(name, ("memory_size",), memory_size=memory_size, input_size=input_size)
        flags(name, bias=bias)
        xp, dtype, device = factory(xp, dtype, device, name, generator)
        self.memory_size, self.input_size = memory_size, input_size
        k = 1.0 / math.sqrt(memory_size + input_size)
        shape = (memory_size + input_size, memory_size)
        self.w_z = uniform_parameter(xp, shape, k, dtype, device, generator)
        self.w_c = uniform_parameter(xp, shape, k, dtype, device, generator)
        zeros = lambda: xp.zeros((memory_size,), dtype=dtype, device=device, requires_grad=True)
        self.b_z = zeros() if bias else None
        self.b_c = zeros() if bias else None

    def forward(self, input, memory=None):
        if memory is None:
            xp = self.w_z.__array_namespace__()
            shape = input.shape[:-1] + (self.memory_size,)
            memory = xp.zeros(shape, dtype=self.w_z.dtype, device=device_of(self.w_z))
        return F.gated_memory_cell(memory, input, self.w_z, self.w_c, self.b_z, self.b_c)

    def extra_repr(self):
        return f"memory_size={self.memory_size}, input_size={self.input_size}"
