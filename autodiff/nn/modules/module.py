"""``Module``: a tree of layers holding parameters, as ``torch.nn.Module``.

A tensor assigned to a module attribute is a *parameter* when it is a leaf that
requires grad; a module assigned to one is a child. ``register_buffer`` adds
state that is saved but not trained. Every walk over the tree is iterative.

Here too: ``Sequential`` and ``ModuleList``, and what layers build their parameters
with (``factory``, ``sizes``, ``flags``, ``parameter``, ``uniform_parameter``).
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple

from ... import checks
from ...backends import device_of
from ...dtypes import FLOATING, dtype_in, dtype_name, get_default_dtype
from ...engine import tracing
from ...engine.errors import add_op_name
from ...engine.grad_mode import no_grad
from ...engine.hooks import RemovableHandle
from ...engine.namespace import move_leaf
from ...engine.tensor import Tensor
from .. import init

__all__ = ["Module", "Sequential", "ModuleList", "default_namespace"]

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def default_namespace(xp=None, owner="Module"):
    """The differentiable namespace modules are created on: ``Autodiff(xp)``,
    ``Autodiff(numpy)`` when ``xp`` is None; anything but a namespace (with ``asarray``)
    is a TypeError naming ``owner``."""
    from ...engine.namespace import Autodiff

    if xp is None:
        import numpy

        xp = numpy
    elif isinstance(xp, str) or not hasattr(xp, "asarray"):
        raise TypeError(
            f"{owner}: xp must be an array namespace (numpy, Autodiff(numpy), ...) or None, "
            f"got {xp!r} ({type(xp).__name__})"
        )
    return Autodiff(xp)


_dtype_name, _dtype_in = dtype_name, dtype_in


def _check_dtypes(module, args):
    """A TypeError naming the module and both dtypes if a floating input's dtype is not
    its parameters' (as torch): NumPy would promote float32 parameters to float64 data
    silently, computing the whole model in the input's precision."""
    want = next((p.dtype for p in module._parameters.values() if p is not None), None)
    for a in args:
        have = getattr(a, "dtype", None)
        if have is None or want is None or have == want:
            continue
        try:
            have_name, want_name = dtype_name(have, ""), dtype_name(want, "")
        except (TypeError, ValueError):  # no dtype of the standard: the op decides
            continue
        if have_name in FLOATING and have_name != want_name:
            raise TypeError(
                f"{type(module).__name__}: the input has dtype {have_name} but the "
                f"module's parameters are {want_name}; cast the input "
                f"(xp.astype(x, xp.{want_name})) or the module "
                f"(module.to(dtype='{have_name}')), or make new modules {have_name} "
                f"with autodiff.set_default_dtype('{have_name}')"
            )


# what forward reads of an array argument (the standard's attributes)
_ARRAY_ATTRIBUTES = frozenset(("shape", "ndim", "dtype", "device", "size", "T", "mT",
                               "__array_namespace__", "to_device"))  # fmt: skip


def _argument_named(module, exc, args, kwargs):
    """The name, in ``module.forward``'s signature, of the argument whose array
    attribute the AttributeError ``exc`` failed to read (None if it is no argument, or
    is an array, or the attribute is no array's: the error is another one)."""
    obj = getattr(exc, "obj", None)
    if obj is None or hasattr(obj, "__array_namespace__"):
        return None
    if getattr(exc, "name", None) not in _ARRAY_ATTRIBUTES:
        return None
    import inspect

    names = [p.name for p in inspect.signature(module.forward).parameters.values()]
    given = dict(zip(names, args), **kwargs)
    return next((k for k, v in given.items() if v is obj), None)


def _name_module(exc, module):
    """Prefix an error raised by a module's call with the module's class name, once:
    the innermost module names itself (``Linear: nn.linear: ...``), the enclosing
    ones leave it as it is."""
    if getattr(exc, "_autodiff_module", False):
        return
    add_op_name(exc, type(module).__name__)
    try:
        exc._autodiff_module = True
    except AttributeError:  # an exception type with slots: named, not marked
        pass


