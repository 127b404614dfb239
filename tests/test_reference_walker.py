"""The engine's backward pass (``Pass.run``: ``backward()``, ``ad.grad``) against the
reference walker (tests/reference_walker.py), which shares the rules (``Op.pull``) and the
fitting (``Pass.fit``) with it and nothing else: not the order, the sums or the
dispatch. Fuzzed programs (tests/fuzz.py's generator), first and second order, then
targeted cases, the walker itself checked against hand-derived derivatives first.

The two sum fan-in in different orders (the walker as Kahn's algorithm frees nodes,
the pass by creation order), so they agree to rounding, not bit for bit: ``TOL`` relative
to the largest value of each gradient."""

import importlib
import sys

import numpy as np
import pytest

import autodiff as ad
from autodiff.engine.node import MultiNode

from . import fuzz
from .reference_walker import walk

TOL = 1e-12
SEED = 28


def host(a):
    """A gradient (raw array, Tensor or None) as NumPy, or None."""
    if a is None:
        return None
    return np.asarray(a.data if isinstance(a, ad.Tensor) else a)


def same(walker, engine):
    """Why ``walker``'s gradient differs from ``engine``'s (None where they agree)."""
    a, b = host(walker), host(engine)
    if a is None or b is None:
        return None if a is b else f"walker {a!r}, engine {b!r}"
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"walker {a.dtype}{a.shape}, engine {b.dtype}{b.shape}"
    scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
    if not np.allclose(a, b, rtol=TOL, atol=TOL * scale, equal_nan=False):
        return f"walker {a!r}, engine {b!r}, largest difference {np.max(np.abs(a - b)):.3g}"
    return None


def pairing(xp, grads, vs):
    """sum_k Re(<grad_k, v_k>) over the gradients that have history (None if none has)."""
    terms = [xp.sum(xp.real(g * xp.asarray(np.conj(v)))) for g, v in zip(grads, vs)
             if g is not None and g.requires_grad]  # fmt: skip
    return sum(terms[1:], terms[0]) if terms else None


def compare(xp, inputs, steps, seed, last_only=False):
    """(mismatches between the walker and the engine on one program, empty when they
    agree; whether it has second derivatives), or None when the backend itself can't run
    it (array_api_strict refuses slices out of bounds). First order: the walker's,
    ``backward()``'s and ``ad.grad``'s; recorded first order: the walker's and
    ``backward(create_graph=True)``'s; second order: the gradient of ``pairing`` of those,
    each by its own side (the walker over the graph its own rules recorded).

    The loss is fuzz.py's, a weighted sum of every value, or with ``last_only`` of the
    last value alone: then gradients reach nodes one consumer at a time (the engine's
    chains off the heap), a reduction's gradient may reach element-wise ops unbroadcast
    (its deferred broadcasts), and some inputs get no gradient at all."""
    rng = np.random.default_rng(seed)
    ts = [xp.asarray(a, requires_grad=True) for a in inputs]
    try:
        with np.errstate(all="ignore"):
            vals = fuzz._run(xp, steps, ts)
    except Exception:
        if fuzz._backend_refuses(xp, steps, inputs):
            return None
        raise

    def draw(shape, c):
        return rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if c else 0)

    cplx = [xp.isdtype(v.dtype, "complex floating") for v in vals]
    weights = [draw(tuple(v.shape), c) for v, c in zip(vals, cplx)]
    vs = [draw(np.shape(a), np.iscomplexobj(a)) for a in inputs]
    used = slice(-1, None) if last_only else slice(None)
    loss = fuzz._loss(xp, vals[used], weights[used], xp.asarray)
    if not loss.requires_grad:
        return None

    with np.errstate(all="ignore"):
        w1 = walk(loss, ts)  # the walker first: it frees nothing
        w1r = walk(loss, ts, create_graph=True)
        hw = pairing(xp, w1r, vs)
        w2 = walk(hw, ts) if hw is not None else [None] * len(ts)

        loss.backward(retain_graph=True)
        e1 = [t.grad for t in ts]
        for t in ts:
            t.grad = None
        loss.backward(create_graph=True)
        e1r = [t.grad for t in ts]
        he = pairing(xp, e1r, vs)
        for t in ts:
            t.grad = None
        if he is not None:
            he.backward()
        e2 = [t.grad for t in ts]

        def f(*xs):
            return fuzz._loss(xp, fuzz._run(xp, steps, xs)[used], weights[used], xp.asarray)

        a1 = ad.grad(f, argnums=tuple(range(len(ts))))(*[xp.asarray(a) for a in inputs])

    out = []
    # ad.grad gives zeros where no gradient arrives, backward() leaves .grad None
    zeros = [np.zeros_like(a) if w is None else w for w, a in zip(w1, inputs)]
    for what, ws, es in (("backward", w1, e1), ("ad.grad", zeros, a1),
                         ("create_graph", w1r, e1r), ("second order", w2, e2)):  # fmt: skip
        for k, (w, e) in enumerate(zip(ws, es)):
            why = same(w, e)
            if why is not None:
                out.append(f"{what}, input {k}: {why}")
    for k, (w, e) in enumerate(zip(w1r, e1r)):
        if (w is not None and w.requires_grad) != (e is not None and e.requires_grad):
            out.append(f"create_graph, input {k}: history differs")
    return out, hw is not None


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's mean of empty arrays
@pytest.mark.parametrize("backend, programs", [("numpy", 250), ("array_api_strict", 40)])
def test_fuzzed_programs_match_the_walker(backend, programs):
    xp = ad.Autodiff(importlib.import_module(backend))
    rng = np.random.default_rng(SEED)
    compared = second = 0
    failures = []
    for p in range(programs):
        inputs, steps = fuzz.make_program(rng)
        try:
            result = compare(xp, inputs, steps, seed=p, last_only=p % 2 == 1)
        except Exception as exc:
            result = [f"raised {type(exc).__name__}: {exc}"], False
        if result is None:
            continue
        out, nonlinear = result
        compared += 1
        second += nonlinear
        if out:
            loss = "the last value's" if p % 2 else "every value's"
            text = fuzz.program_text(inputs, steps)
            failures.append(f"{text}\n# loss: {loss}\n# " + "\n# ".join(out))
    assert not failures, "\n\n".join(failures)
    # nearly every program runs, and most have second derivatives to compare
    assert compared >= 0.9 * programs, compared
    assert second >= 0.7 * compared, (second, compared)


