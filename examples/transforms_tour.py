# %% [markdown]
# # A tour of the transforms
#
# Every function transform of `autodiff`, each on a small function whose derivative
# is known in closed form: `grad`, `value_and_grad`, `vjp`, `jvp`, `jacfwd`, `jacrev`,
# `hessian`, `hvp`, forward over reverse through a closure, `custom_jvp`,
# `custom_vjp`, `vmap`, `checkpoint`, and the hooks of modules and tensors. Each
# result is asserted against its formula (float64, to 1e-12) and printed on one line.
# Only NumPy is needed.

# %%
import numpy as np

import autodiff as ad
from autodiff import nn

xp = ad.Autodiff(np)
x = np.array([0.5, -1.0, 2.0])
v = np.array([1.0, 0.5, -2.0])  # a tangent (forward mode) or cotangent (reverse)
A = np.array([[2.0, -1.0, 0.5], [0.0, 1.0, 3.0]])
Q = np.array([[2.0, 1.0, 0.0], [-1.0, 3.0, 0.5], [0.0, 0.5, 1.0]])


def check(name, got, expected):
    """Assert ``got`` (arrays, or tuples of them) equals the formula, and say so."""
    for g, e in zip(got, expected) if isinstance(got, tuple) else [(got, expected)]:
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-12, atol=1e-12)
    print(f"{name:<26} matches its formula")


def f(x):
    """sin(x) x^2, element-wise: f'(x) = cos(x) x^2 + 2 x sin(x)."""
    return xp.sin(x) * x**2


df = np.cos(x) * x**2 + 2 * x * np.sin(x)

# %% [markdown]
# ## Reverse mode: `grad`, `value_and_grad`, `vjp`
#
# NumPy arrays in give NumPy arrays out; the function is written once against the
# namespace.

# %%
check("grad", ad.grad(lambda x: xp.sum(f(x)))(x), df)
value, g = ad.value_and_grad(lambda x: xp.sum(f(x)))(x)
check("value_and_grad", (value, g), (np.sum(np.sin(x) * x**2), df))
out, vjp_fn = ad.vjp(f, x)
check("vjp", (out, vjp_fn(v)[0]), (np.sin(x) * x**2, v * df))

# %% [markdown]
# ## Forward mode: `jvp`, and the Jacobians both ways
#
# `jvp` pushes a tangent forward through each op's JVP rule, with no reverse pass.
# For `tanh(A x)` the Jacobian is `diag(1 - tanh(A x)^2) A`, built by `jacfwd` one
# input at a time and by `jacrev` one output at a time.

# %%
check("jvp", ad.jvp(f, (x,), (v,)), (np.sin(x) * x**2, df * v))
jacobian = (1 - np.tanh(A @ x) ** 2)[:, None] * A
check("jacfwd", ad.jacfwd(lambda x: xp.tanh(xp.asarray(A) @ x))(x), jacobian)
check("jacrev", ad.jacrev(lambda x: xp.tanh(xp.asarray(A) @ x))(x), jacobian)

# %% [markdown]
# ## Second order: `hessian` and `hvp`
#
# `h(x) = x^T Q x / 2 + sum(cos x)` has the gradient `S x - sin x` and the Hessian
# `S - diag(cos x)`, with `S = (Q + Q^T) / 2`. `hessian` is `jacfwd(jacrev(h))`; `hvp`
# gives `H v` without forming `H`, forward over reverse.

# %%
S = (Q + Q.T) / 2


def h(x):
    return x @ (xp.asarray(Q) @ x) / 2 + xp.sum(xp.cos(x))


H = S - np.diag(np.cos(x))
check("hessian", ad.hessian(h)(x), H)
check("hvp", ad.hvp(h, (x,), (v,)), (S @ x - np.sin(x), H @ v))

# %% [markdown]
# ## Forward over reverse through a closure
#
# The inner `grad` differentiates in `y` a function that closes over the outer
# variable `x`: `d/dy sum(x y^2) = 2 x y`, so its derivative along `v` in `x` is
# `2 y v`, and the mixed second derivative `d/dx d/dy` is `diag(2 y)`.

