"""Every public entry point names itself and the argument in its error: each function
of ``autodiff.nn.functional`` given a non-array for one of its array arguments, each
module class called on one, each optimizer and LR scheduler given a non-iterable,
``Autodiff`` given no namespace, each transform given no function.

Spec-driven: ``CALLS`` holds one valid call per public functional op (the test that it
covers ``F.__all__`` exactly makes a new op add its own); each array argument of it is
replaced by a string in turn."""

import functools
import inspect

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn as nn
import autodiff.nn.functional as F
import autodiff.optim as optim
from autodiff.optim import lr_scheduler

XP = ad.Autodiff(np)


def a(*shape):
    return XP.asarray(np.linspace(0.1, 0.9, int(np.prod(shape))).reshape(shape), dtype=XP.float32)


def i(*values):
    return XP.asarray(np.array(values))


def _img():
    return a(1, 2, 5, 5)


# one valid call per public op: name -> (positional args, keyword args)
CALLS = {
    "linear": lambda: ((a(2, 3), a(4, 3), a(4)), {}),
    "relu": lambda: ((a(2, 3),), {}),
    "sigmoid": lambda: ((a(2, 3),), {}),
    "silu": lambda: ((a(2, 3),), {}),
    "softplus": lambda: ((a(2, 3),), {}),
    "gelu": lambda: ((a(2, 3),), {}),
    "softmax": lambda: ((a(2, 3),), {}),
    "log_softmax": lambda: ((a(2, 3),), {}),
    "logsumexp": lambda: ((a(2, 3),), {}),
    "leaky_relu": lambda: ((a(2, 3),), {}),
    "elu": lambda: ((a(2, 3),), {}),
    "mish": lambda: ((a(2, 3),), {}),
    "hardswish": lambda: ((a(2, 3),), {}),
    "glu": lambda: ((a(2, 4),), {}),
    "softmin": lambda: ((a(2, 3),), {}),
    "cross_entropy": lambda: ((a(2, 3), i(0, 2)), {"weight": a(3)}),
    "nll_loss": lambda: ((a(2, 3), i(0, 2)), {"weight": a(3)}),
    "mse_loss": lambda: ((a(2, 3), a(2, 3)), {}),
    "l1_loss": lambda: ((a(2, 3), a(2, 3)), {}),
    "huber_loss": lambda: ((a(2, 3), a(2, 3)), {}),
    "smooth_l1_loss": lambda: ((a(2, 3), a(2, 3)), {}),
    "kl_div": lambda: ((a(2, 3), a(2, 3)), {}),
    "binary_cross_entropy": lambda: ((a(2, 3), a(2, 3)), {"weight": a(2, 3)}),
    "binary_cross_entropy_with_logits": lambda: (
        (a(2, 3), a(2, 3)),
        {"weight": a(2, 3), "pos_weight": a(3)},
    ),
    "cosine_similarity": lambda: ((a(2, 3), a(2, 3)), {}),
    "normalize": lambda: ((a(2, 3),), {}),
    "conv2d": lambda: ((_img(), a(3, 2, 3, 3), a(3)), {}),
    "conv_transpose2d": lambda: ((_img(), a(2, 3, 3, 3), a(3)), {}),
    "conv1d": lambda: ((a(1, 2, 5), a(3, 2, 3), a(3)), {}),
    "conv_transpose1d": lambda: ((a(1, 2, 5), a(2, 3, 3), a(3)), {}),
    "max_pool2d": lambda: ((_img(), 2), {}),
    "avg_pool2d": lambda: ((_img(), 2), {}),
    "max_pool1d": lambda: ((a(1, 2, 6), 2), {}),
    "avg_pool1d": lambda: ((a(1, 2, 6), 2), {}),
    "adaptive_avg_pool1d": lambda: ((a(1, 2, 6), 3), {}),
    "adaptive_avg_pool2d": lambda: ((_img(), 2), {}),
    "interpolate": lambda: ((_img(),), {"scale_factor": 2}),
    "gru_cell": lambda: ((a(2, 3), a(2, 4), a(12, 3), a(12, 4), a(12), a(12)), {}),
    "gru_sequence": lambda: ((a(5, 2, 3), a(2, 4), a(12, 3), a(12, 4), a(12), a(12)), {}),
    "lstm_cell": lambda: ((a(2, 3), (a(2, 4), a(2, 4)), a(16, 3), a(16, 4), a(16), a(16)), {}),
    "gated_memory_cell": lambda: ((a(2, 4), a(2, 3), a(7, 4), a(7, 4), a(4), a(4)), {}),
    "rope": lambda: ((a(2, 5, 4),), {}),
    "scaled_dot_product_attention": lambda: (
        (a(1, 2, 3, 4), a(1, 2, 3, 4), a(1, 2, 3, 4)),
        {"attn_mask": a(3, 3)},
    ),
    "self_attention_packed": lambda: ((a(2, 5, 12), 2), {}),
    "layer_norm": lambda: ((a(2, 3), (3,), a(3), a(3)), {}),
    "batch_norm": lambda: ((a(4, 3), a(3), a(3), a(3), a(3)), {}),
    "group_norm": lambda: ((a(1, 4, 3, 3), 2, a(4), a(4)), {}),
    "rms_norm": lambda: ((a(2, 3), (3,), a(3)), {}),
    "embedding": lambda: ((i(0, 3), a(4, 3)), {}),
    "dropout": lambda: ((a(2, 3),), {}),
    "pad": lambda: ((a(1, 2, 3), (1, 1)), {}),
    "one_hot": lambda: ((i(0, 2),), {"num_classes": 3}),
}


