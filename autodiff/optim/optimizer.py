"""The base class of the optimizers and the pieces of their update rules they share.

Parameters are updated in place, on their own buffer: the user keeps the same
Tensor objects (and, on NumPy, the same ``ndarray``). All arithmetic is done on
the raw arrays of the backend with functions of the Array API standard, so the
optimizers run unchanged on NumPy, CuPy, array-api-strict and dask, and the state
(momentum buffers, moment estimates) lives on the parameter's device with its
dtype. No graph is ever recorded; each write bumps the parameter's version
counter, so a graph that saved the old value refuses to run backward instead of
giving a silently wrong gradient.

Every helper below returns the arrays it updates: the same objects where the
backend has in-place operators, new ones where arrays are immutable or lazy
(``x *= 2`` rebinds a dask array), so callers always store what they get back.
"""

from __future__ import annotations

import functools
import inspect
import numbers

from .. import checks
from .. import lazy as lazy_buffers
from ..engine import tracing
from ..engine.grad_mode import enable_grad
from ..engine.namespace import recorder_of
from ..engine.tensor import Tensor
from ..engine.versions import bump


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, numbers.Number)


@functools.cache
def _templates(cls) -> dict:
    """The keyword defaults of an optimizer's constructor: what each hyper-parameter's
    type must be (a number, a bool, a pair of numbers)."""
    return {
        k: p.default
        for k, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


class Optimizer:
    """Base class: parameter groups, per-parameter state, ``zero_grad``, ``state_dict``.

    ``params`` is an iterable of Tensors, or of dicts (parameter groups) with a
    ``"params"`` entry and per-group values overriding ``defaults``.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}  # parameter Tensor -> {name: raw array or number}
        self.param_groups: list[dict] = []
        expected = (
            f"{self._name}: params must be an iterable of Tensors or of dicts (parameter groups)"
        )
        if isinstance(params, (Tensor, dict, str)):
            raise TypeError(f"{expected}, got a single {type(params).__name__}")
        try:
            groups = list(params)
        except TypeError:
            raise TypeError(f"{expected}, got {type(params).__name__}") from None
        if not groups:
            raise ValueError(f"{self._name}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    @property
    def _name(self) -> str:
        return type(self).__name__

    def __repr__(self):
        lines = [f"{self._name} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    # -- parameter groups ------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (a dict with ``"params"``; missing values from defaults)."""
        name = self._name
        if not isinstance(param_group, dict):
            raise TypeError(
                f"{name}: a parameter group must be a dict, got {type(param_group).__name__}"
            )
        if "params" not in param_group:
            raise ValueError(f"{name}: a parameter group needs a 'params' entry")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            # A set has no stable order, so state_dict indices would not match.
            raise TypeError(f"{name}: parameters must be an ordered collection, not a set")
        params = list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        mine: set = set()
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{name}: params: parameter {i} of the group is a {type(p).__name__}, "
                    "not an autodiff Tensor"
                )
            if not p.is_leaf:
                raise ValueError(
                    f"{name}: parameter {i} of the group is not a leaf (it was computed "
                    "from other tensors); optimize the leaf, or use .detach()"
                )
            if not p.requires_grad:
                raise ValueError(
                    f"{name}: parameter {i} of the group does not require grad; "
                    "create it with requires_grad=True"
                )
            if id(p) in mine:
                raise ValueError(f"{name}: parameter {i} appears twice in the group")
            if id(p) in seen:
                raise ValueError(
                    f"{name}: parameter {i} of the group is already in another parameter group"
                )
            mine.add(id(p))
        group = {k: v for k, v in param_group.items() if k != "params"}
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._check_group(group)
        group["params"] = params
        self.param_groups.append(group)

    _nonnegative: tuple = ()  # the hyper-parameters that must be >= 0 (besides lr)

    def _check_group(self, group: dict) -> None:
        """Raise TypeError for a hyper-parameter of the wrong type (a number given as a
        string...), then ValueError for an invalid value (subclasses extend)."""
        name = self._name
        for key, default in _templates(type(self)).items():
            if key not in group:
                continue
            value = group[key]
            if isinstance(default, bool):
                if not (isinstance(value, numbers.Integral) and value in (0, 1)):  # as torch
                    checks.flag(name, key, value)
            elif isinstance(default, numbers.Real):
                checks.number(name, key, value)
            elif isinstance(default, tuple):
                if not isinstance(value, (tuple, list)) or len(value) != len(default):
                    raise TypeError(
                        f"{name}: {key} must be a pair of numbers, got {value!r} "
                        f"({type(value).__name__})"
                    )
                for i, v in enumerate(value):
                    checks.number(name, f"{key}[{i}]", v)
            # None and other defaults: checked where they are used
        checks.number(name, "lr", group["lr"], 0)
        for key in self._nonnegative:
            checks.number(name, key, group[key], 0)
        for i, b in enumerate(group.get("betas", ())):
            checks.number(name, f"betas[{i}]", b, 0, 1, open_high=True)

    def _require(self, ok, message: str) -> None:
        if not ok:
            raise ValueError(f"{self._name}: {message}")

    # -- stepping --------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients: to None (default), or to zeros in place."""
        tracing.optimizer_called(self)  # inside jit: its state is the program's
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                elif g.is_leaf:  # in place: code holding the grad buffer sees zeros
                    g.data = recorder_of(p).backend.set_(g.data, ..., 0)
                    bump(g)
                else:  # a grad with history (create_graph=True): cut it, as torch does
                    rec = recorder_of(p)
                    p.grad = rec.wrap(rec.backend.zeros_like(g.data))

    def step(self, closure=None):
        """One update of every parameter that has a gradient (others are skipped).

        ``closure`` (optional) re-evaluates the model and returns the loss; it is
        called with grad recording on and its value returned.
        """
        tracing.optimizer_called(self)
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        lazy = []  # the parameters on lazy backends: persisted together after the loop
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.data
                if g.shape != p.data.shape:
                    raise ValueError(
                        f"{self._name}: a gradient has shape {g.shape}, its parameter "
                        f"has shape {p.data.shape}"
                    )
                # The update returns the new buffer: the same object wherever the
                # backend has in-place operators, a new one where arrays are immutable.
                state = self.state.setdefault(p, {})
                rec = recorder_of(p)
                if rec.is_complex(p.data.dtype):
                    p.data = self._complex_update(rec, p, g, group, state)
                else:
                    p.data = self._update(p, g, group, state)
                bump(p)
                if _lazy(rec.backend):
                    lazy.append(p)
        if lazy:
            self._persist(lazy)
        return loss

    def _persist(self, params) -> None:
        """Persist the new values of ``params`` and their state, one call per backend."""
        by_backend: dict = {}
        for p in params:
            B = recorder_of(p).backend
            by_backend.setdefault(id(B), (B, []))[1].append(p)
        for B, ps in by_backend.values():
            # with the buffers this step's forward wrote (BatchNorm's statistics)
            _persist(B, ps + lazy_buffers.take(B), [self.state[p] for p in ps])

    def _complex_update(self, rec, p, g, group, state):
        """A complex parameter is updated as the pairs (real, imaginary) of its values,
        as torch does (``view_as_real``): Adam's moments are per part, not |g|^2. Its
        state holds those pairs (shape + (2,))."""
        B = rec.backend

        def pairs(a):
            return B.stack([B.real(a), B.imag(a)], axis=-1)

        new = self._update(rec.wrap(pairs(p.data)), pairs(g), group, state)
        z = B.astype(new[..., 0], p.data.dtype) + B.astype(new[..., 1], p.data.dtype) * 1j
        if B.is_array(p.data) and hasattr(p.data, "__setitem__"):
            try:
                p.data[...] = z  # the same buffer, where the backend writes in place
                return p.data
            except (TypeError, ValueError):
                pass
        return z

    def _update(self, p, g, group, state):  # pragma: no cover - abstract
        """Update ``p.data`` from the raw gradient ``g``; return the new buffer."""
        raise NotImplementedError

    # -- checkpoints -----------------------------------------------------------
    def state_dict(self) -> dict:
        """A snapshot in torch's layout: ``{"state": {index: {...}}, "param_groups": [...]}``.

        Parameters are numbered in group order; arrays are copies (later steps
        do not change a saved state dict).
        """
        index: dict = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index[id(p)] = len(index)
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            if id(p) in index and s:
                B = recorder_of(p).backend
                state[index[id(p)]] = {
                    k: (B.asarray(v, copy=True) if _is_array(v) else v) for k, v in s.items()
                }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a :meth:`state_dict` (checked first; arrays copied onto each
        parameter's namespace, device and dtype). Nothing changes if it is invalid."""
        name = f"{self._name}.load_state_dict"
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
            raise ValueError(f"{name}: expected a dict with 'state' and 'param_groups'")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{name}: the state dict has {len(saved_groups)} parameter groups, "
                f"the optimizer has {len(self.param_groups)}"
            )
        by_index = {}
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(
                    f"{name}: parameter group {i} has {len(saved['params'])} parameters in "
                    f"the state dict and {len(group['params'])} in the optimizer"
                )
            by_index.update(zip(saved["params"], group["params"]))
        new_state = {}
        for idx, entry in state_dict["state"].items():
            p = by_index.get(idx)
            if p is None:
                raise ValueError(f"{name}: state of parameter {idx}, which no group lists")
            rec = recorder_of(p)
            B = rec.backend
            device = B.device_of(p.data)
            shape, dtype = _state_like(rec, p)
            if not isinstance(entry, dict):
                raise TypeError(
                    f"{name}: the state of parameter {idx} must be a dict, got "
                    f"{type(entry).__name__}"
                )
            restored = {}
            for key, value in entry.items():
                if not (_is_array(value) or value is None or isinstance(value, numbers.Number)):
                    raise TypeError(
                        f"{name}: state '{key}' of parameter {idx} must be an array or a "
                        f"number, got {type(value).__name__}"
                    )
                if _is_array(value):
                    if tuple(value.shape) != shape:
                        raise ValueError(
                            f"{name}: state '{key}' of parameter {idx} has shape "
                            f"{tuple(value.shape)}, the parameter's state has {shape}"
                        )
                    value = B.asarray(value, dtype=dtype, device=device, copy=True)
                restored[key] = value
            new_state[p] = restored
        new_groups = []
        for saved, group in zip(saved_groups, self.param_groups):
            new = {k: v for k, v in saved.items() if k != "params"}
            self._check_group({**self.defaults, **new})
            new["params"] = group["params"]
            new_groups.append(new)
        self.state = new_state
        self.param_groups = new_groups


