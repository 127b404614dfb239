"""Recurrent cells (one time step each): GRU and LSTM with PyTorch's formulas,
weight layouts and gate orders, and the gated memory cell of DESIGN.md.
Each is one registered op whose fused rule recomputes the gates from the saved
inputs (nothing but the inputs is kept between forward and backward)."""

from __future__ import annotations

from ...backends import device_of
from ...engine.namespace import recorder_of
from ...engine.node import Outer
from ...engine.registry import defop
from ...rules.batch_rules import fold, unfold
from .activations import _sigmoid
from .linear import _linear as _affine  # a @ w^T (+ b), torch's (out, in) layout

__all__ = ["gru_cell", "gru_sequence", "lstm_cell", "gated_memory_cell"]

CH = "nn.recurrent"


def _batched(xp, *arrays):
    """Promote 1-D (unbatched) inputs to one-row batches."""
    return [a if a is None or a.ndim != 1 else xp.expand_dims(a, axis=0) for a in arrays]


def _weight_grad(xp, d, a):
    """The gradient of W in a @ W^T: d^T @ a, summed over the batch. For 2-D factors it
    is handed over as them (an Outer): a cell looped over T steps then gets one matmul
    over all the steps at the end of the backward pass."""
    if d.ndim != 2 or a.ndim != 2 or d.dtype != a.dtype:
        return xp.matrix_transpose(d) @ a
    return Outer(d, a)


def _bias_grad(d, b):
    """The gradient of a bias b added to d's pre-activations: d itself, summed back to
    b's shape by the backward pass; for a 1-D b and 2-D d, handed over as an Outer (its
    column sums, formed with the other steps' at the end, as a weight's)."""
    if b is None:
        return None
    if d.ndim != 2 or b.ndim != 1:
        return d
    return Outer(d)


# -- GRU -------------------------------------------------------------------------------
# A step is computed feature-major: the projections as w @ a^T, (3H, N), each gate a
# block of rows. On a small batch OpenBLAS's GEMM is ~1.6x faster in that orientation
# than a @ w^T (and so is w^T @ d in the rule), and a gate's rows are contiguous. The
# state handed back is h_next^T transposed (a view), which the next step's w @ h^T and
# the rule's g^T read as C-ordered arrays again.
def _proj_t(xp, w, a, b):
    """(a @ w^T + b)^T, computed as w @ a^T (+ b as a column): (out, N)."""
    y = w @ xp.matrix_transpose(a)
    if b is None:
        return y
    b = xp.reshape(b, (-1, 1))
    if b.dtype == y.dtype:
        y += b  # y is ours alone (and not a view)
        return y
    return y + b


def _gates_from(xp, gi, gh):
    """The gates (r, z, n, W_hn h + b_hn), each (H, N), from the projections (3H, N)."""
    H = gh.shape[0] // 3
    rz = _sigmoid(xp, gi[: 2 * H, ...] + gh[: 2 * H, ...])  # r and z in one pass
    r, z = rz[:H, ...], rz[H:, ...]
    # a copy: a view would keep all of gh alive until the backward pass
    hn = xp.asarray(gh[2 * H :, ...], copy=True)
    n = r * hn
    n += gi[2 * H :, ...]  # n is ours alone
    return r, z, xp.tanh(n), hn


def _gate_grads(xp, dh, gates, h):
    """d(pre-activations) of the input and hidden projections, from dL/dh_next; every
    array feature-major, (H, N)."""
    r, z, n, hn = gates
    dpre_n = dh * (1 - z)
    dpre_n *= 1 - n * n  # these products are ours alone: in place, no temporaries
    dpre_r = dpre_n * hn
    dpre_r *= r * (1 - r)
    dpre_z = h - n
    dpre_z *= dh
    dpre_z *= z * (1 - z)
    return dpre_r, dpre_z, dpre_n, dpre_n * r


def _next_state(xp, h, z, n):
    """h' = n + z (h - n), feature-major (H, N), from h (N, H)."""
    nxt = xp.matrix_transpose(h) - n
    nxt *= z  # nxt is ours alone
    nxt += n
    return nxt