# -- targeted cases ------------------------------------------------------------------------
xp = ad.Autodiff(np)


def engine(y, leaves, grad=None, create_graph=False):
    """The engine's gradients of ``y`` (``backward()``, the graph kept): ``.grad`` of each."""
    for t in leaves:
        t.grad = None
    y.backward(grad, retain_graph=True, create_graph=create_graph)
    return [t.grad for t in leaves]


def agree(y, leaves, grad=None):
    """The walker's gradients, checked against the engine's on the same graph."""
    walked = walk(y, leaves, grad)
    for k, (w, e) in enumerate(zip(walked, engine(y, leaves, grad))):
        assert same(w, e) is None, f"input {k}: {same(w, e)}"
    return [host(w) for w in walked]


def close(a, b, rtol=1e-14):
    np.testing.assert_allclose(host(a), b, rtol=rtol, atol=rtol)


def test_the_walker_gives_hand_derived_derivatives_first_and_second_order():
    x0 = np.linspace(-2.0, 2.0, 7)
    x = xp.asarray(x0, requires_grad=True)
    y = xp.sum(xp.sin(x) * x)
    (g,) = agree(y, [x])
    close(g, np.cos(x0) * x0 + np.sin(x0))
    # second order: d/dx <d/dx y, v> = v * (2 cos x - x sin x) (the Hessian is diagonal)
    v = np.arange(7.0) - 3.0
    (gr,) = walk(y, [x], create_graph=True)
    assert gr.requires_grad
    (h,) = walk(xp.sum(gr * xp.asarray(v)), [x])
    close(h, v * (2 * np.cos(x0) - x0 * np.sin(x0)))
    (er,) = engine(y, [x], create_graph=True)
    (he,) = engine(xp.sum(er * xp.asarray(v)), [x])
    assert same(h, he) is None


