"""Checkpoints (autodiff.io): round trips, bit exactness, atomic writes, damaged files."""

import collections
import json
import os
import textwrap
import zipfile

import numpy as np
import pytest

import autodiff as ad
from autodiff import io


def _same(a, b):
    """Equal structure, types, and arrays equal bit for bit (dtype, shape, bytes)."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        assert [type(k) for k in a] == [type(k) for k in b]
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    elif isinstance(a, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes()
    else:
        assert a == b


def _special_floats(dtype):
    a = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, 3.5], dtype=dtype)
    # A NaN with a payload: the round trip must keep its bits.
    bits = a.view(np.uint32 if dtype == np.float32 else np.uint64)
    bits[4] |= 0x5
    return a


def _arrays():
    return {
        "f32": _special_floats(np.float32),
        "f64": _special_floats(np.float64).reshape(7, 1),
        "i64": np.array([[-(2**63), 2**63 - 1], [0, 7]], dtype=np.int64),
        "bool": np.array([True, False, True]),
        "zero_d": np.array(2.5),
        "zero_d_int": np.array(-3, dtype=np.int32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        "strided": np.arange(20, dtype=np.int16)[::3],
        "u8": np.arange(5, dtype=np.uint8),
    }


def test_round_trip_is_bit_exact(tmp_path):
    state = _arrays()
    p = tmp_path / "ck.npz"
    io.save(state, p)
    back = io.load(p)
    _same({k: np.array(v, order="C") for k, v in state.items()}, back)


def test_nested_structure_and_scalars(tmp_path):
    state = {
        "model": {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)},
        "optimizer": {
            "state": {0: {"exp_avg": np.full(2, 0.5), "step": 3}, 1: {"step": 4}},
            "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1]}],
        },
        "epoch": 3,
        "scalars": [True, False, None, "text ✓", -0.0, float("nan"), float("-inf"), 10**30],
        "tuple": (1, [2, (3,)], ()),
        "empty": {"d": {}, "l": [], "t": ()},
        -1: "negative int key",
        "np_scalar": np.float32(1.25),
    }
    p = tmp_path / "ck.npz"
    io.save(state, str(p))
    back = io.load(p)
    assert back["np_scalar"] == np.float32(1.25) and type(back["np_scalar"]) is np.float32
    del state["np_scalar"], back["np_scalar"]
    _same(state, back)
    assert 0 in back["optimizer"]["state"] and "0" not in back["optimizer"]["state"]


def test_subclasses_come_back_as_base_types(tmp_path):
    Point = collections.namedtuple("Point", "x y")
    state = collections.OrderedDict(p=Point(1, 2))
    io.save(state, tmp_path / "ck")
    assert io.load(tmp_path / "ck") == {"p": (1, 2)}


def test_path_is_used_exactly(tmp_path):
    p = tmp_path / "weights.ckpt"
    io.save({"a": 1}, p)
    assert sorted(os.listdir(tmp_path)) == ["weights.ckpt"]
    # Plain numpy can read the file.
    with np.load(p, allow_pickle=False) as z:
        meta = json.loads(z["__autodiff_meta__"].tobytes())
    assert meta["format"] == io.FORMAT and meta["version"] == io.VERSION


def test_tensors_on_numpy(tmp_path):
    xp = ad.Autodiff(np)
    w = xp.asarray([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = xp.asarray([0.5, -0.5], dtype=xp.float32)
    y = xp.sum(w * w)  # a Tensor with history: only its values are saved
    io.save({"w": w, "b": b, "y": y}, tmp_path / "ck.npz")

    raw = io.load(tmp_path / "ck.npz")
    assert isinstance(raw["w"], np.ndarray) and raw["w"].tobytes() == w.data.tobytes()
    assert raw["y"].shape == () and raw["y"] == 30.0

    back = io.load(tmp_path / "ck.npz", xp)
    assert isinstance(back["w"], ad.Tensor) and back["w"].requires_grad
    assert not back["b"].requires_grad and back["b"].dtype == np.float32
    assert back["y"].requires_grad is False  # y was not a leaf that requires grad
    assert back["w"]._node is None
    np.testing.assert_array_equal(back["w"].data, w.data)

    plain = io.load(tmp_path / "ck.npz", np)
    assert type(plain["w"]) is np.ndarray


def test_tensors_on_array_api_strict(tmp_path):
    strict = pytest.importorskip("array_api_strict")
    xp = ad.Autodiff(strict)
    dev1 = strict.Device("device1")
    state = {
        "w": xp.asarray([1.0, -0.0, float("nan")], requires_grad=True),
        "i": xp.asarray([[1, 2]], dtype=xp.int32),
        "raw_on_device1": strict.asarray([True, False], device=dev1),
        "tensor_on_device1": xp.asarray([3.0], device=dev1),
    }
    p = tmp_path / "ck.npz"
    io.save(state, p)

    raw = io.load(p)
    assert raw["i"].dtype == np.int32 and raw["i"].tolist() == [[1, 2]]
    assert raw["raw_on_device1"].tolist() == [True, False]
    assert raw["w"].tobytes() == np.asarray([1.0, -0.0, np.nan]).tobytes()

    back = io.load(p, xp)
    assert back["w"].requires_grad and back["w"].dtype == xp.float64
    assert back["i"].dtype == xp.int32
    on1 = io.load(p, xp, device=dev1)
    assert on1["tensor_on_device1"].device == dev1
    raw_ns = io.load(p, strict)
    assert isinstance(raw_ns["i"], type(strict.asarray(0)))


def test_to_host():
    assert io.to_host(np.ones(2)) is not None
    a = np.arange(3.0)
    assert io.to_host(a) is a
    assert isinstance(io.to_host(np.float32(1)), np.ndarray)
    xp = ad.Autodiff(np)
    assert io.to_host(xp.asarray([1.0])) is not None
    with pytest.raises(TypeError, match="to_host"):
        io.to_host(object())


def test_to_host_from_strict_device1():
    strict = pytest.importorskip("array_api_strict")
    a = strict.asarray([1.5, 2.5], device=strict.Device("device1"))
    assert io.to_host(a).tolist() == [1.5, 2.5]


def test_unsupported_objects_name_the_key(tmp_path):
    p = tmp_path / "ck.npz"
    with pytest.raises(TypeError, match=r"state\['model'\]\['f'\].*function"):
        io.save({"model": {"f": lambda x: x}}, p)
    with pytest.raises(TypeError, match=r"state\['a'\]\[1\]"):
        io.save({"a": [1, {2, 3}]}, p)
    with pytest.raises(TypeError, match="dict keys must be str or int"):
        io.save({"a": {(1, 2): 3}}, p)
    with pytest.raises(TypeError, match="Python objects"):
        io.save({"o": np.array([None, 1], dtype=object)}, p)
    cyc = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match="cycle"):
        io.save({"c": cyc}, p)
    # Nothing is written when the state is refused.
    assert os.listdir(tmp_path) == []


def test_atomic_write_keeps_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "ck.npz"
    io.save({"w": np.arange(4.0), "epoch": 1}, p)
    before = p.read_bytes()

    real = np.lib.format.write_array
    calls = []

    def fail_on_second_array(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # halfway: one member already in the temp file
            raise OSError("disk full (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", fail_on_second_array)
    with pytest.raises(OSError, match="disk full"):
        io.save({"w": np.arange(5.0), "v": np.ones(3), "epoch": 2}, p)
    monkeypatch.undo()
    assert len(calls) == 2
    assert p.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["ck.npz"]
    assert io.load(p)["epoch"] == 1


def test_atomic_write_fails_at_fsync(tmp_path, monkeypatch):
    p = tmp_path / "ck.npz"
    io.save({"epoch": 1}, p)

    def boom(fd):
        raise OSError("fsync failed (simulated)")

    monkeypatch.setattr(io.os, "fsync", boom)
    with pytest.raises(OSError, match="fsync failed"):
        io.save({"epoch": 2}, p)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["ck.npz"]
    assert io.load(p) == {"epoch": 1}


def test_new_file_is_not_private(tmp_path):
    p = tmp_path / "ck.npz"
    io.save({"a": 1}, p)
    if os.name == "posix":
        assert os.stat(p).st_mode & 0o044 == 0o044


def _member_offset(path, name):
    """Byte offset of the data of zip member ``name`` (uncompressed) in the file."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name)
    raw = path.read_bytes()
    start = info.header_offset
    n_name = int.from_bytes(raw[start + 26 : start + 28], "little")
    n_extra = int.from_bytes(raw[start + 28 : start + 30], "little")
    return start + 30 + n_name + n_extra, info.file_size