def _gru_gates(xp, x, h, w_ih, w_hh, b_ih, b_hh):
    return _gates_from(xp, _proj_t(xp, w_ih, x, b_ih), _proj_t(xp, w_hh, h, b_hh))


def _gru(xp, x, h, w_ih, w_hh, b_ih, b_hh):
    """h_next and, as the residual for the rule, the gates (r, z, n, W_hn h + b_hn)."""
    if x.ndim == 1:
        out, gates = _gru(xp, *_batched(xp, x, h), w_ih, w_hh, b_ih, b_hh)
        return out[0, ...], gates
    gates = _gru_gates(xp, x, h, w_ih, w_hh, b_ih, b_hh)
    return xp.matrix_transpose(_next_state(xp, h, gates[1], gates[2])), gates


def _gru_rule(xp, g, gates, x, h, w_ih, w_hh, b_ih, b_hh, *, needs=(True,) * 6):
    unbatched = x.ndim == 1
    if unbatched:
        x, h, g = _batched(xp, x, h, g)
    g_t, h_t = xp.matrix_transpose(g), xp.matrix_transpose(h)
    dpre_r, dpre_z, dpre_n, dpre_hn = _gate_grads(xp, g_t, gates, h_t)
    dgi = xp.concat([dpre_r, dpre_z, dpre_n], axis=0)  # (3H, N)
    dgh = xp.concat([dpre_r, dpre_z, dpre_hn], axis=0)
    dx = dh = None
    if needs[0]:
        dx = xp.matrix_transpose(xp.matrix_transpose(w_ih) @ dgi)
    if needs[1]:
        dh = xp.matrix_transpose(w_hh) @ dgh
        dh += g_t * gates[1]  # dh is ours alone
        dh = xp.matrix_transpose(dh)
    dgi, dgh = xp.matrix_transpose(dgi), xp.matrix_transpose(dgh)  # (N, 3H)
    grads = [dx, dh, _weight_grad(xp, dgi, x) if needs[2] else None,
             _weight_grad(xp, dgh, h) if needs[3] else None,
             _bias_grad(dgi, b_ih) if needs[4] else None,
             _bias_grad(dgh, b_hh) if needs[5] else None]  # fmt: skip
    if unbatched:
        grads[0] = None if dx is None else dx[0, ...]
        grads[1] = None if dh is None else dh[0, ...]
    return grads


# -- batching: the batch folded into N, or the cell's formula op by op ------------------
def _cell_batch(c, args, states, formula):
    """A recurrent cell (its first ``states`` arguments are the input and the states,
    the rest its weights): the batch folded into the cell's own batch axis N (a 1-D
    input of one example is a row of N = n) when the examples share the weights;
    per-example weights (``vmap(grad)`` of a cell): the cell's ``formula``, op by op."""
    if any(c.bd[states:]):
        return c.composite(formula, *args)
    head = [c.lift(a, b) for a, b in zip(args[:states], c.bd)]
    two = any(a is not None and a.ndim == 3 for a in head)
    folded = [None if a is None else (fold(c, a) if two else a) for a in head]
    out = c.f(*folded, *args[states:])
    if not two:
        return out
    if isinstance(out, (tuple, list)):
        return type(out)(unfold(c, o) for o in out)
    return unfold(c, out)


def _project(xp, a, w, b):
    """a @ w^T (+ b), out of place: in a formula any of a, w, b may be batched or not,
    so nothing may be written into another's result."""
    y = a @ xp.matrix_transpose(w)
    return y if b is None else y + b


def _gru_formula(x, h, w_ih, w_hh, b_ih, b_hh):
    """One GRU step, torch's formula, with the namespace's functions."""
    xp = x.__array_namespace__()
    gi = xp.unstack(xp.reshape(_project(xp, x, w_ih, b_ih), x.shape[:-1] + (3, -1)), axis=-2)
    gh = xp.unstack(xp.reshape(_project(xp, h, w_hh, b_hh), h.shape[:-1] + (3, -1)), axis=-2)
    r = _sigmoid(xp, gi[0] + gh[0])
    z = _sigmoid(xp, gi[1] + gh[1])
    n = xp.tanh(gi[2] + r * gh[2])
    return (1 - z) * n + z * h