def test_fan_out_sums_every_use():
    x0 = np.array([-1.0, 0.25, 2.0])
    x = xp.asarray(x0, requires_grad=True)
    u = xp.sin(x)  # an intermediate with three consumers
    y = xp.sum(x * x + xp.exp(x) * x - x) + xp.sum(u * u + u)
    (g,) = agree(y, [x])
    close(g, 2 * x0 + np.exp(x0) * (1 + x0) - 1 + (2 * np.sin(x0) + 1) * np.cos(x0))
    # one node reading another twice, with nothing else pending (the engine's chain path)
    m0 = np.arange(4.0).reshape(2, 2) / 4
    m = xp.asarray(m0, requires_grad=True)
    u = xp.sin(m)
    (g,) = agree(xp.sum(u @ u), [m])
    u0, ones = np.sin(m0), np.ones((2, 2))
    close(g, (ones @ u0.T + u0.T @ ones) * np.cos(m0))


def test_broadcasting_is_summed_back_to_each_input():
    rng = np.random.default_rng(1)
    a0, b0, c0, s0 = (rng.standard_normal(s) for s in [(3,), (2, 3), (2, 1), ()])
    a, b, c, s = (xp.asarray(v, requires_grad=True) for v in (a0, b0, c0, s0))
    ga, gb, gc, gs = agree(xp.sum(a * b * c * s), [a, b, c, s])
    close(ga, np.sum(b0 * c0 * s0, axis=0))
    close(gb, np.broadcast_to(a0 * c0 * s0, (2, 3)))
    close(gc, np.sum(a0 * b0 * s0, axis=1, keepdims=True))
    close(gs, np.sum(a0 * b0 * c0))
    # a reduction's gradient reaching element-wise ops (broadcast late by the engine)
    gc, ga = agree(xp.sum(c + a), [c, a])  # each element of c is used three times
    close(gc, np.full((2, 1), 3.0))
    close(ga, np.full(3, 2.0))
    gc, ga = agree(xp.sum(xp.exp(c * a) * 2.0), [c, a])
    close(gc, np.sum(2.0 * np.exp(c0 * a0) * a0, axis=1, keepdims=True))
    close(ga, np.sum(2.0 * np.exp(c0 * a0) * c0, axis=0))
    m0 = np.mean(b0, axis=1, keepdims=True)
    gb, ga = agree(xp.sum(xp.exp(xp.mean(b, axis=1, keepdims=True)) * a), [b, a])
    close(gb, np.broadcast_to(np.exp(m0) * np.sum(a0) / 3, (2, 3)))
    close(ga, np.broadcast_to(np.sum(np.exp(m0)), (3,)))
    # a non-scalar output with a cotangent: the walker, backward(grad) and ad.vjp
    w0 = rng.standard_normal((2, 3))
    (gb,) = agree(b * c, [b], grad=w0)
    close(gb, w0 * c0)
    _, vjp_fn = ad.vjp(lambda t: t * xp.asarray(c0), b0)
    close(vjp_fn(w0)[0], w0 * c0)


def test_multi_output_nodes_get_zeros_for_unused_outputs():
    rng = np.random.default_rng(2)
    m0 = rng.standard_normal((3, 3))
    s0 = m0 + m0.T
    s = xp.asarray(s0, requires_grad=True)
    w, v = xp.linalg.eigh(s)
    assert isinstance(w._node, MultiNode) and w._node is v._node
    c = np.array([1.0, 2.0, 3.0])
    (g,) = agree(xp.sum(w * xp.asarray(c)), [s])  # v: no gradient arrives, zeros
    wn, vn = np.linalg.eigh(s0)
    close(g, vn @ np.diag(c) @ vn.T, rtol=1e-12)
    (g,) = agree(xp.sum(v[:, 0] ** 2), [s])  # a unit vector: its squared norm is constant
    close(g, np.zeros((3, 3)), rtol=1e-12)

    a0 = rng.standard_normal((4, 3))
    a = xp.asarray(a0, requires_grad=True)
    _, sv, _ = xp.linalg.svd(a, full_matrices=False)
    (g,) = agree(xp.sum(sv), [a])  # the nuclear norm's gradient: U V^H
    u0, _, vh0 = np.linalg.svd(a0, full_matrices=False)
    close(g, u0 @ vh0, rtol=1e-12)

    p0, q0, k0 = rng.standard_normal(4), rng.standard_normal(3), rng.standard_normal((3, 4))
    p, q = xp.asarray(p0, requires_grad=True), xp.asarray(q0, requires_grad=True)
    gx, gy = xp.meshgrid(p, q)  # gx[i, j] = p[j], gy[i, j] = q[i]
    assert isinstance(gx._node, MultiNode)
    gp, gq = agree(xp.sum(gx * gy * xp.asarray(k0)), [p, q])
    close(gp, q0 @ k0)
    close(gq, k0 @ p0)

    r0, _, r2, _ = xp.unstack(a)  # a view op with several outputs, two unused
    (g,) = agree(xp.sum(r0 * r2), [a])
    close(g, np.stack([a0[2], np.zeros(3), a0[0], np.zeros(3)]))