class Module:
    """Base class of layers: override ``forward``; call ``super().__init__()`` first."""

    def __init__(self):
        d = self.__dict__
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_modules"] = {}
        d["training"] = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: forward is not defined")

    # (pre hooks, forward hooks), each {handle id: (hook, with_kwargs)}: set on the
    # instance by the first register_forward_*hook, so a call without hooks tests one
    # attribute.
    _call_hooks = None

    def __call__(self, *args, **kwargs):
        if tracing.active[0] is not None:  # inside jit: a replay checks this module
            tracing.module_called(self)
        try:
            if self._call_hooks is None:
                if self._parameters:
                    _check_dtypes(self, args)
                return self.forward(*args, **kwargs)
            return self._call_with_hooks(args, kwargs)
        except (TypeError, ValueError, IndexError) as exc:
            _name_module(exc, self)
            raise
        except AttributeError as exc:
            # forward read .shape (.ndim...) of an argument that is no array: say which
            bad = _argument_named(self, exc, args, kwargs)
            if bad is None:
                raise
            error = TypeError(
                f"{type(self).__name__}: {bad} must be an array or a Tensor, got "
                f"{type(exc.obj).__name__}"
            )
            error._autodiff_module = True
            raise error from None

    def _call_with_hooks(self, args, kwargs):
        pre, post = self._call_hooks
        for hook, with_kwargs in list(pre.values()):
            if with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise TypeError(
                            f"{type(self).__name__}: a forward pre-hook with with_kwargs=True "
                            f"returns None or a pair (args, kwargs), got {type(result).__name__}"
                        )
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        if self._parameters:
            _check_dtypes(self, args)
        out = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(post.values()):
            result = hook(self, args, kwargs, out) if with_kwargs else hook(self, args, out)
            if result is not None:
                out = result
        return out

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before each ``forward``, as torch: a non-None result
        replaces the positional arguments (a non-tuple is one argument). With
        ``with_kwargs``, ``hook(module, args, kwargs)`` returns None or ``(args, kwargs)``.
        ``prepend`` runs it before the hooks already registered. Returns a handle with
        ``.remove()``; hooks are not part of ``state_dict``."""
        return self._add_hook(0, "register_forward_pre_hook", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args, output)`` after each ``forward``, as torch: a
        non-None result replaces the output (gradients then flow through what it
        computed). With ``with_kwargs``, ``hook(module, args, kwargs, output)``.
        ``prepend`` runs it before the hooks already registered. Returns a handle with
        ``.remove()``; hooks are not part of ``state_dict``."""
        return self._add_hook(1, "register_forward_hook", hook, prepend, with_kwargs)

    def _add_hook(self, which, owner, hook, prepend, with_kwargs):
        checks.function(owner, "hook", hook)
        checks.flag(owner, "prepend", prepend)
        checks.flag(owner, "with_kwargs", with_kwargs)
        hooks = self.__dict__.get("_call_hooks")
        if hooks is None:  # OrderedDict: weak-referenceable (the handle), move_to_end
            hooks = self.__dict__["_call_hooks"] = (OrderedDict(), OrderedDict())
        table = hooks[which]
        handle = RemovableHandle(table, (hook, bool(with_kwargs)))
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    # -- attributes ------------------------------------------------------------
    # Parameters, buffers and children live in their tables (the tree's walks read
    # those) and, the same objects, in the instance's __dict__: ``self.weight`` in a
    # forward is then a plain attribute read, not a __getattr__ fallback per call.
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes"
            )
        params, buffers, modules = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Tensor) and value.requires_grad and value.is_leaf:
            buffers.pop(name, None)
            modules.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params.pop(name, None)
            buffers.pop(name, None)
            modules[name] = value
        elif name in buffers:
            buffers[name] = value
        else:
            if name in params:
                if value is not None:
                    raise TypeError(
                        f"{type(self).__name__}.{name} is a parameter: assign a leaf tensor "
                        f"that requires grad (or None), not {type(value).__name__}"
                    )
                del params[name]
            modules.pop(name, None)
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # Reached only for names not in __dict__: tables filled directly (torch-style
        # ``self._parameters[name] = p``) still resolve.
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self.__dict__.pop(name, None)
                return
        object.__delattr__(self, name)

    def register_buffer(self, name, tensor):
        """Add state that ``state_dict`` saves and ``to`` moves, but that is not trained."""
        _check_name("register_buffer", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers[name] = tensor
        object.__setattr__(self, name, tensor)

    def add_module(self, name, module):
        """Add a child module under ``name``."""
        _check_name("add_module", name)
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be a Module, got {type(module).__name__}")
        self._parameters.pop(name, None)
        self._buffers.pop(name, None)
        self._modules[name] = module
        object.__setattr__(self, name, module)

    # -- walking the tree --------------------------------------------------------
    def named_modules(self, prefix=""):
        """(qualified name, module) of this module and every descendant, depth first."""
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            children = [
                (f"{name}.{k}" if name else k, c) for k, c in m._modules.items() if c is not None
            ]
            stack.extend(reversed(children))

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for k, m in self._modules.items():
            if m is not None:
                yield k, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named(self, table, recurse):
        seen = set()
        items = self.named_modules() if recurse else [("", self)]
        for prefix, m in items:
            for k, t in getattr(m, table).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{prefix}.{k}" if prefix else k), t

    def named_parameters(self, recurse=True):
        """(qualified name, parameter) of every parameter, each once."""
        return self._named("_parameters", recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse):
            yield p

    def named_buffers(self, recurse=True):
        return self._named("_buffers", recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse):
            yield b

    def apply(self, fn):
        """Call ``fn`` on every descendant, then on this module (as torch)."""
        checks.function("Module.apply", "fn", fn)
        for m in reversed(list(self.modules())):
            fn(m)
        return self

    # -- modes and gradients -------------------------------------------------------
    def train(self, mode=True):
        """Training mode (dropout active) for this module and its descendants."""
        mode = checks.flag("Module.train", "mode", mode)
        for m in self.modules():
            m.__dict__["training"] = bool(mode)
        return self

    def eval(self):
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        """Clear the gradients of every parameter."""
        checks.flag("Module.zero_grad", "set_to_none", set_to_none)
        if tracing.active[0] is not None:  # inside jit: the gradients are the program's
            tracing.module_called(self)
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = p.__array_namespace__().zeros_like(p.grad)

    @property
    def xp(self):
        """The namespace of this module's tensors (None for a module without any)."""
        for _, t in self._named("_parameters", True):
            return t.__array_namespace__()
        for _, t in self._named("_buffers", True):
            return t.__array_namespace__()
        return None

    # -- state ------------------------------------------------------------------
    def state_dict(self):
        """{qualified name: tensor} of every parameter and buffer (detached, shared)."""
        state = {}
        for prefix, m in self.named_modules():
            for table in (m._parameters, m._buffers):
                for k, t in table.items():
                    if t is not None:
                        state[f"{prefix}.{k}" if prefix else k] = t.detach()
        return state

    def _slots(self):
        """{qualified name: (module, table, attribute)} of every parameter and buffer."""
        slots = {}
        for prefix, m in self.named_modules():
            for table in ("_parameters", "_buffers"):
                for k, t in getattr(m, table).items():
                    if t is not None:
                        slots[f"{prefix}.{k}" if prefix else k] = (m, table, k)
        return slots

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into the parameters and buffers (same tensors, same buffers).

        Values may be tensors of any namespace or raw arrays (as ``autodiff.load``
        returns). Missing or unexpected keys raise when ``strict``; a wrong shape
        always raises. Returns ``(missing_keys, unexpected_keys)``.
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"load_state_dict: expected a dict, got {type(state_dict).__name__}")
        checks.flag("load_state_dict", "strict", strict)
        slots = self._slots()
        missing = [k for k in slots if k not in state_dict]
        unexpected = [k for k in state_dict if k not in slots]
        errors = []
        if strict and missing:
            errors.append("missing keys: " + ", ".join(repr(k) for k in missing))
        if strict and unexpected:
            errors.append("unexpected keys: " + ", ".join(repr(k) for k in unexpected))
        for k, (m, table, attr) in slots.items():
            if k not in state_dict:
                continue
            target = getattr(m, table)[attr]
            shape = tuple(getattr(state_dict[k], "shape", ()))
            if shape != tuple(target.shape):
                errors.append(
                    f"{k!r} has shape {shape} in the state dict, {tuple(target.shape)} in the model"
                )
            elif _is_complex(state_dict[k]) and not _is_complex(target):
                errors.append(
                    f"{k!r} is complex ({state_dict[k].dtype}) in the state dict, real "
                    f"({target.dtype}) in the model: its imaginary part would be dropped"
                )
        if errors:
            raise RuntimeError(f"load_state_dict for {type(self).__name__}: " + "; ".join(errors))
        # every value converted before any is written: a bad one changes nothing
        pending = []
        for k, (m, table, attr) in slots.items():
            if k in state_dict:
                target = getattr(m, table)[attr]
                pending.append((target, self._converted(k, state_dict[k], target)))
        with no_grad():
            for target, value in pending:
                target[...] = value
        return IncompatibleKeys(missing, unexpected)

    def _converted(self, key, value, target):
        """``value`` as an array of ``target``'s namespace, dtype and device."""
        if isinstance(value, Tensor):
            value = value.detach()
        xp = target.__array_namespace__()
        try:
            return xp.asarray(value, dtype=target.dtype, device=device_of(target))
        except Exception as exc:
            raise TypeError(
                f"load_state_dict for {type(self).__name__}: {key!r} can't be read as "
                f"{target.dtype} ({type(value).__name__}: {exc}); nothing was loaded"
            ) from exc

    def to(self, xp=None, *, dtype=None, device=None):
        """Move every parameter and buffer to namespace ``xp`` (raw or differentiable),
        ``device`` and/or floating ``dtype``, keeping the same Tensor objects.

        Optimizers made before keep state on the old namespace: make them after.
        A bad ``xp`` or ``dtype`` is refused before anything moves.
        """
        target = None if xp is None else default_namespace(xp, "Module.to")
        tensors = [
            t
            for m in self.modules()
            for table in (m._parameters, m._buffers)
            for t in table.values()
            if t is not None
        ]
        if dtype is not None:
            _dtype_name(dtype, "Module.to", floating=True)
            spaces = [target] if target is not None else [t.__array_namespace__() for t in tensors]
            for ns in {id(n): n for n in spaces}.values():
                _dtype_in(ns, dtype, "Module.to", floating=True)
        for t in tensors:
            _move(t, target, dtype, device)
        return self

    # -- display ------------------------------------------------------------------
    def extra_repr(self):
        """The arguments shown between the parentheses of this module's repr."""
        return ""

    def __repr__(self):
        # Children are rendered before their parents, without recursion.
        order = list(self.modules())
        text = {}
        for m in reversed(order):
            extra = m.extra_repr()
            lines = []
            for k, c in m._modules.items():
                child = text.get(id(c), repr(c)).replace("\n", "\n  ")
                lines.append(f"  ({k}): {child}")
            if not lines:
                text[id(m)] = f"{type(m).__name__}({extra})"
                continue
            # As torch: with children, the arguments go on their own line first.
            head = [f"  {e}" for e in extra.split("\n")] if extra else []
            text[id(m)] = f"{type(m).__name__}(\n" + "\n".join(head + lines) + "\n)"
        return text[id(self)]