def _gru_cell_batch(c, *args):
    return _cell_batch(c, args, 2, _gru_formula)


defop(
    "nn.gru_cell",
    vjp=_gru_rule,
    needs=True,
    residuals=lambda xp, *a: _gru_gates(xp, *_batched(xp, *a[:2]), *a[2:]),
    chapter=CH,
    impl=lambda B: lambda *a: _gru(B, *a),
    batch=_gru_cell_batch,
    doc="one GRU step: torch's formula, b_hn inside r * (W_hn h + b_hn)",
)


def _check_cell(name, x, h, w_ih, w_hh, b_ih, b_hh, gates):
    hidden = h.shape[-1]
    n_in = x.shape[-1]
    for label, arr, shape in (
        ("w_ih", w_ih, (gates * hidden, n_in)), ("w_hh", w_hh, (gates * hidden, hidden)),
        ("b_ih", b_ih, (gates * hidden,)), ("b_hh", b_hh, (gates * hidden,)),
    ):  # fmt: skip
        if arr is not None and tuple(arr.shape) != shape:
            raise ValueError(f"{name}: {label} has shape {tuple(arr.shape)}, expected {shape}")
    if x.ndim not in (1, 2) or h.ndim != x.ndim or (x.ndim == 2 and x.shape[0] != h.shape[0]):
        raise ValueError(
            f"{name}: input {tuple(x.shape)} and hidden state {tuple(h.shape)} must be "
            "(N, in) and (N, hidden), or unbatched (in,) and (hidden,)"
        )


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step (torch's formula): r, z, n gates from weights (3H, in) and (3H, H)."""
    recorder_of(input, hx, w_ih, w_hh, b_ih, b_hh)  # a non-array named first
    _check_cell("gru_cell", input, hx, w_ih, w_hh, b_ih, b_hh, 3)
    return recorder_of(input, hx, w_ih).xp.nn.gru_cell(input, hx, w_ih, w_hh, b_ih, b_hh)


# -- GRU over a whole sequence ----------------------------------------------------------
def _gru_seq(xp, x, h0, w_ih, w_hh, b_ih, b_hh):
    """Every step's state (T, N, H) and, as the residual, each step's gates.

    The input projection of all T steps is one matmul (inputs don't depend on the state);
    each step is feature-major, as ``gru_cell``'s."""
    gi = _affine(xp, x, w_ih, b_ih)  # (T, N, 3H), as one (T*N, in) matmul
    h, states, gates = h0, [], []
    for t in range(x.shape[0]):
        r, z, nt, hn = step = _gates_from(
            xp, xp.matrix_transpose(gi[t, ...]), _proj_t(xp, w_hh, h, b_hh)
        )
        h = xp.matrix_transpose(_next_state(xp, h, z, nt))
        states.append(h)
        gates.append(step)
    out = xp.stack(states, axis=0)
    return out, (out, gates)


def _gru_seq_rule(xp, g, res, x, h0, w_ih, w_hh, b_ih, b_hh, *, needs=(True,) * 6):
    """Backpropagation through time; the weight gradients from all steps' stacked gate
    gradients in one matmul each."""
    out, gates = res
    t_len, n, H = out.shape
    dh = None
    # the gate gradients of every step, written in place where the library can
    dgi = xp.zeros((t_len, n, 3 * H), dtype=g.dtype, device=device_of(g))
    dgh = xp.zeros((t_len, n, 3 * H), dtype=g.dtype, device=device_of(g))
    for t in reversed(range(t_len)):
        dh = g[t, ...] if dh is None else dh + g[t, ...]
        prev = h0 if t == 0 else out[t - 1, ...]
        tr = xp.matrix_transpose
        dpre_r, dpre_z, dpre_n, dpre_hn = _gate_grads(xp, tr(dh), gates[t], tr(prev))
        dgi = xp.set_(dgi, (t, slice(None), slice(None, H)), tr(dpre_r))
        dgi = xp.set_(dgi, (t, slice(None), slice(H, 2 * H)), tr(dpre_z))
        dgi = xp.set_(dgi, (t, slice(None), slice(2 * H, None)), tr(dpre_n))
        dgh = xp.set_(dgh, (t, slice(None), slice(None, 2 * H)), dgi[t, :, : 2 * H])
        dgh = xp.set_(dgh, (t, slice(None), slice(2 * H, None)), tr(dpre_hn))
        dh = dgh[t, ...] @ w_hh + dh * tr(gates[t][1])
    dgi = xp.reshape(dgi, (t_len * n, 3 * H))
    dgh = xp.reshape(dgh, (t_len * n, 3 * H))
    x2 = xp.reshape(x, (t_len * n, x.shape[-1]))
    prevs = xp.reshape(xp.concat([xp.expand_dims(h0, axis=0), out[:-1, ...]], axis=0),
                       (t_len * n, H))  # fmt: skip
    return (
        xp.reshape(dgi @ w_ih, x.shape) if needs[0] else None,
        dh if needs[1] else None,
        xp.matrix_transpose(dgi) @ x2 if needs[2] else None,  # all steps already
        xp.matrix_transpose(dgh) @ prevs if needs[3] else None,
        None if b_ih is None or not needs[4] else xp.sum(dgi, axis=0),
        None if b_hh is None or not needs[5] else xp.sum(dgh, axis=0),
    )


def _gru_steps(x, h, *weights):
    """Every step's state (T, ...), ``gru_cell``'s formula step by step."""
    xp = x.__array_namespace__()
    states = []
    for t in range(x.shape[0]):
        h = _gru_formula(x[t, ...], h, *weights)
        states.append(h)
    return xp.stack(states, axis=0)


def _gru_sequence_batch(c, x, h0, *weights):
    """x (T, N, in) of each example: the batch folded into N, behind T; per-example
    weights: the formula step by step."""
    if any(c.bd[2:]):
        return c.composite(_gru_steps, x, h0, *weights)
    xp, n = c.xp, c.n
    x, h0 = c.lift(x, c.bd[0]), c.lift(h0, c.bd[1])
    t, big_n = x.shape[1], x.shape[2]
    xs = xp.reshape(xp.moveaxis(x, 0, 1), (t, n * big_n) + tuple(x.shape[3:]))
    out = c.f(xs, fold(c, h0), *weights)
    out = xp.reshape(out, (t, n, big_n) + tuple(out.shape[2:]))
    return xp.moveaxis(out, 1, 0)


defop(
    "nn.gru_sequence",
    vjp=_gru_seq_rule,
    needs=True,
    residuals=lambda xp, *a: _gru_seq(xp, *a)[1],
    chapter=CH,
    impl=lambda B: lambda *a: _gru_seq(B, *a),
    batch=_gru_sequence_batch,
    doc="a GRU over a sequence (T, N, in): every step's state (T, N, H)",
)


def gru_sequence(input, h0, w_ih, w_hh, b_ih=None, b_hh=None):
    """A GRU layer over a whole sequence: ``input`` (T, N, in), ``h0`` (N, H); returns
    every step's state, (T, N, H), as repeated ``gru_cell`` would, in one op (one
    matmul for the inputs of all steps, one per weight gradient)."""
    recorder_of(input, h0, w_ih, w_hh, b_ih, b_hh)  # a non-array named first
    if input.ndim != 3 or h0.ndim != 2:
        raise ValueError(
            f"gru_sequence: input must be (T, N, in) and h0 (N, H), got "
            f"{tuple(input.shape)} and {tuple(h0.shape)}"
        )
    _check_cell("gru_sequence", input[0, ...], h0, w_ih, w_hh, b_ih, b_hh, 3)
    return recorder_of(input, h0, w_ih).xp.nn.gru_sequence(input, h0, w_ih, w_hh, b_ih, b_hh)


# -- LSTM ------------------------------------------------------------------------------
def _lstm_gates(xp, x, h, w_ih, w_hh, b_ih, b_hh):
    """The gates i, f, g, o, each feature-major (H, N), as the GRU's."""
    pre = _proj_t(xp, w_ih, x, b_ih)
    pre += _proj_t(xp, w_hh, h, b_hh)  # pre is ours alone
    H = pre.shape[0] // 4
    i_f = _sigmoid(xp, pre[: 2 * H, ...])
    g, o = xp.tanh(pre[2 * H : 3 * H, ...]), _sigmoid(xp, pre[3 * H :, ...])
    return i_f[:H, ...], i_f[H:, ...], g, o


def _lstm(xp, x, h, c, w_ih, w_hh, b_ih, b_hh):
    if x.ndim == 1:
        h, c = _lstm(xp, *_batched(xp, x, h, c), w_ih, w_hh, b_ih, b_hh)
        return h[0, ...], c[0, ...]
    tr = xp.matrix_transpose
    i, f, g, o = _lstm_gates(xp, x, h, w_ih, w_hh, b_ih, b_hh)
    c_next = f * tr(c)
    c_next += i * g  # ours alone
    return tr(o * xp.tanh(c_next)), tr(c_next)


def _lstm_rule(xp, gs, ans, x, h, c, w_ih, w_hh, b_ih, b_hh, *, needs=(True,) * 7):
    unbatched = x.ndim == 1
    tr = xp.matrix_transpose
    x, h, c, gh, gc = _batched(xp, x, h, c, *gs)
    i, f, g, o = _lstm_gates(xp, x, h, w_ih, w_hh, b_ih, b_hh)
    c, gh, gc = tr(c), tr(gh), tr(gc)  # feature-major (H, N)
    tc = xp.tanh(f * c + i * g)
    dc_next = gh * o * (1 - tc * tc)
    dc_next += gc
    dpre = xp.concat(
        [dc_next * g * i * (1 - i), dc_next * c * f * (1 - f), dc_next * i * (1 - g * g),
         gh * tc * o * (1 - o)], axis=0,
    )  # fmt: skip
    dx = tr(tr(w_ih) @ dpre) if needs[0] else None
    dh = tr(tr(w_hh) @ dpre) if needs[1] else None
    dc = tr(dc_next * f)
    if unbatched:
        dx, dh, dc = (None if a is None else a[0, ...] for a in (dx, dh, dc))
    dpre = tr(dpre)  # (N, 4H)
    return (dx, dh, dc, _weight_grad(xp, dpre, x) if needs[3] else None,
            _weight_grad(xp, dpre, h) if needs[4] else None,
            _bias_grad(dpre, b_ih), _bias_grad(dpre, b_hh))  # fmt: skip


def _lstm_formula(x, h, cs, w_ih, w_hh, b_ih, b_hh):
    """One LSTM step (gates i, f, g, o), torch's formula, with the namespace's functions."""
    xp = x.__array_namespace__()
    g = _project(xp, x, w_ih, b_ih) + _project(xp, h, w_hh, b_hh)
    i, f, gg, o = xp.unstack(xp.reshape(g, g.shape[:-1] + (4, -1)), axis=-2)
    c2 = _sigmoid(xp, f) * cs + _sigmoid(xp, i) * xp.tanh(gg)
    return _sigmoid(xp, o) * xp.tanh(c2), c2


def _lstm_cell_batch(c, *args):
    return _cell_batch(c, args, 3, _lstm_formula)


defop(
    "nn.lstm_cell",
    vjp=_lstm_rule,
    needs=True,
    chapter=CH,
    impl=lambda B: lambda *a: _lstm(B, *a),
    batch=_lstm_cell_batch,
    doc="one LSTM step: gates i, f, g, o (torch's order); returns (h_next, c_next)",
)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step (torch's formula): ``hx = (h, c)``, weights (4H, in) and (4H, H);
    returns ``(h_next, c_next)``."""
    if not isinstance(hx, (tuple, list)):
        raise TypeError(f"lstm_cell: hx must be a pair (h, c), got {type(hx).__name__}")
    if len(hx) != 2:
        raise ValueError(f"lstm_cell: hx must be a pair (h, c), got {len(hx)} arrays")
    h, c = hx
    recorder_of(input, h, c, w_ih, w_hh, b_ih, b_hh)  # a non-array named first
    _check_cell("lstm_cell", input, h, w_ih, w_hh, b_ih, b_hh, 4)
    if tuple(c.shape) != tuple(h.shape):
        raise ValueError(f"lstm_cell: cell state {tuple(c.shape)} != hidden state {tuple(h.shape)}")
    return recorder_of(input, h, w_ih).xp.nn.lstm_cell(input, h, c, w_ih, w_hh, b_ih, b_hh)


# -- gated memory cell -----------------------------------------------------------------
def _gmc_parts(xp, m, x, w_z, w_c, b_z, b_c):
    u = xp.concat([m, x], axis=-1)
    pz, pc = u @ w_z, u @ w_c
    z = _sigmoid(xp, pz if b_z is None else pz + b_z)
    c = xp.tanh(pc if b_c is None else pc + b_c)
    return u, z, c


def _gmc(xp, m, x, w_z, w_c, b_z, b_c):
    _, z, c = _gmc_parts(xp, m, x, w_z, w_c, b_z, b_c)
    return (1 - z) * m + z * c


def _gmc_rule(xp, g, ans, m, x, w_z, w_c, b_z, b_c):
    u, z, c = _gmc_parts(xp, m, x, w_z, w_c, b_z, b_c)
    dpz = g * (c - m) * z * (1 - z)
    dpc = g * z * (1 - c * c)
    du = dpz @ xp.matrix_transpose(w_z) + dpc @ xp.matrix_transpose(w_c)
    k = m.shape[-1]
    if u.ndim > 1:
        wz, wc = _weight_grad(xp, u, dpz), _weight_grad(xp, u, dpc)
    else:
        ut = xp.expand_dims(u, axis=-1)
        wz, wc = ut @ xp.expand_dims(dpz, axis=0), ut @ xp.expand_dims(dpc, axis=0)
    return (du[..., :k] + g * (1 - z), du[..., k:], wz, wc,
            _bias_grad(dpz, b_z), _bias_grad(dpc, b_c))  # fmt: skip


def _gmc_formula(m, *args):
    """The cell's forward, as vmap's formula: it writes only into arrays it made (batched
    as what they were made from), so any argument may be batched or not."""
    return _gmc(m.__array_namespace__(), m, *args)


def _gated_memory_cell_batch(c, *args):
    return _cell_batch(c, args, 2, _gmc_formula)


defop(
    "nn.gated_memory_cell",
    vjp=_gmc_rule,
    chapter=CH,
    impl=lambda B: lambda *a: _gmc(B, *a),
    batch=_gated_memory_cell_batch,
    doc="m_next = (1 - z) m + z c with z = sigmoid(u W_z + b_z), c = tanh(u W_c + b_c)",
)


def gated_memory_cell(m, x, w_z, w_c, b_z=None, b_c=None):
    """One step of the gated memory cell: u = concat([m, x]); z = sigmoid(u @ w_z + b_z);
    c = tanh(u @ w_c + b_c); m_next = (1 - z) * m + z * c. A convex update: |m| <= 1
    stays so, whatever the weights."""
    recorder_of(m, x, w_z, w_c, b_z, b_c)  # a non-array named first
    k = m.shape[-1] + x.shape[-1]
    for label, w in (("w_z", w_z), ("w_c", w_c)):
        if tuple(w.shape) != (k, m.shape[-1]):
            raise ValueError(
                f"gated_memory_cell: {label} has shape {tuple(w.shape)}, expected "
                f"{(k, m.shape[-1])} (M + X, M)"
            )
    return recorder_of(m, x, w_z).xp.nn.gated_memory_cell(m, x, w_z, w_c, b_z, b_c)