def test_views_and_in_place_writes():
    rng = np.random.default_rng(3)
    x0, w0 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    x = xp.asarray(x0, requires_grad=True)
    y = x * 2.0
    view = y[1:, :2]
    view[0] = x[0, :2] * 3.0  # through the view into y (copy-on-write, recorded)
    y += x * x  # in place, recorded
    (g,) = agree(xp.sum(y * xp.asarray(w0)), [x])
    want = w0 * (2.0 + 2.0 * x0)
    want[1, :2] = w0[1, :2] * 2.0 * x0[1, :2]  # overwritten: only x * x is left there
    want[0, :2] += 3.0 * w0[1, :2]
    close(g, want)


def test_complex_inputs_in_pytorchs_convention():
    rng = np.random.default_rng(4)
    z0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    c0, w0 = rng.standard_normal(3), rng.standard_normal(3) + 1j * rng.standard_normal(3)
    z = xp.asarray(z0, requires_grad=True)
    y = xp.sum(xp.real(z * xp.conj(z) * xp.asarray(c0))) + xp.sum(
        xp.real(xp.asarray(w0) * xp.exp(z))
    )
    (g,) = agree(y, [z])
    # dL/dRe z + i dL/dIm z: 2 c z for c |z|^2, conj(w e^z) for Re(w e^z)
    close(g, 2 * c0 * z0 + np.conj(w0 * np.exp(z0)))


def test_integer_inputs_get_no_gradient():
    k = xp.asarray([1, 2, 3])
    x0 = np.array([0.5, -1.0, 2.0])
    x = xp.asarray(x0, requires_grad=True)
    assert not k.requires_grad
    y = xp.sum(x * k) + xp.sum(xp.take(x, k - 1)) + xp.sum(xp.argmax(x) * x)
    gx, gk = agree(y, [x, k])
    assert gk is None and k.grad is None
    close(gx, np.array([1.0, 2.0, 3.0]) + 1.0 + 2.0)


def test_a_chain_of_ten_thousand_ops_needs_no_recursion():
    from .reference_walker import _reachable

    x0 = np.array([0.5, -1.0, 2.0])
    x = xp.asarray(x0, requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0001
        y = y + 0.5
    loss = xp.sum(y)
    assert len(_reachable(loss._node)) > 10_000 > sys.getrecursionlimit()
    (g,) = agree(loss, [x])
    close(g, np.full(3, 1.0001**5000), rtol=1e-11)
    (gr,) = walk(loss, [x], create_graph=True)  # recorded: the same walk
    close(gr, g, rtol=TOL)


def test_checkpoint_and_custom_vjp_nodes():
    from autodiff.engine.node import Recompute

    x0 = np.array([0.5, -1.0, 2.0])
    x = xp.asarray(x0, requires_grad=True)
    y = xp.sum(ad.checkpoint(lambda t: xp.sin(t) * t)(x))
    assert isinstance(y._node.edges[0][0].kwargs, Recompute)  # values dropped
    (g,) = agree(y, [x])  # check_node recomputes them
    close(g, np.cos(x0) * x0 + np.sin(x0))

    @ad.custom_vjp
    def cube(t):
        return t * t * t

    # a rule twice the true derivative: the walker runs the custom rule, not the forward's
    cube.defvjp(lambda t: (t * t * t, t), lambda t, g: (6.0 * t * t * g,))
    (g,) = agree(xp.sum(cube(x)), [x])
    close(g, 6.0 * x0 * x0)


def test_the_walker_refuses_a_freed_graph():
    x = xp.asarray([1.0, 2.0], requires_grad=True)
    y = xp.sum(xp.exp(x))
    y.backward()  # frees what the nodes saved
    with pytest.raises(RuntimeError, match="second time"):
        walk(y, [x])