def test_the_calls_cover_every_public_functional_op():
    assert sorted(CALLS) == sorted(F.__all__)


def _array_arguments(name):
    """(parameter name, a call with that argument replaced by a string) for each
    array argument of the valid call of ``name``."""
    fn = getattr(F, name)
    args, kwargs = CALLS[name]()
    params = list(inspect.signature(fn).parameters)
    out = []
    for k, v in enumerate(args):
        if isinstance(v, ad.Tensor):
            bad = args[:k] + ("x",) + args[k + 1 :]
            out.append((params[k], lambda bad=bad: fn(*bad, **kwargs)))
    for key, v in kwargs.items():
        if isinstance(v, ad.Tensor):
            out.append((key, lambda key=key: fn(*args, **{**kwargs, key: "x"})))
    return out


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_functional_op_names_itself_and_the_argument(name):
    fn = getattr(F, name)
    args, kwargs = CALLS[name]()
    fn(*args, **kwargs)  # the call is valid
    cases = _array_arguments(name)
    assert cases, name
    for param, call in cases:
        with pytest.raises(TypeError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"{name}: {param} must be"), msg
        assert "got str" in msg, msg


@functools.cache
def _modules():
    """Every module class of ``autodiff.nn``, made with the first simple arguments it
    takes."""
    out = {}
    for name in nn.__all__:
        cls = getattr(nn, name)
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)) or cls is nn.Module:
            continue
        for args in ((), (4,), (4, 2), (2, 4), (4, 2, 2), (4, 2, 2, 2)):
            try:
                out[name] = cls(*args)
                break
            except (TypeError, ValueError):
                continue
    layer = (nn.TransformerEncoderLayer(4, 2), nn.TransformerDecoderLayer(4, 2))
    out["TransformerEncoder"] = nn.TransformerEncoder(layer[0], 1)
    out["TransformerDecoder"] = nn.TransformerDecoder(layer[1], 1)
    out["Sequential"] = nn.Sequential(nn.Linear(4, 2))
    return out


