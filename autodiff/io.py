"""Checkpoints: save and load nested training state as one ``.npz`` file.

A state is a nested structure of dicts (str or int keys), lists, tuples, Tensors,
arrays of any backend and Python scalars (int, float, bool, str, None): a model's
state dict, an optimizer's state dict (torch's layout), or both with an epoch.

Layout of the file (numpy's uncompressed ``.npz``, readable with plain numpy):
every array is one member, named ``a0``, ``a1``, ... in the order met, and the
member ``__autodiff_meta__`` holds UTF-8 JSON (as a uint8 array, so nothing is
pickled) with the format name and version, the structure (``tree``) and, per
array, its dtype, shape and CRC-32. Floats are stored by their IEEE bits, so the
round trip is bit exact (NaN payloads and -0.0 included).

Types that come back as their base type: dict subclasses (``OrderedDict``) as
dict, named tuples as tuple. NumPy scalars (``np.float32(1)``) come back as such
(or as 0-d arrays of ``xp``).
Tensors come back as arrays, or, with an autodiff namespace, as leaf Tensors:
leaves keep their ``requires_grad``, computed tensors come back as constants
(their graph is not saved).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
import zlib

__all__ = ["save", "load", "to_host", "FORMAT", "VERSION"]

FORMAT = "autodiff.checkpoint"
VERSION = 1
_META = "__autodiff_meta__"


def to_host(x):
    """A numpy array with the values of ``x`` (any backend's array or a Tensor), on the host
    (see ``autodiff.backends.to_host``)."""
    from . import backends
    from .engine.tensor import Tensor

    return backends.to_host(x.data if isinstance(x, Tensor) else x)


# -- save ---------------------------------------------------------------------------------------


def _path(owner, path):
    """``path`` as a str or bytes path (a TypeError naming ``owner`` otherwise)."""
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(
            f"{owner}: path must be a str or os.PathLike, got {type(path).__name__}"
        ) from None


def save(state, path) -> None:
    """Write ``state`` (nested dicts/lists/tuples of arrays, Tensors and scalars) to ``path``.

    The write is atomic: a temporary file in the same directory is written,
    flushed and fsynced, then renamed onto ``path``; on any error it is removed
    and a file already at ``path`` is left untouched. ``path`` is used exactly as
    given (no ``.npz`` is appended).
    """
    import numpy as np

    _path("save", path)
    arrays: dict = {}
    info: dict = {}
    tree = _encode(state, "state", arrays, info, set())
    meta = {"format": FORMAT, "version": VERSION, "tree": tree, "arrays": info}
    blob = json.dumps(meta, separators=(",", ":"), allow_nan=False).encode("utf-8")
    members = {_META: np.frombuffer(blob, dtype=np.uint8), **arrays}

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    _remove_stale(directory, base)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{base}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **members)
            f.flush()
            os.fsync(f.fileno())
        _set_mode(tmp, path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _remove_stale(directory, base):
    """Remove the temporary files of earlier saves to this path whose process is gone
    (killed mid-write: ``kill -9`` leaves one as large as the checkpoint); a live
    process's (a concurrent save) is left alone. The writer's pid is in the name."""
    prefix = f".{base}."
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid = name[len(prefix) :].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


def _alive(pid):
    if pid == os.getpid():
        return True  # another thread of ours may be saving to this path
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, but isn't ours to signal
        return True
    return True


def _set_mode(tmp, path):
    # mkstemp makes the file private (0600); a checkpoint gets the mode of the file it
    # replaces, or the usual 0644.
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        mode = 0o644
    os.chmod(tmp, mode)


def _fsync_dir(directory):
    # Makes the rename itself durable; not possible on every platform (Windows).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _crc(a) -> int:
    import numpy as np

    # Over the C-order bytes, whatever the memory layout numpy stores.
    return zlib.crc32(np.ascontiguousarray(a).reshape(-1).view(np.uint8))


def _encode(x, where, arrays, info, active):
    """The JSON description of ``x``; arrays go to ``arrays`` under fresh keys."""
    import numpy as np

    from .engine.tensor import Tensor

    if x is None:
        return {"kind": "none"}
    if isinstance(x, bool):
        return {"kind": "bool", "value": x}
    if isinstance(x, int):
        return {"kind": "int", "value": int(x)}
    if isinstance(x, float):
        return {"kind": "float", "bits": struct.pack("<d", x).hex()}
    if isinstance(x, str):
        return {"kind": "str", "value": str(x)}
    if isinstance(x, (dict, list, tuple)):
        if id(x) in active:
            raise ValueError(f"save: {where} contains itself (a cycle); it can't be saved")
        active.add(id(x))
        try:
            if isinstance(x, dict):
                items = []
                for k, v in x.items():
                    if isinstance(k, bool) or not isinstance(k, (str, int)):
                        raise TypeError(
                            f"save: {where} has a key {k!r} of type {type(k).__name__}; "
                            "dict keys must be str or int"
                        )
                    kind = "str" if isinstance(k, str) else "int"
                    key = str(k) if kind == "str" else int(k)
                    items.append([kind, key, _encode(v, f"{where}[{k!r}]", arrays, info, active)])
                return {"kind": "dict", "items": items}
            kind = "tuple" if isinstance(x, tuple) else "list"
            items = [_encode(v, f"{where}[{i}]", arrays, info, active) for i, v in enumerate(x)]
            return {"kind": kind, "items": items}
        finally:
            active.discard(id(x))
    node = {"kind": "array"}
    if isinstance(x, Tensor):
        node["tensor"] = True
        # A computed tensor comes back as a constant: its history is not saved.
        node["requires_grad"] = bool(x.requires_grad and x.is_leaf)
        raw = x.data
    elif isinstance(x, np.generic):
        node["scalar"] = True
        raw = x
    elif _is_array(x):
        raw = x
    else:
        raise TypeError(
            f"save: {where} is a {type(x).__name__}, which a checkpoint can't hold "
            "(only dicts, lists, tuples, arrays, Tensors, int, float, bool, str and None)"
        )
    try:
        a = to_host(raw)
    except TypeError as exc:
        raise TypeError(f"save: {where}: {exc}") from exc
    if a.dtype.hasobject:
        raise TypeError(f"save: {where} is an array of Python objects, which needs pickle")
    key = f"a{len(arrays)}"
    arrays[key] = a
    info[key] = {"dtype": a.dtype.str, "shape": list(a.shape), "crc32": _crc(a)}
    node["key"] = key
    return node


def _is_array(x) -> bool:
    try:
        import array_api_compat
    except ImportError:  # pragma: no cover - a dependency of the project
        return hasattr(x, "__dlpack__")
    return array_api_compat.is_array_api_obj(x)


# -- load ---------------------------------------------------------------------------------------


def load(path, xp=None, *, device=None):
    """The state saved at ``path``, with numpy arrays or, given ``xp``, ``xp.asarray`` of them.

    ``xp`` may be an autodiff namespace (Tensors that were saved keep their
    ``requires_grad``) or a raw Array API namespace; ``device`` is passed on to
    ``xp.asarray``. Raises ``ValueError`` naming the file or the key when the file
    is not a checkpoint, or is truncated or altered.
    """
    import zipfile

    import numpy as np

    shown = _path("load", path)
    with open(path, "rb") as f:
        if not zipfile.is_zipfile(f):
            raise ValueError(
                f"load: {shown!r} is not an autodiff checkpoint: not a zip/npz archive "
                "(a different format, or a truncated file)"
            )
        f.seek(0)
        try:
            z = np.load(f, allow_pickle=False)
        except Exception as exc:
            raise ValueError(f"load: {shown!r} can't be opened as an npz archive: {exc}") from exc
        with z:
            meta = _read_meta(z, shown)
            names = set(z.files)
            expected = set(meta["arrays"]) | {_META}
            extra = sorted(names - expected)
            if extra:
                raise ValueError(f"load: {shown!r} has members its metadata doesn't list: {extra}")
            state = _decode(meta["tree"], "state", z, meta["arrays"], shown)
    return _convert(state, xp, device)


def _read_meta(z, shown):
    import numpy as np

    if _META not in z.files:
        raise ValueError(f"load: {shown!r} is not an autodiff checkpoint (no '{_META}' member)")
    try:
        raw = z[_META]
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError(f"metadata is a {raw.dtype} array of shape {raw.shape}")
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except Exception as exc:
        raise ValueError(f"load: {shown!r}: the metadata can't be read ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ValueError(f"load: {shown!r}: format {found!r}, expected {FORMAT!r}")
    if meta.get("version") != VERSION:
        raise ValueError(
            f"load: {shown!r}: checkpoint version {meta.get('version')!r}; this autodiff "
            f"reads version {VERSION}"
        )
    if not isinstance(meta.get("arrays"), dict) or "tree" not in meta:
        raise ValueError(f"load: {shown!r}: the metadata lacks 'tree' or 'arrays'")
    return meta


def _decode(node, where, z, info, shown):
    """The value described by ``node`` (see ``_encode``), reading arrays from ``z``."""
    try:
        kind = node["kind"]
        if kind == "none":
            return None
        if kind in ("bool", "int", "str"):
            value = node["value"]
            want = {"bool": bool, "int": int, "str": str}[kind]
            if type(value) is not want:
                raise ValueError(f"a {kind} holds {value!r}")
            return value
        if kind == "float":
            return struct.unpack("<d", bytes.fromhex(node["bits"]))[0]
        if kind == "dict":
            out = {}
            for key_kind, key, item in node["items"]:
                if (key_kind, type(key)) not in (("str", str), ("int", int)):
                    raise ValueError(f"bad key {key!r} of kind {key_kind!r}")
                out[key] = _decode(item, f"{where}[{key!r}]", z, info, shown)
            return out
        if kind in ("list", "tuple"):
            items = [
                _decode(v, f"{where}[{i}]", z, info, shown) for i, v in enumerate(node["items"])
            ]
            return tuple(items) if kind == "tuple" else items
        if kind == "array":
            return _read_array(node, where, z, info, shown)
        raise ValueError(f"unknown kind {kind!r}")
    except ValueError as exc:
        if str(exc).startswith("load: "):
            raise
        raise ValueError(f"load: {shown!r}: malformed metadata at {where}: {exc}") from exc
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"load: {shown!r}: malformed metadata at {where}: {exc!r}") from exc


class _Saved:
    """An array read back, with what the conversion to ``xp`` must restore."""

    __slots__ = ("array", "requires_grad")

    def __init__(self, array, requires_grad):
        self.array, self.requires_grad = array, requires_grad


def _read_array(node, where, z, info, shown):
    key = node["key"]
    rec = info.get(key)
    if not isinstance(rec, dict):
        raise ValueError(f"array member {key!r} has no dtype/shape/crc32 record")
    if key not in z.files:
        raise ValueError(f"load: {shown!r}: the array of {where} (member {key!r}) is missing")
    try:
        a = z[key]
    except Exception as exc:
        raise ValueError(
            f"load: {shown!r}: the array of {where} (member {key!r}) can't be read, the file "
            f"may be truncated or altered: {exc}"
        ) from exc
    if a.dtype.str != rec["dtype"] or list(a.shape) != list(rec["shape"]):
        raise ValueError(
            f"load: {shown!r}: the array of {where} (member {key!r}) has dtype {a.dtype.str} "
            f"and shape {a.shape}; the metadata records {rec['dtype']} and {tuple(rec['shape'])}"
        )
    if _crc(a) != rec["crc32"]:
        raise ValueError(
            f"load: {shown!r}: the array of {where} (member {key!r}) fails its checksum: the "
            "file was altered or damaged"
        )
    if node.get("scalar"):
        a = a[()]
    if node.get("tensor"):
        return _Saved(a, bool(node.get("requires_grad")))
    return a


def _convert(state, xp, device):
    """``state`` with every array turned into ``xp.asarray(array)`` (numpy when ``xp`` is None)."""
    from .engine.tensor import Tensor

    if isinstance(state, dict):
        return {k: _convert(v, xp, device) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_convert(v, xp, device) for v in state)
    if isinstance(state, _Saved):
        out = _convert(state.array, xp, device)
        if state.requires_grad and isinstance(out, Tensor):
            out.requires_grad = True
        return out
    if xp is not None and _is_numpy_value(state):
        return xp.asarray(state) if device is None else xp.asarray(state, device=device)
    return state


def _is_numpy_value(x) -> bool:
    import numpy as np

    return isinstance(x, (np.ndarray, np.generic))