# %%
y = np.array([0.3, 0.8, -0.4])
check(
    "jvp of grad of a closure",
    ad.jvp(lambda x: ad.grad(lambda y: xp.sum(x * y**2))(y), (x,), (v,))[1],
    2 * y * v,
)
mixed = ad.jacfwd(ad.jacrev(lambda x, y: xp.sum(x * y**2), argnums=1), argnums=0)
check("jacfwd of jacrev (mixed)", mixed(x, y), np.diag(2 * y))

# %% [markdown]
# ## Rules of one's own: `custom_jvp` and `custom_vjp`
#
# `softplus(x) = log(1 + e^x)` gets the JVP `sigmoid(x) t`; reverse mode transposes
# it, so its gradient is `sigmoid(x)`. `clip_gradient` is the identity whose VJP
# clips the cotangent to [-1, 1]: the gradient of `sum(3 x)` through it is 1, not 3.

# %%
softplus = ad.custom_jvp(lambda x: xp.log(1 + xp.exp(x)))


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return xp.log(1 + xp.exp(x)), t / (1 + xp.exp(-x))


sigmoid = 1 / (1 + np.exp(-x))
check("custom_jvp (jvp)", ad.jvp(softplus, (x,), (v,))[1], sigmoid * v)
check("custom_jvp (grad)", ad.grad(lambda x: xp.sum(softplus(x)))(x), sigmoid)

clip_gradient = ad.custom_vjp(lambda x: x)
clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (xp.clip(g, -1.0, 1.0),))
check("custom_vjp", ad.grad(lambda x: xp.sum(3 * clip_gradient(x)))(x), np.ones(3))

# %% [markdown]
# ## Batching: `vmap`
#
# Per-example gradients of a squared error `(x_i . w - y_i)^2` are
# `2 (x_i . w - y_i) x_i`: `grad` written for one example, `vmap` over the examples
# (`w` shared: `in_axes=None`), then the batch axis put last with `out_axes`.

# %%
X = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0], [2.0, 0.0, -1.0], [1.0, 1.0, 1.0]])
targets = np.array([1.0, -2.0, 0.5, 0.0])
w = np.array([0.2, -0.3, 0.1])


def squared_error(w, xi, yi):
    return (xi @ w - yi) ** 2


per_example = 2 * (X @ w - targets)[:, None] * X
check("vmap(grad)", ad.vmap(ad.grad(squared_error), in_axes=(None, 0, 0))(w, X, targets),
      per_example)  # fmt: skip
check("vmap, out_axes=1", ad.vmap(f, out_axes=1)(X),
      (np.sin(X) * X**2).T)  # fmt: skip

# %% [markdown]
# ## Checkpointing: `checkpoint`
#
# The checkpointed layer's intermediates are not kept: the backward recomputes them.
# The gradient of `sum(tanh(A x))` is `A^T (1 - tanh(A x)^2)`, exactly as without.

# %%
layer = ad.checkpoint(lambda x: xp.tanh(xp.asarray(A) @ x))
check("checkpoint", ad.grad(lambda x: xp.sum(layer(x)))(x), A.T @ (1 - np.tanh(A @ x) ** 2))

# %% [markdown]
# ## Hooks: on a module's forward, on a tensor's gradient
#
# A forward hook that returns a value replaces the module's output (gradients follow
# what it computed): doubling a linear layer's output doubles `W^T 1`. A tensor hook
# rewrites the gradient passing through the tensor: halving it halves `x.grad`.

# %%
linear = nn.Linear(3, 2, dtype="float64")  # the data are float64
W = np.asarray(linear.weight.data)
handle = linear.register_forward_hook(lambda module, args, out: 2 * out)
t = xp.asarray(x, requires_grad=True)
xp.sum(linear(t)).backward()
check("forward hook", t.grad, 2 * W.T @ np.ones(2))
handle.remove()

t = xp.asarray(x, requires_grad=True)
t.register_hook(lambda g: g / 2)
xp.sum(linear(t)).backward()
check("tensor hook", t.grad, W.T @ np.ones(2) / 2)
