# %% [markdown]
# # Quick start: gradients of code written against the Array API standard
#
# `autodiff` differentiates code written for *any* Array API namespace. Here a
# least-squares loss is written once, with `array_namespace`, and then:
#
# 1. differentiated with `ad.grad` on plain NumPy arrays;
# 2. run on the differentiable namespace `ad.Autodiff(numpy)`, whose tensors
#    record a graph that `.backward()` pulls gradients through;
# 3. differentiated, unchanged, on `array_api_strict` (the reference
#    implementation of the standard).

# %%
import array_api_compat
import array_api_strict
import numpy as np

import autodiff as ad


def loss(w, x, y):
    """Mean squared error of a tanh model, written for any Array API namespace."""
    xp = array_api_compat.array_namespace(w, x, y)
    pred = xp.tanh(x @ w)
    return xp.mean((pred - y) ** 2)


rng = np.random.default_rng(0)
x = rng.standard_normal((64, 3))
w_true = np.array([0.5, -1.0, 0.25])
y = np.tanh(x @ w_true)

# %% [markdown]
# ## 1. `ad.grad` on NumPy arrays
#
# `ad.grad(loss)` is a function with the signature of `loss` that returns the
# gradient with respect to the first argument (JAX's conventions). Raw arrays
# are wrapped on entry, so `loss` itself needs no change, and the gradient comes
# back as the same kind of array (NumPy in, NumPy out). Gradient descent
# recovers `w_true`:

# %%
dloss = ad.grad(loss)
w = np.zeros(3)
for _ in range(200):
    w = w - 0.5 * dloss(w, x, y)
print("w =", np.round(w, 3), " loss =", float(loss(w, x, y)))
assert np.allclose(w, w_true, atol=1e-2)

# %% [markdown]
# ## 2. Tensors that record: `.backward()` and `.grad`
#
# `ad.Autodiff(np)` is a namespace with every function of the standard. Its
# arrays (`Tensor`s) show their values, dtype, device and the op that made them:

# %%
xp = ad.Autodiff(np)
wt = xp.asarray(np.zeros(3), requires_grad=True)
value = loss(wt, xp.asarray(x), xp.asarray(y))
print(value)
value.backward()
print(wt.grad)

# %% [markdown]
# The gradient matches central differences:

# %%
eps = 1e-6
numeric = [
    (float(loss(np.eye(3)[i] * eps, x, y)) - float(loss(-np.eye(3)[i] * eps, x, y))) / (2 * eps)
    for i in range(3)
]
print("central differences:", np.round(numeric, 6))
assert np.allclose(wt.grad.data, numeric, atol=1e-8)

# %% [markdown]
# The recorded graph, as Graphviz dot text (`ad.draw_graph(value)` renders it
# when Graphviz is installed):

# %%
print(ad.to_dot(value))

# %% [markdown]
# ## 3. The same code on `array_api_strict`
#
# `array_api_strict` allows only what the standard says. The same `loss` and
# the same `ad.grad` work there, and give the same numbers:

# %%
ws = array_api_strict.zeros(3, dtype=array_api_strict.float64)
xs, ys = array_api_strict.asarray(x), array_api_strict.asarray(y)
for _ in range(200):
    ws = ws - 0.5 * dloss(ws, xs, ys)
print("array_api_strict: w =", np.round(np.asarray(ws), 3))
assert np.allclose(np.asarray(ws), w, rtol=1e-12)

# %% [markdown]
# Higher order is free: `ad.hessian(loss)(w, x, y)` differentiates the gradient.

# %%
H = ad.hessian(loss)(w, x, y)
print("Hessian at the optimum:\n", np.round(H, 4))
assert np.all(np.linalg.eigvalsh(H) > 0)  # a minimum