def _move(t, target, dtype, device):
    """Rebind leaf ``t`` onto a buffer in namespace ``target`` (a differentiable one, or
    None: its own)/``device``/``dtype`` in place."""
    src = t.__array_namespace__()
    target = src if target is None else target
    floating = src.isdtype(t.dtype, "real floating")
    if dtype is not None and floating:
        new_dtype = _dtype_in(target, dtype, "Module.to")
    elif target is not src:
        new_dtype = _dtype_in(target, t.dtype, "Module.to")
    else:
        new_dtype = t.dtype

    def convert(a):
        kw = {"dtype": new_dtype}
        if device is not None:
            kw["device"] = device
        return target.asarray(a.detach(), **kw)

    rg = t.requires_grad
    new = convert(t)
    grad = None if t.grad is None else convert(t.grad)
    move_leaf(t, new, grad, rg)


def _check_name(owner, name):
    """A child's or buffer's name: a non-empty str without a dot (as torch)."""
    if not isinstance(name, str):
        raise TypeError(f"{owner}: name must be a str, got {name!r} ({type(name).__name__})")
    if not name or "." in name:
        raise ValueError(f"{owner}: name must be non-empty and hold no '.', got {name!r}")


class _Container(Module):
    """Children numbered "0", "1", ...: indexing, len, iteration, append."""

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return type(self)(mods[i]) if isinstance(self, ModuleList) else Sequential(*mods[i])
        return mods[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules.values()))

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self