def test_flipped_byte_in_array_data(tmp_path):
    p = tmp_path / "ck.npz"
    io.save({"model": {"w": np.arange(64.0)}}, p)
    offset, size = _member_offset(p, "a0.npy")
    raw = bytearray(p.read_bytes())
    raw[offset + size - 3] ^= 0x10  # inside the array's values, past the .npy header
    p.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"state\['model'\]\['w'\]"):
        io.load(p)


def test_tampered_array_of_the_same_shape(tmp_path):
    # Replace a member by a valid array of the same dtype and shape: only the
    # checksum can tell.
    p = tmp_path / "ck.npz"
    io.save({"w": np.arange(4.0)}, p)
    with np.load(p) as z:
        members = {k: z[k] for k in z.files}
    members["a0"] = np.arange(4.0) + 1
    with open(p, "wb") as f:
        np.savez(f, **members)
    with pytest.raises(ValueError, match=r"state\['w'\].*checksum"):
        io.load(p)


def test_wrong_dtype_or_missing_member(tmp_path):
    p = tmp_path / "ck.npz"
    io.save({"w": np.arange(4.0), "v": np.ones(2)}, p)
    with np.load(p) as z:
        members = {k: z[k] for k in z.files}
    with open(p, "wb") as f:
        np.savez(f, **{**members, "a0": np.arange(4, dtype=np.float32)})
    with pytest.raises(ValueError, match=r"state\['w'\].*dtype"):
        io.load(p)
    del members["a1"]
    with open(p, "wb") as f:
        np.savez(f, **members)
    with pytest.raises(ValueError, match=r"state\['v'\].*missing"):
        io.load(p)


