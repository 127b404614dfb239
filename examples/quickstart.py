"""Quick start: differentiate code written only against the Array API standard.

python examples/quickstart.py
"""

import array_api_compat
import numpy as np

import autodiff as ad


def loss(w, x, y):
    """Least squares with a tanh layer, written for any Array API namespace."""
    xp = array_api_compat.array_namespace(w, x, y)
    pred = xp.tanh(x @ w)
    return xp.mean((pred - y) ** 2)


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3))
    w_true = np.array([0.5, -1.0, 0.25])
    y = np.tanh(x @ w_true)

    # 1. The same function, differentiated: ad.grad wraps the raw NumPy arrays.
    w = np.zeros(3)
    step = ad.grad(loss)
    for _ in range(200):
        w = w - 0.5 * step(w, x, y).data
    print("numpy:            w =", np.round(w, 3), " loss =", float(loss(w, x, y)))

    # 2. The namespace API: tensors that record, .backward(), .grad.
    xp = ad.Autodiff(np)
    wt = xp.asarray(np.zeros(3), requires_grad=True)
    value = loss(wt, xp.asarray(x), xp.asarray(y))
    value.backward()
    print("gradient at w = 0:", np.round(wt.grad.data, 4))

    # 3. The same code on another backend, if array_api_strict is installed.
    try:
        import array_api_strict as strict
    except ImportError:
        return
    ws = strict.zeros(3, dtype=strict.float64)
    xs, ys = strict.asarray(x), strict.asarray(y)
    for _ in range(200):
        ws = ws - 0.5 * step(ws, xs, ys).data
    print("array_api_strict: w =", np.round(np.asarray(ws), 3))


if __name__ == "__main__":
    main()