# Containers of others (no forward of their own), and Identity, which as torch's
# hands back whatever it is given.
NO_FORWARD = ["Identity", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList"]


def test_every_module_class_is_constructed():
    made = _modules()
    missing = [n for n in nn.__all__ if isinstance(getattr(nn, n), type) and n not in made]
    assert missing == ["Module", "Parameter"], missing  # the base class; a Tensor


@pytest.mark.parametrize("name", sorted(set(_modules()) - set(NO_FORWARD)))
def test_every_module_names_itself_and_the_argument(name):
    m = _modules()[name]
    fwd = inspect.signature(m.forward).parameters.values()
    n = sum(p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD for p in fwd)
    with pytest.raises(TypeError) as info:
        m(*["x"] * n)
    msg = str(info.value)
    # the innermost module names itself: a container's layer, or the module
    inner = {"Sequential": "Linear", "TransformerEncoder": "TransformerEncoderLayer",
             "TransformerDecoder": "TransformerDecoderLayer"}.get(name, name)  # fmt: skip
    assert msg.startswith(f"{inner}: "), msg
    assert "must be an array or a Tensor, got str" in msg, msg


OPTIMIZERS = [n for n in optim.__all__ if isinstance(getattr(optim, n), type)
              and issubclass(getattr(optim, n), optim.Optimizer)]  # fmt: skip
SCHEDULERS = [n for n in dir(lr_scheduler) if n[0] != "_"
              and getattr(getattr(lr_scheduler, n), "__module__", None) == lr_scheduler.__name__
              and isinstance(getattr(lr_scheduler, n), type)]  # fmt: skip


@pytest.mark.parametrize("name", OPTIMIZERS)
@pytest.mark.parametrize("params", [3, "w", None, [3.0]], ids=["int", "str", "None", "floats"])
def test_every_optimizer_names_itself_and_params(name, params):
    cls = getattr(optim, name)
    with pytest.raises(TypeError) as info:
        cls(params, {}) if cls is optim.Optimizer else cls(params)
    msg = str(info.value)
    assert msg.startswith(f"{name}: params") and "Tensor" in msg, msg


# valid values of the schedulers' other required arguments, by argument name
SCHEDULER_ARGS = {"step_size": 1, "milestones": [1], "gamma": 0.9, "T_max": 2, "T_0": 2,
                  "lr_lambda": lambda epoch: 1.0, "max_lr": 0.1, "schedulers": []}  # fmt: skip


@pytest.mark.parametrize("name", SCHEDULERS)
def test_every_lr_scheduler_names_itself_and_the_optimizer(name):
    cls = getattr(lr_scheduler, name)
    params = list(inspect.signature(cls).parameters.values())[1:]
    kwargs = {p.name: SCHEDULER_ARGS[p.name] for p in params if p.default is p.empty}
    with pytest.raises(TypeError) as info:
        cls(3, **kwargs)
    msg = str(info.value)
    assert msg.startswith(f"{name}: optimizer") and "int" in msg, msg


def test_autodiff_names_itself_and_xp():
    for bad in ("numpy", 3, None, object()):
        with pytest.raises(TypeError, match=r"^Autodiff: xp must be an array namespace"):
            ad.Autodiff(bad)


TRANSFORMS = {
    "grad": lambda f: ad.grad(f),
    "value_and_grad": lambda f: ad.value_and_grad(f),
    "vjp": lambda f: ad.vjp(f, np.ones(2)),
    "jvp": lambda f: ad.jvp(f, (np.ones(2),), (np.ones(2),)),
    "jacobian": lambda f: ad.jacobian(f),
    "jacrev": lambda f: ad.jacrev(f),
    "jacfwd": lambda f: ad.jacfwd(f),
    "hessian": lambda f: ad.hessian(f),
    "hvp": lambda f: ad.hvp(f, (np.ones(2),), (np.ones(2),)),
    "vmap": lambda f: ad.vmap(f),
    "checkpoint": lambda f: ad.checkpoint(f),
    "custom_vjp": lambda f: ad.custom_vjp(f),
    "custom_jvp": lambda f: ad.custom_jvp(f),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_every_transform_names_itself_and_the_function(name):
    with pytest.raises(TypeError) as info:
        TRANSFORMS[name](3)
    msg = str(info.value)
    owner = "jacobian" if name == "jacrev" else name  # jacrev is jacobian, JAX's name
    assert msg.startswith(f"{owner}: f") and "callable" in msg and "int" in msg, msg
