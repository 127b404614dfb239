"""``Parameter``, ``ModuleDict``, ``ParameterList`` and ``ParameterDict``, as torch.nn.

A parameter is what a module trains: a leaf tensor that requires grad. ``Parameter(t)``
makes one of ``t``'s values (sharing its buffer, as torch), and
``isinstance(x, nn.Parameter)`` holds for every such leaf.
"""

from __future__ import annotations

from ... import checks
from ...engine.tensor import Tensor
from .module import Module, _check_name, default_namespace

__all__ = ["Parameter", "ModuleDict", "ParameterList", "ParameterDict"]


class _ParameterType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.is_leaf and obj.requires_grad


class Parameter(metaclass=_ParameterType):
    """``Parameter(data=None, requires_grad=True)``: a leaf Tensor holding ``data`` (a
    Tensor, or an array of any library: then of ``Autodiff(numpy)`` for NumPy, of its
    own namespace otherwise), sharing its buffer; an empty float32 one for None."""

    def __new__(cls, data=None, requires_grad=True):
        checks.flag("Parameter", "requires_grad", requires_grad)
        if data is None:
            xp = default_namespace(owner="Parameter")
            t = xp.zeros((0,), dtype=xp.float32)
        elif isinstance(data, Tensor):
            t = data.detach()
        else:
            from ...engine.namespace import recorder_of

            try:
                t = recorder_of(data).wrap(data)
            except TypeError:
                raise TypeError(
                    f"Parameter: data must be a Tensor or an array, got {type(data).__name__}"
                ) from None
        if requires_grad:
            t.requires_grad = True  # refused, clearly, for integer dtypes
        return t


def _as_parameter(owner, value):
    if value is None or isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor) and value.requires_grad:
        raise ValueError(
            f"{owner}: a parameter must be a leaf (this tensor was computed from others); "
            "pass .detach() or nn.Parameter(t)"
        )
    return Parameter(value)


class _Dict(Module):
    """The mapping side of ModuleDict and ParameterDict: entries in one table."""

    _table = ""

    def _entries(self):
        return getattr(self, self._table)

    def __getitem__(self, key):
        try:
            return self._entries()[key]
        except KeyError:
            raise KeyError(f"{type(self).__name__}: no entry {key!r}") from None

    def __delitem__(self, key):
        if key not in self._entries():
            raise KeyError(f"{type(self).__name__}: no entry {key!r}")
        delattr(self, key)

    def __len__(self):
        return len(self._entries())

    def __iter__(self):
        return iter(list(self._entries()))

    def __contains__(self, key):
        return key in self._entries()

    def keys(self):
        return list(self._entries())

    def values(self):
        return list(self._entries().values())

    def items(self):
        return list(self._entries().items())

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def clear(self):
        for key in list(self._entries()):
            del self[key]

    def update(self, entries):
        """Add (or replace) the entries of a mapping or of an iterable of pairs."""
        items = entries.items() if hasattr(entries, "items") else entries
        for pair in items:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"{type(self).__name__}.update: expected (name, value) pairs")
            self[pair[0]] = pair[1]


class ModuleDict(_Dict):
    """Modules by name, as torch's (insertion order kept; the parent sees their
    parameters)."""

    _table = "_modules"

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        _check_name("ModuleDict", key)
        self.add_module(key, module)


class ParameterDict(_Dict):
    """Parameters by name, as torch's; a tensor or array given is made a Parameter."""

    _table = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        _check_name("ParameterDict", key)
        setattr(self, key, _as_parameter("ParameterDict", value))


class ParameterList(Module):
    """Parameters by position ("0", "1", ... in the state dict), as torch's."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __getitem__(self, i):
        items = list(self._parameters.values())
        if isinstance(i, slice):
            return ParameterList(items[i])
        checks.integer("ParameterList", "index", i)
        if not -len(items) <= i < len(items):
            raise IndexError(f"ParameterList: index {i} out of range for {len(items)}")
        return items[i]

    def __setitem__(self, i, value):
        checks.integer("ParameterList", "index", i)
        n = len(self._parameters)
        if not -n <= i < n:
            raise IndexError(f"ParameterList: index {i} out of range for {n}")
        setattr(self, str(i % n), _as_parameter("ParameterList", value))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(list(self._parameters.values()))

    def append(self, value):
        setattr(self, str(len(self._parameters)), _as_parameter("ParameterList", value))
        return self

    def extend(self, values):
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(
                f"ParameterList: expected an iterable of tensors, got {type(values).__name__}"
            )
        for v in values:
            self.append(v)
        return self