def _pair(v):
    """A list or tuple as a tuple; anything else as given (the group check names it)."""
    return tuple(v) if isinstance(v, (list, tuple)) else v


def _state_like(rec, p):
    """The shape and dtype of ``p``'s state arrays: a complex parameter's hold
    (real, imaginary) pairs, as :meth:`Optimizer._complex_update` steps them."""
    shape, dtype = tuple(p.data.shape), p.data.dtype
    if rec.is_complex(dtype):
        return shape + (2,), rec.backend.real(p.data).dtype
    return shape, dtype


def _begin(p, g, group, state, names, decoupled=False):
    """A step's opening: on the first step the state (the step count 0 and a zero
    buffer like ``p`` per name in ``names``), then :func:`_gradient`. Returns
    ``(B, g, d)``: the backend, the gradient to use and the parameter's buffer."""
    B = recorder_of(p).backend
    if not state:
        state["step"] = 0
        for name in names:
            state[name] = B.zeros_like(p.data)
    g, d = _gradient(g, p.data, group, decoupled)
    return B, g, d


def _gradient(g, d, group, decoupled=False):
    """torch's opening of a step: ``g = -g`` under ``maximize``, then weight decay,
    L2 (``g + wd*p``, a new array, the gradient left untouched) or decoupled
    (``p *= 1 - lr*wd``). Returns ``(g, d)``."""
    if group["maximize"]:
        g = -g
    wd = group["weight_decay"]
    if wd != 0:
        if decoupled:
            d *= 1 - group["lr"] * wd
        else:
            g = g + wd * d
    return g, d