class Sequential(_Container):
    """Modules called one after the other: ``Sequential(Linear(4, 8), ReLU(), ...)``."""

    def __init__(self, *modules):
        super().__init__()
        items = modules[0].items() if len(modules) == 1 and isinstance(modules[0], dict) else None
        for k, m in items if items is not None else enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(
                    f"Sequential: module {k!r} must be a Module, got {type(m).__name__}"
                )
            self.add_module(str(k), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(_Container):
    """A list of modules whose parameters the parent module sees."""

    def __init__(self, modules=()):
        super().__init__()
        if isinstance(modules, Module) or not hasattr(modules, "__iter__"):
            raise TypeError(
                f"ModuleList: modules must be an iterable of Modules, got {type(modules).__name__}"
            )
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"ModuleList: module {i} must be a Module, got {type(m).__name__}")
            self.append(m)


def _is_complex(a):
    """Whether an array (of any library) or Tensor holds complex values."""
    return "complex" in str(getattr(a, "dtype", ""))


# -- what layers build their parameters with ---------------------------------------------
def factory(xp, dtype, device, owner="Module", generator=None):
    """(namespace, dtype, device) a layer creates its parameters with; ``xp``, ``dtype``
    and ``generator`` checked, errors naming ``owner``."""
    xp = default_namespace(xp, owner)
    init.check_generator(owner, generator)
    dtype = _dtype_in(xp, get_default_dtype() if dtype is None else dtype, owner)
    return xp, dtype, device


def sizes(name, positive=(), **counts):
    """Check a layer's sizes once, at construction: each an int (a TypeError otherwise)
    >= 0, those named in ``positive`` >= 1 (a ValueError otherwise), naming the layer and
    the argument."""
    for what, v in counts.items():
        checks.integer(name, what, v, low=1 if what in positive else 0)


def flags(name, **values):
    """Check a layer's bool options once, at construction (a TypeError naming the layer
    and the argument)."""
    for what, v in values.items():
        checks.flag(name, what, v)


def parameter(xp, shape, dtype, device):
    """A zero leaf that requires grad, to be filled by an ``init`` function."""
    return xp.zeros(shape, dtype=dtype, device=device, requires_grad=True)


def uniform_parameter(xp, shape, bound, dtype, device, generator):
    """A parameter drawn from U(-bound, bound) (torch's default for most layers)."""
    return init.uniform_(parameter(xp, shape, dtype, device), -bound, bound, generator)
