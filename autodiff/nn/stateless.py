"""``functional_call``: apply a module with given parameters and buffers, as
``torch.func.functional_call``, so a module is a function of its parameters::

    params = dict(model.named_parameters())
    grads = ad.grad(lambda p: loss_fn(nn.functional_call(model, p, (x,)), y))(params)
"""

from __future__ import annotations

from ..engine.tensor import Tensor
from .modules.module import Module

__all__ = ["functional_call"]


def functional_call(
    module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False
):
    """``module(*args, **kwargs)`` with the named parameters and buffers replaced by the
    given values (Tensors or arrays), for this call only: the module's own are put back
    afterwards, even on an error. Names the dicts leave out keep the module's values
    (``strict=True``: every one must be given); a name the module lacks is a ValueError.
    With ``tie_weights`` a value given for one of several names sharing a tensor (tied
    weights) replaces it under all of them, as torch."""
    owner = "functional_call"
    if not isinstance(module, Module):
        raise TypeError(f"{owner}: module must be an nn.Module, got {type(module).__name__}")
    dicts = (
        parameter_and_buffer_dicts
        if isinstance(parameter_and_buffer_dicts, (tuple, list))
        else (parameter_and_buffer_dicts,)
    )
    given = {}
    for d in dicts:
        if not isinstance(d, dict):
            raise TypeError(
                f"{owner}: parameters must be a dict of name -> tensor, got {type(d).__name__}"
            )
        for name, value in d.items():
            if name in given:
                raise ValueError(f"{owner}: {name!r} is given twice")
            given[name] = value
    slots = {}  # name -> (submodule, table, attribute)
    for prefix, m in module.named_modules():
        for table in ("_parameters", "_buffers"):
            for name in getattr(m, table):
                slots[f"{prefix}.{name}" if prefix else name] = (m, table, name)
    unknown = sorted(set(given) - set(slots))
    if unknown:
        raise ValueError(f"{owner}: {type(module).__name__} has no parameter or buffer {unknown}")
    if strict:
        missing = sorted(set(slots) - set(given))
        if missing:
            raise ValueError(f"{owner}: strict=True and no value is given for {missing}")
    if tie_weights:  # every name holding the same tensor as a given one gets its value
        by_tensor = {}
        for name, (m, table, attr) in slots.items():
            by_tensor.setdefault(id(getattr(m, table)[attr]), []).append(name)
        for name in list(given):
            m, table, attr = slots[name]
            for other in by_tensor[id(getattr(m, table)[attr])]:
                given.setdefault(other, given[name])
    rec = module.xp
    saved = []
    try:
        for name, value in given.items():
            m, table, attr = slots[name]
            old = getattr(m, table)[attr]
            if value is not None and not isinstance(value, Tensor):
                value = rec.asarray(value)  # a raw array: a constant of the module's namespace
            if old is not None and value is not None and tuple(value.shape) != tuple(old.shape):
                raise ValueError(
                    f"{owner}: {name!r} has shape {tuple(value.shape)}, the module's "
                    f"{tuple(old.shape)}"
                )
            saved.append((m, table, attr, old, attr in m.__dict__))
            getattr(m, table)[attr] = value
            m.__dict__[attr] = value  # what a forward reads (see Module.__setattr__)
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for m, table, attr, old, had in reversed(saved):
            getattr(m, table)[attr] = old
            if had:
                m.__dict__[attr] = old
            else:
                m.__dict__.pop(attr, None)