def _lerp(B, m, g, w):
    """``m.lerp_(g, w)`` with torch's two formulas (the small-weight one for w < 0.5)."""
    t = g - m
    if w < 0.5:
        t *= w
        m += t
        return m
    t *= 1 - w
    return B.asarray(g - t)  # numpy makes 0-d results scalars


def _square_avg(v, g, beta):
    """``v.mul_(beta).addcmul_(g, g, value=1-beta)``: ``v*beta + ((1-beta)*g)*g``."""
    t = g * (1 - beta)
    t *= g
    v *= beta
    v += t
    return v


def _descend(d, a, scale, denom):
    """``p.addcdiv_(a, denom, value=-scale)``: ``p - (a*scale)/denom``."""
    t = a * scale
    t /= denom
    d -= t
    return d


def _persist(B, tensors, states=()) -> None:
    """Compute and keep, on a lazy backend, the values of ``tensors`` and the arrays
    of ``states`` (dicts; lists in them too) in one ``persist``, so that the next
    step's graph starts from stored values and doesn't grow from step to step.
    Eager backends hold values already: callers skip this there (:func:`_lazy`)."""
    arrays, puts = [], []
    for t in tensors:
        arrays.append(t.data)
        puts.append(functools.partial(setattr, t, "data"))
    for state in states:
        for key, v in state.items():
            if _is_array(v):
                arrays.append(v)
                puts.append(functools.partial(state.__setitem__, key))
            elif isinstance(v, list):
                for i, a in enumerate(v):
                    if _is_array(a):
                        arrays.append(a)
                        puts.append(functools.partial(v.__setitem__, i))
    for put, value in zip(puts, B.persist(arrays)):
        put(value)


def _lazy(B) -> bool:
    """Whether ``B``'s arrays are lazy (task graphs computed on demand: dask's)."""
    return B.lazy
