"""2-D convolution and transposed convolution (NCHW, torch's weight layouts), the
window kernels they (and pooling) are written with, and the 1-D forms (NCL).

A convolution is windows (im2col) then one batched matmul per group; its rule
is the transposed matmuls and ``col2im2d`` (the windows' adjoint). The kernels
``pad2d``, ``windows2d`` and ``col2im2d`` come from ``backends/`` (strided views
on NumPy, strided slices elsewhere) and are registered ops themselves, so the
rules are differentiated again under ``create_graph``.

A 1-D convolution or pooling is a thin composition over its 2-D op: the input
(N, C, L) is viewed as (N, C, 1, L) and the kernel (O, C/groups, k) as
(O, C/groups, 1, k), so the fused 2-D rules (first and second order, batching) are
reused; no 1-D op is registered. An unbatched input (C, L) is accepted, as torch does.
"""

from __future__ import annotations

from ... import checks
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...rules.batch_rules import fold, leading, unfold

__all__ = ["conv2d", "conv_transpose2d", "conv1d", "conv_transpose1d"]

CH = "nn.conv"


# -- kernels as differentiable ops ------------------------------------------------------
def _crop(xp, g, pads, size):
    top, _, left, _ = pads
    return g[..., top : top + size[0], left : left + size[1]]


defop(
    "pad2d",
    lambda xp, g, ans, x, *, pads, value=0.0: _crop(xp, g, pads, x.shape[-2:]),
    chapter="kernels",
    impl=lambda B: lambda x, *, pads, value=0.0: B.pad2d(x, pads, value),
    saves=(),
    # affine: the tangent is padded with zeros, whatever the constant
    jvp=lambda xp, ts, ans, x, *, pads, value=0.0: xp.pad2d(ts[0], pads=pads, value=0.0),
    batch=leading,  # the kernels act on the trailing axes
    doc="pad the last two axes (top, bottom, left, right) with a constant",
)
defop(
    "windows2d",
    lambda xp, g, ans, x, *, kernel, stride, dilation, out: xp.col2im2d(
        g, size=tuple(x.shape[-2:]), stride=stride, dilation=dilation
    ),
    chapter="kernels",
    impl=lambda B: (
        lambda x, *, kernel, stride, dilation, out: B.windows2d(x, kernel, stride, dilation, out)
    ),
    saves=(),
    linear=True,
    batch=leading,
    doc="sliding windows of the last two axes: (..., kh, kw, oh, ow)",
)
defop(
    "col2im2d",
    lambda xp, g, ans, cols, *, size, stride, dilation: xp.windows2d(
        g, kernel=tuple(cols.shape[-4:-2]), stride=stride, dilation=dilation,
        out=tuple(cols.shape[-2:]),
    ),
    chapter="kernels",
    impl=lambda B: lambda cols, *, size, stride, dilation: B.col2im2d(cols, size, stride, dilation),
    saves=(), linear=True, batch=leading,
    doc="add windows (..., kh, kw, oh, ow) back into an array of spatial size",
)  # fmt: skip


# -- geometry ------------------------------------------------------------------------------
def pair(v, name, what):
    """``v`` (an int or a pair of ints) as a pair, checked once for every conv and pool
    argument by ``checks.integer``: a padding (``what`` "padding", "output_padding") is
    >= 0, a kernel size, stride or dilation >= 1. A wrong type is a TypeError, a wrong
    value (or length) a ValueError, naming ``name`` and ``what``."""
    low = 0 if what.endswith("padding") else 1
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{name}: {what} must be an int or a pair of ints, got {v!r}")
        return (
            int(checks.integer(name, what, v[0], low)),
            int(checks.integer(name, what, v[1], low)),
        )
    try:
        v = int(checks.integer(name, what, v, low))
    except TypeError:
        raise TypeError(
            f"{name}: {what} must be an int or a pair of ints, got {v!r} ({type(v).__name__})"
        ) from None
    return (v, v)


def out_size(size, kernel, stride, pads, dilation):
    return tuple(
        (n + p0 + p1 - d * (k - 1) - 1) // s + 1
        for n, k, s, (p0, p1), d in zip(size, kernel, stride, (pads[:2], pads[2:]), dilation)
    )


