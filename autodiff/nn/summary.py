"""``nn.summary(model, input_shape)``: the layers of a model, their output shapes and
parameter counts, as torchinfo prints them."""

from __future__ import annotations

import math

from .. import checks
from ..dtypes import get_default_dtype
from ..engine.grad_mode import no_grad
from .modules.module import Module

__all__ = ["summary", "Summary"]


class Summary:
    """The table ``summary`` returns: ``rows`` of (name, type, output shape, parameter
    count, whether it has parameters); ``str()`` is the text table, ``_repr_html_`` a
    notebook one."""

    def __init__(self, model, rows, total, trainable, input_shape):
        self.model, self.rows, self.input_shape = type(model).__name__, rows, input_shape
        self.total_params, self.trainable_params = total, trainable

    def _table(self):
        head = ("Layer (type)", "Output shape", "Param #")
        body = []
        for name, kind, shape, n, _ in self.rows:
            label = kind if not name else f"{'  ' * (name.count('.') + 1)}{name} ({kind})"
            body.append((label, str(shape), f"{n:,}"))
        return head, body

    def __str__(self):
        head, body = self._table()
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(3)]
        line = "-" * (sum(widths) + 6)
        a, b, c = widths

        def fmt(r):
            return f"{r[0]:<{a}}   {r[1]:<{b}}   {r[2]:>{c}}"

        out = [line, fmt(head), "=" * len(line)]
        out += [fmt(r) for r in body]
        out += [
            "=" * len(line),
            f"Total params: {self.total_params:,}",
            f"Trainable params: {self.trainable_params:,}",
            f"Non-trainable params: {self.total_params - self.trainable_params:,}",
            f"Input shape: {self.input_shape}",
            line,
        ]
        return "\n".join(out)

    __repr__ = __str__

    def _repr_html_(self):
        import html

        head, body = self._table()
        cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body
        )
        return (
            f"<table><tr>{cells}</tr>{rows}</table><p>Total params: {self.total_params:,}; "
            f"trainable: {self.trainable_params:,}</p>"
        )


def summary(model, input_shape, *, dtype=None, xp=None):
    """Run ``model`` once on zeros of ``input_shape`` (no graph recorded) and list every
    submodule that ran, in call order, with its output shape and the count of its
    parameters (a container's row counts its children's). ``xp``/``dtype``: those of the model's
    parameters by default."""
    if not isinstance(model, Module):
        raise TypeError(f"summary: model must be an nn.Module, got {type(model).__name__}")
    shape = checks.integers("summary", "input_shape", input_shape, 0)
    xp = model.xp if xp is None else xp
    if dtype is None:
        params = list(model.parameters())
        dtype = params[0].dtype if params else getattr(xp, get_default_dtype())
    names = {id(m): name for name, m in model.named_modules()}
    calls = []  # [module, output shape], in the order the calls began (torchinfo's)

    def enter(module, args):
        calls.append([module, None])
        stack.append(len(calls) - 1)

    def leave(module, args, output):
        out = output[0] if isinstance(output, (tuple, list)) else output
        calls[stack.pop()][1] = tuple(getattr(out, "shape", ()))

    stack = []
    handles = [m.register_forward_pre_hook(enter) for m in model.modules()]
    handles += [m.register_forward_hook(leave) for m in model.modules()]
    try:
        with no_grad():
            model(xp.zeros(shape, dtype=dtype))
    finally:
        for h in handles:
            h.remove()
    rows = []
    for module, out_shape in calls:
        name = names.get(id(module), "?")  # "" for the model itself
        own = list(module.parameters())
        count = sum(math.prod(p.shape) for p in own)
        rows.append((name, type(module).__name__, out_shape, count, bool(own)))
    total = sum(math.prod(p.shape) for p in model.parameters())
    trainable = sum(math.prod(p.shape) for p in model.parameters() if p.requires_grad)
    return Summary(model, rows, total, trainable, shape)