@pytest.mark.parametrize("keep", [0.9, 0.5, 0.1])
def test_truncated_file(tmp_path, keep):
    p = tmp_path / "ck.npz"
    io.save({"w": np.arange(1000.0), "epoch": 3}, p)
    raw = p.read_bytes()
    p.write_bytes(raw[: int(len(raw) * keep)])
    with pytest.raises(ValueError, match="ck.npz"):
        io.load(p)


def test_not_a_zip(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello")
    with pytest.raises(ValueError, match=r"notes\.txt.*not a zip"):
        io.load(p)
    q = tmp_path / "array.npy"
    np.save(q, np.ones(3))
    with pytest.raises(ValueError, match="not a zip"):
        io.load(q)


def test_plain_npz_or_other_version(tmp_path):
    p = tmp_path / "plain.npz"
    np.savez(p, w=np.ones(2))
    with pytest.raises(ValueError, match="not an autodiff checkpoint"):
        io.load(p)
    q = tmp_path / "future.npz"
    io.save({"a": 1}, q)
    with np.load(q) as z:
        meta = json.loads(z["__autodiff_meta__"].tobytes())
    meta["version"] = 99
    blob = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(q, __autodiff_meta__=blob)
    with pytest.raises(ValueError, match="version 99"):
        io.load(q)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        io.load(tmp_path / "nope.npz")


def test_a_save_killed_mid_write_leaves_no_temporary_file_behind(tmp_path):
    # a child process starts a large save and is killed (-9) while it writes; the next
    # save to that path removes the dead writer's temporary file (a live one's stays)
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "ckpt.npz"
    child = textwrap.dedent(
        f"""
        import numpy as np, autodiff as ad, autodiff.io as io
        def slow(f, **members):
            f.write(b"x" * 1_000_000)
            f.flush()
            print("writing", flush=True)
            import time; time.sleep(60)
        np.savez = slow
        ad.save({{"w": np.zeros(10)}}, {str(path)!r})
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        stale = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert len(stale) == 1 and stale[0].stat().st_size > 0
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    alive = tmp_path / f".ckpt.npz.{os.getpid()}.keep.tmp"  # this process: alive
    alive.write_bytes(b"")
    t0 = time.monotonic()
    ad.save({"w": np.ones(3)}, path)
    assert time.monotonic() - t0 < 30
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([alive.name, "ckpt.npz"])
    np.testing.assert_array_equal(np.asarray(ad.load(path)["w"]), np.ones(3))
