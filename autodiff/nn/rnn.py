"""Recurrent layers: ``GRUCell``, ``GRU`` (over a sequence) and ``LSTMCell`` with
torch's parameter names, layouts and initialization (every weight and bias from
U(-1/sqrt(hidden), 1/sqrt(hidden))), and ``GatedMemoryCell`` (see its docstring)."""

from __future__ import annotations

import math

from . import functional as F
from .layers import factory, flags, sizes, uniform_parameter
from .module import Module

__all__ = ["GRUCell", "GRU", "LSTMCell", "GatedMemoryCell"]


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
        return xp.zeros(shape, dtype=self.weight_ih.dtype, device=self.weight_ih.device)

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


class GRU(Module):
    """A GRU over a sequence, as ``torch.nn.GRU``: ``output, h_n = gru(x, h_0)``.

    ``x`` is (L, N, input_size), (N, L, input_size) when ``batch_first``, or
    unbatched (L, input_size); ``h_0`` (num_layers, N, hidden), default zeros.
    ``output`` holds the last layer's state at every step; ``h_n`` every layer's last.
    Parameters are ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 *, xp=None, dtype=None, device=None, generator=None):  # fmt: skip
        super().__init__()
        name = type(self).__name__
        sizes(name, ("hidden_size", "num_layers"), input_size=input_size,
              hidden_size=hidden_size, num_layers=num_layers)  # fmt: skip
        flags(name, bias=bias, batch_first=batch_first)
        xp, dtype, device = factory(xp, dtype, device, name, generator)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, batch_first
        k = 1.0 / math.sqrt(hidden_size)
        args = (dtype, device, generator)
        for layer in range(num_layers):
            n_in = input_size if layer == 0 else hidden_size
            g = 3 * hidden_size
            setattr(self, f"weight_ih_l{layer}", uniform_parameter(xp, (g, n_in), k, *args))
            setattr(self, f"weight_hh_l{layer}", uniform_parameter(xp, (g, hidden_size), k, *args))
            if bias:
                setattr(self, f"bias_ih_l{layer}", uniform_parameter(xp, (g,), k, *args))
                setattr(self, f"bias_hh_l{layer}", uniform_parameter(xp, (g,), k, *args))

    def _layer(self, k):
        p = self._parameters
        return (p[f"weight_ih_l{k}"], p[f"weight_hh_l{k}"], p.get(f"bias_ih_l{k}"),
                p.get(f"bias_hh_l{k}"))  # fmt: skip

    def forward(self, input, hx=None):
        w0 = self.weight_ih_l0
        xp = w0.__array_namespace__()
        if input.ndim not in (2, 3) or input.shape[-1] != self.input_size:
            raise ValueError(
                f"GRU: expected input (L, N, {self.input_size}) or (L, {self.input_size}), "
                f"got shape {tuple(input.shape)}"
            )
        unbatched = input.ndim == 2
        x = xp.expand_dims(input, axis=1) if unbatched else input
        if self.batch_first and not unbatched:
            x = xp.permute_dims(x, (1, 0, 2))
        n = x.shape[1]
        if hx is None:
            hx = xp.zeros((self.num_layers, n, self.hidden_size), dtype=w0.dtype,
                          device=w0.device)  # fmt: skip
        elif unbatched:
            hx = xp.expand_dims(hx, axis=1)
        if tuple(hx.shape) != (self.num_layers, n, self.hidden_size):
            raise ValueError(
                f"GRU: h_0 must have shape {(self.num_layers, n, self.hidden_size)}, "
                f"got {tuple(hx.shape)}"
            )
        last = []
        for k, h in enumerate(xp.unstack(hx, axis=0)):
            x = F.gru_sequence(x, h, *self._layer(k))  # one op per layer
            last.append(x[-1, ...])
        output, h_n = x, xp.stack(last, axis=0)
        if unbatched:
            return output[:, 0, :], h_n[:, 0, :]
        if self.batch_first:
            output = xp.permute_dims(output, (1, 0, 2))
        return output, h_n

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        return s


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
            memory = xp.zeros(shape, dtype=self.w_z.dtype, device=self.w_z.device)
        return F.gated_memory_cell(memory, input, self.w_z, self.w_c, self.b_z, self.b_c)

    def extra_repr(self):
        return f"memory_size={self.memory_size}, input_size={self.input_size}"