# -- conv2d --------------------------------------------------------------------------------------
# Channels first, batch inside: the windows are laid out as (groups, C/groups * kh * kw,
# N * oh * ow), so that each group is one GEMM over the whole batch (a batched matmul
# of N small products is 2-3x slower). The (O, N, oh, ow) product is then copied to
# (N, O, oh, ow): outputs stay C-ordered NCHW, so element-wise ops and pooling never
# mix layouts (which makes NumPy's loops several times slower).
def _patches(xp, x, kernel, stride, pads, dilation, groups):
    """(groups, C/groups * kh * kw, N * oh * ow) windows of the padded input, and (oh, ow)."""
    xpad = xp.pad2d(x, pads=pads) if any(pads) else x
    out = out_size(x.shape[-2:], kernel, stride, pads, dilation)
    p = xp.windows2d(xpad, kernel=kernel, stride=stride, dilation=dilation, out=out)
    p = xp.permute_dims(p, (1, 2, 3, 0, 4, 5))  # (C, kh, kw, N, oh, ow)
    n, c = x.shape[0], x.shape[1]
    k = c // groups * kernel[0] * kernel[1]
    return xp.reshape(p, (groups, k, n * out[0] * out[1])), out


def _out_grad(xp, g, groups):
    """The output's gradient (N, O, oh, ow) as (groups, O/groups, N * oh * ow)."""
    n, o = g.shape[0], g.shape[1]
    gt = xp.permute_dims(g, (1, 0, 2, 3))
    return xp.reshape(gt, (groups, o // groups, n * g.shape[2] * g.shape[3]))


def _conv2d(xp, x, w, b, *, stride, pads, dilation, groups):
    """The output and, as the residual for the weight's rule, the windows (im2col)."""
    o, n = w.shape[0], x.shape[0]
    p, out = _patches(xp, x, tuple(w.shape[2:]), stride, pads, dilation, groups)
    wm = xp.reshape(w, (groups, o // groups, -1))
    y = xp.permute_dims(xp.reshape(wm @ p, (o, n, out[0] * out[1])), (1, 0, 2))
    y = xp.reshape(y, (n, o) + out, copy=True)  # a new C-ordered array: ours alone
    if b is None:
        return y, p
    if b.dtype == y.dtype:
        y += xp.reshape(b, (1, o, 1, 1))  # in place: no second output-sized array
        return y, p
    return y + xp.reshape(b, (1, o, 1, 1)), p


def _weight_grad(xp, gm, p):
    """The sum over the batch of G @ P^T, per group: (groups, O/groups, K).

    A batched matmul, then the sum: much faster than one tensordot over (N, oh*ow),
    which copies G and P into long matrices first."""
    return xp.sum(gm @ xp.matrix_transpose(p), axis=0)


# One rule per argument: each runs only when its argument needs a gradient (the
# input of a first layer needs none), and reads only what it needs.
def _conv2d_dx(xp, g, ans, x, w, b, *, stride, pads, dilation, groups):
    n, c, h, wd = x.shape
    kernel = tuple(w.shape[2:])
    out = tuple(g.shape[-2:])
    size = (h + pads[0] + pads[1], wd + pads[2] + pads[3])
    wm = xp.reshape(w, (groups, w.shape[0] // groups, -1))
    # Stride 1: the columns are computed on rows as wide as the padded input (g padded
    # with zero columns), so that col2im adds long contiguous runs.
    rows = stride == (1, 1)
    if rows:
        gt = xp.pad2d(xp.permute_dims(g, (1, 0, 2, 3)), pads=(0, 0, 0, size[1] - out[1]))
        out = (out[0], size[1])
        gm = xp.reshape(gt, (groups, gt.shape[0] // groups, -1))
    else:
        gm = _out_grad(xp, g, groups)
    dp = xp.reshape(xp.matrix_transpose(wm) @ gm, (c,) + kernel + (n,) + out)
    if rows:
        # col2im in the columns' own (C, N) order (its adds read what they write in
        # step), then one copy to C-ordered NCHW, cropped: the gradient a pooling or
        # element-wise rule reads next is contiguous
        dx = xp.col2im2d_rows(xp.permute_dims(dp, (0, 3, 1, 2, 4, 5)), size=size,
                              dilation=dilation)  # fmt: skip
        dx = xp.permute_dims(_crop(xp, dx, pads, (h, wd)), (1, 0, 2, 3))
        return xp.reshape(dx, (n, c, h, wd), copy=True)
    dp = xp.permute_dims(dp, (3, 0, 1, 2, 4, 5))  # (N, C, kh, kw, oh, ow)
    dx = xp.col2im2d(dp, size=size, stride=stride, dilation=dilation)
    return _crop(xp, dx, pads, (h, wd)) if any(pads) else dx


def _conv2d_dw(xp, g, p, x, w, b, *, stride, pads, dilation, groups):
    k = p.shape[1]
    if k < 16:
        # Short windows (one input channel): an (O, K) product over N * oh * ow terms is
        # a GEMM BLAS splits badly (2.5x slower here); per-image products, then the sum.
        n, o = g.shape[0], g.shape[1]
        gb = xp.reshape(g, (n, groups, o // groups, -1))  # no copy: g is NCHW
        dw = _weight_grad(xp, gb, xp.permute_dims(xp.reshape(p, (groups, k, n, -1)), (2, 0, 1, 3)))
    else:
        # (P G^T)^T rather than G P^T: the same product, 1.2-1.6x faster from OpenBLAS
        dw = xp.matrix_transpose(p @ xp.matrix_transpose(_out_grad(xp, g, groups)))
    return xp.reshape(dw, tuple(w.shape))  # (groups, O/groups, K) in w's layout


def _conv2d_patches(xp, x, w, b, *, stride, pads, dilation, groups):
    return _patches(xp, x, tuple(w.shape[2:]), stride, pads, dilation, groups)[0]


def _conv2d_jvp(xp, ts, p, x, w, b, *, stride, pads, dilation, groups):
    """conv(tx, W) + conv(x, tW) (one matmul over the saved windows p of x) + tb."""
    tx, tw, tb = ts
    r = None
    if tx is not None:
        r = _conv2d(xp, tx, w, None, stride=stride, pads=pads, dilation=dilation,
                    groups=groups)[0]  # fmt: skip
    if tw is not None:
        o, n = tw.shape[0], x.shape[0]
        out = out_size(x.shape[-2:], tuple(tw.shape[2:]), stride, pads, dilation)
        y = xp.reshape(xp.reshape(tw, (groups, o // groups, -1)) @ p, (o, n, out[0] * out[1]))
        c = xp.reshape(xp.permute_dims(y, (1, 0, 2)), (n, o) + out)
        r = c if r is None else r + c
    if tb is not None:
        c = xp.reshape(tb, (1, -1, 1, 1))
        r = c if r is None else r + c
    return r


def _conv_batch(c, x, w, b, **kwargs):
    """conv2d / conv_transpose2d: the batch folded into N; per-example weights as one
    grouped convolution (groups * n: example j's channels meet only its own weights)."""
    xp, n = c.xp, c.n
    bx, bw, bb = c.bd
    if not bw and not bb:
        return unfold(c, c.f(fold(c, x), w, b, **kwargs))
    x, w = c.lift(x, bx), c.lift(w, bw)
    b = c.lift(b, bb)
    big_n = x.shape[1]
    xg = xp.reshape(xp.moveaxis(x, 0, 1), (big_n, n * x.shape[2]) + tuple(x.shape[3:]))
    wg = xp.reshape(w, (n * w.shape[1],) + tuple(w.shape[2:]))
    bg = None if b is None else xp.reshape(b, (-1,))
    kwargs["groups"] = kwargs["groups"] * n
    y = c.f(xg, wg, bg, **kwargs)
    y = xp.reshape(y, (big_n, n, y.shape[1] // n) + tuple(y.shape[2:]))
    return xp.moveaxis(y, 1, 0)


defop(
    "nn.conv2d",
    vjp=(_conv2d_dx, _conv2d_dw, lambda xp, g, ans, x, w, b, **kw: xp.sum(g, axis=(0, 2, 3))),
    # x is kept for the patches the weight's rule reads, recomputed under create_graph
    saves=((0, 1), (0,), ()),
    residuals=_conv2d_patches,
    chapter=CH,
    impl=lambda B: lambda x, w, b, **kw: _conv2d(B, x, w, b, **kw),
    jvp=_conv2d_jvp,
    batch=_conv_batch,
    doc="2-D convolution (cross-correlation), NCHW, weight (O, C/groups, kh, kw)",
)


def _check(name, x, w, groups, in_axis, what):
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"{name}: input and weight must be 4-D (N, C, H, W) and (O, C/groups, kh, kw), "
            f"got {tuple(x.shape)} and {tuple(w.shape)}"
        )
    if x.shape[1] % groups or w.shape[in_axis] * (groups if in_axis else 1) % groups:
        raise ValueError(f"{name}: groups={groups} must divide the channels ({x.shape[1]})")
    expected = w.shape[1] * groups if in_axis == 1 else w.shape[0]
    if x.shape[1] != expected:
        raise ValueError(f"{name}: expected {expected} input channels ({what}), got {x.shape[1]}")


def _conv_args(name, kernel_size, stride, padding, dilation, groups):
    """A convolution's arguments checked once: (kernel, stride, padding, dilation, groups),
    each a pair but ``padding`` "valid" or "same" and ``groups`` an int >= 1; ``kernel``
    None when ``kernel_size`` is (the functional form reads it from the weight)."""
    kernel = None if kernel_size is None else pair(kernel_size, name, "kernel_size")
    stride, dilation = pair(stride, name, "stride"), pair(dilation, name, "dilation")
    if isinstance(padding, str):
        checks.choice(name, "padding", padding, ("valid", "same"))
        if padding == "same" and stride != (1, 1):
            raise ValueError(f"{name}: padding='same' needs stride 1, got stride {stride}")
    else:
        padding = pair(padding, name, "padding")
    return kernel, stride, padding, dilation, int(checks.integer(name, "groups", groups, low=1))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution as torch: ``padding`` an int, a pair, "valid" or "same"."""
    _, stride, padding, dilation, groups = _conv_args("conv2d", None, stride, padding, dilation,
                                                      groups)  # fmt: skip
    return _conv2d_call("conv2d", input, weight, bias, stride, padding, dilation, groups)


def _conv2d_call(name, input, weight, bias, stride, padding, dilation, groups):
    """``conv2d`` of checked arguments (``_conv_args``): the shapes are checked here."""
    recorder_of(input, weight, bias)  # a non-array named first
    _check(name, input, weight, groups, 1, "weight.shape[1] * groups")
    if weight.shape[0] % groups:
        raise ValueError(
            f"{name}: groups={groups} must divide the output channels ({weight.shape[0]})"
        )
    kernel = tuple(weight.shape[2:])
    if padding == "valid":
        pads = (0, 0, 0, 0)
    elif padding == "same":
        th, tw = (d * (k - 1) for d, k in zip(dilation, kernel))
        pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    else:
        ph, pw = padding
        pads = (ph, ph, pw, pw)
    out = out_size(input.shape[-2:], kernel, stride, pads, dilation)
    if min(out) < 1:
        raise ValueError(
            f"{name}: the window ({kernel} with dilation {dilation}) is larger than the "
            f"padded input {tuple(input.shape[-2:])} + padding {pads}"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(
            f"{name}: bias has shape {tuple(bias.shape)}, expected ({weight.shape[0]},)"
        )
    nn = recorder_of(input, weight).xp.nn
    return nn.conv2d(input, weight, bias, stride=stride, pads=pads, dilation=dilation,
                     groups=groups)  # fmt: skip


# -- conv_transpose2d --------------------------------------------------------------------------
def _full_size(size, kernel, stride, dilation, output_padding):
    parts = zip(size, kernel, stride, dilation, output_padding)
    return tuple((n - 1) * s + d * (k - 1) + 1 + op for n, k, s, d, op in parts)


def _conv_transpose2d(xp, x, w, b, *, stride, padding, output_padding, dilation, groups):
    n, c, h, wd = x.shape
    cg, og = w.shape[0] // groups, w.shape[1]
    kernel = tuple(w.shape[2:])
    xm = xp.reshape(x, (n, groups, cg, h * wd))
    wm = xp.reshape(w, (groups, cg, og * kernel[0] * kernel[1]))
    cols = xp.reshape(xp.matrix_transpose(wm) @ xm, (n, og * groups) + kernel + (h, wd))
    full = _full_size((h, wd), kernel, stride, dilation, output_padding)
    y = xp.col2im2d(cols, size=full, stride=stride, dilation=dilation)
    ph, pw = padding
    y = y[..., ph : full[0] - ph, pw : full[1] - pw]
    return y if b is None else y + xp.reshape(b, (1, -1, 1, 1))


def _conv_transpose2d_rule(xp, g, ans, x, w, b, *, stride, padding, output_padding, dilation,
                           groups):  # fmt: skip
    n, c, h, wd = x.shape
    cg, og = w.shape[0] // groups, w.shape[1]
    kernel = tuple(w.shape[2:])
    full = _full_size((h, wd), kernel, stride, dilation, output_padding)
    ph, pw = padding
    gfull = xp.pad2d(g, pads=(ph, full[0] - ph - g.shape[-2], pw, full[1] - pw - g.shape[-1]))
    dcols = xp.windows2d(gfull, kernel=kernel, stride=stride, dilation=dilation, out=(h, wd))
    dcols = xp.reshape(dcols, (n, groups, og * kernel[0] * kernel[1], h * wd))
    xm = xp.reshape(x, (n, groups, cg, h * wd))
    wm = xp.reshape(w, (groups, cg, -1))
    dx = xp.reshape(wm @ dcols, tuple(x.shape))
    dw = xp.reshape(_weight_grad(xp, xm, dcols), tuple(w.shape))
    db = None if b is None else xp.sum(g, axis=(0, 2, 3))
    return dx, dw, db


def _conv_transpose2d_jvp(xp, ts, ans, x, w, b, **kw):
    """convT(tx, W) + convT(x, tW) + tb: bilinear in x and W, linear in b."""
    tx, tw, tb = ts
    r = None if tx is None else _conv_transpose2d(xp, tx, w, None, **kw)
    if tw is not None:
        c = _conv_transpose2d(xp, x, tw, None, **kw)
        r = c if r is None else r + c
    if tb is not None:
        c = xp.reshape(tb, (1, -1, 1, 1))
        r = c if r is None else r + c
    return r


defop(
    "nn.conv_transpose2d",
    vjp=_conv_transpose2d_rule,
    jvp=_conv_transpose2d_jvp,
    chapter=CH,
    impl=lambda B: lambda x, w, b, **kw: _conv_transpose2d(B, x, w, b, **kw),
    batch=_conv_batch,
    doc="transposed 2-D convolution, weight (C_in, C_out/groups, kh, kw)",
)


def _conv_transpose_args(name, kernel_size, stride, padding, output_padding, groups, dilation):
    """A transposed convolution's arguments checked once: (kernel, stride, padding,
    output_padding, groups, dilation); ``output_padding`` smaller than stride or dilation."""
    kernel = None if kernel_size is None else pair(kernel_size, name, "kernel_size")
    stride, dilation = pair(stride, name, "stride"), pair(dilation, name, "dilation")
    padding = pair(padding, name, "padding")
    output_padding = pair(output_padding, name, "output_padding")
    if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
        raise ValueError(
            f"{name}: output_padding {output_padding} must be smaller than stride or dilation"
        )
    groups = int(checks.integer(name, "groups", groups, low=1))
    return kernel, stride, padding, output_padding, groups, dilation


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):  # fmt: skip
    """Transposed 2-D convolution as torch (the gradient of conv2d with respect to
    its input): output size (H - 1) * stride - 2 * padding + dilation * (k - 1)
    + output_padding + 1."""
    name = "conv_transpose2d"
    args = _conv_transpose_args(name, None, stride, padding, output_padding, groups, dilation)
    return _conv_transpose2d_call(name, input, weight, bias, *args[1:])


def _conv_transpose2d_call(name, input, weight, bias, stride, padding, output_padding, groups,
                           dilation):  # fmt: skip
    """``conv_transpose2d`` of checked arguments: the shapes are checked here."""
    recorder_of(input, weight, bias)  # a non-array named first
    _check(name, input, weight, groups, 0, "weight.shape[0]")
    full = _full_size(input.shape[-2:], tuple(weight.shape[2:]), stride, dilation, output_padding)
    if any(f - 2 * p < 1 for f, p in zip(full, padding)):
        raise ValueError(f"{name}: padding {padding} leaves no output")
    return recorder_of(input, weight).xp.nn.conv_transpose2d(
        input, weight, bias, stride=stride, padding=padding, output_padding=output_padding,
        dilation=dilation, groups=groups,
    )  # fmt: skip


# -- 1-D: views over the 2-D ops ---------------------------------------------------------
def single(v, name, what):
    """``v`` (an int or a tuple of one int) as an int: a padding (``what`` "padding",
    "output_padding") >= 0, a kernel size, stride or dilation >= 1, checked by
    ``checks.integer`` (a TypeError for a wrong type, a ValueError for a wrong value or
    length, naming ``name`` and ``what``)."""
    low = 0 if what.endswith("padding") else 1
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{name}: {what} must be an int or a tuple of one int, got {v!r}")
        v = v[0]
    return int(checks.integer(name, what, v, low))


def _as_2d(name, x, what="input"):
    """(x as (N, C, 1, L), whether it was unbatched), for a 2-D or 3-D ``x``."""
    if not hasattr(x, "ndim"):
        raise TypeError(f"{name}: {what} must be an array or a Tensor, got {type(x).__name__}")
    if x.ndim not in (2, 3):
        shape = tuple(getattr(x, "shape", ()))
        raise ValueError(f"{name}: {what} must be 3-D (N, C, L) or 2-D (C, L), got {shape}")
    xp = recorder_of(x).xp
    unbatched = x.ndim == 2
    shape = ((1,) if unbatched else ()) + tuple(x.shape)
    return xp.reshape(x, shape[:2] + (1, shape[2])), unbatched


def _back(y, unbatched):
    """(N, C, 1, L') back to (N, C, L') (or (C, L'))."""
    xp = recorder_of(y).xp
    shape = (y.shape[1], y.shape[3]) if unbatched else (y.shape[0], y.shape[1], y.shape[3])
    return xp.reshape(y, shape)


def _kernel_2d(name, w):
    if not hasattr(w, "ndim"):
        raise TypeError(f"{name}: weight must be an array or a Tensor, got {type(w).__name__}")
    if w.ndim != 3:
        shape = tuple(getattr(w, "shape", ()))
        raise ValueError(f"{name}: weight must be 3-D (O, C/groups, k), got {shape}")
    xp = recorder_of(w).xp
    return xp.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]))


# -- conv1d --------------------------------------------------------------------------------
def _conv1d_args(name, kernel_size, stride, padding, dilation, groups):
    """(kernel, stride, padding, dilation, groups) checked once: ints but ``padding``
    "valid" or "same" (which needs stride 1); ``kernel`` None when ``kernel_size`` is."""
    kernel = None if kernel_size is None else single(kernel_size, name, "kernel_size")
    stride, dilation = single(stride, name, "stride"), single(dilation, name, "dilation")
    if isinstance(padding, str):
        checks.choice(name, "padding", padding, ("valid", "same"))
        if padding == "same" and stride != 1:
            raise ValueError(f"{name}: padding='same' needs stride 1, got stride {stride}")
    else:
        padding = single(padding, name, "padding")
    return kernel, stride, padding, dilation, int(checks.integer(name, "groups", groups, low=1))


def _conv1d_call(name, input, weight, bias, stride, padding, dilation, groups):
    """``conv1d`` of checked arguments (``_conv1d_args``)."""
    recorder_of(input, weight, bias)  # a non-array named first
    x, unbatched = _as_2d(name, input)
    w = _kernel_2d(name, weight)
    pad = padding if isinstance(padding, str) else (0, padding)
    y = _conv2d_call(name, x, w, bias, (1, stride), pad, (1, dilation), groups)
    return _back(y, unbatched)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution as torch: ``input`` (N, C, L), ``weight`` (O, C/groups, k),
    ``padding`` an int, "valid" or "same"."""
    _, stride, padding, dilation, groups = _conv1d_args("conv1d", None, stride, padding,
                                                        dilation, groups)  # fmt: skip
    return _conv1d_call("conv1d", input, weight, bias, stride, padding, dilation, groups)


# -- conv_transpose1d ------------------------------------------------------------------------
def _conv_transpose1d_args(name, kernel_size, stride, padding, output_padding, groups, dilation):
    """(kernel, stride, padding, output_padding, groups, dilation) checked once, ints;
    ``output_padding`` smaller than stride or dilation."""
    kernel = None if kernel_size is None else single(kernel_size, name, "kernel_size")
    stride, dilation = single(stride, name, "stride"), single(dilation, name, "dilation")
    padding = single(padding, name, "padding")
    output_padding = single(output_padding, name, "output_padding")
    if output_padding >= max(stride, dilation):
        raise ValueError(
            f"{name}: output_padding {output_padding} must be smaller than stride or dilation"
        )
    groups = int(checks.integer(name, "groups", groups, low=1))
    return kernel, stride, padding, output_padding, groups, dilation


def _conv_transpose1d_call(name, input, weight, bias, stride, padding, output_padding, groups,
                           dilation):  # fmt: skip
    recorder_of(input, weight, bias)  # a non-array named first
    x, unbatched = _as_2d(name, input)
    w = _kernel_2d(name, weight)
    y = _conv_transpose2d_call(name, x, w, bias, (1, stride), (0, padding), (0, output_padding),
                               groups, (1, dilation))  # fmt: skip
    return _back(y, unbatched)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):  # fmt: skip
    """Transposed 1-D convolution as torch: ``weight`` (C_in, C_out/groups, k), output
    length (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1."""
    name = "conv_transpose1d"
    args = _conv_transpose1d_args(name, None, stride, padding, output_padding, groups, dilation)
    return _conv_transpose1d_call(name, input, weight, bias, *args[1:])
