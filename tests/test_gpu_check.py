"""``scripts/gpu_check.py`` on a machine without a GPU: it exits 2 with the reason, and
its sections run end to end on NumPy standing in for CuPy (one short case each)."""

import importlib.util
import signal
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.py"


@pytest.fixture
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_exits_2_without_cupy():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the script would run the GPU checks")
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "CuPy is not installed" in proc.stderr and "nothing was run" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("count", [RuntimeError("cudaErrorNoDevice"), 0])
def test_exits_2_without_a_device(gpu_check, monkeypatch, capsys, count):
    def get_count():
        if isinstance(count, Exception):
            raise count
        return count

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_count))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(SystemExit) as exc:
        gpu_check.preflight()
    assert exc.value.code == 2
    assert "no CUDA device" in capsys.readouterr().err


def _numpy_as_cupy():
    """numpy (so Autodiff resolves it to the numpy backend) with what the script asks of
    cupy: a device to synchronize, a memory pool, device properties."""
    shim = types.ModuleType("numpy")
    shim.__dict__.update({k: v for k, v in vars(np).items() if not k.startswith("__")})
    shim.__version__ = "stand-in"
    device = types.SimpleNamespace(id=0, synchronize=lambda: None)
    shim.cuda = types.SimpleNamespace(
        Device=lambda *a: device,
        runtime=types.SimpleNamespace(
            getDeviceProperties=lambda i: {"name": b"CPU stand-in"},
            runtimeGetVersion=lambda: 12040,
        ),
    )
    pool = types.SimpleNamespace(free_all_blocks=lambda: None, total_bytes=lambda: 0)
    shim.get_default_memory_pool = lambda: pool
    return shim


def test_sections_run_and_write_markdown(gpu_check, monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_check, "preflight", _numpy_as_cupy)
    monkeypatch.setattr(gpu_check, "BACKEND", "numpy")
    monkeypatch.chdir(ROOT)  # main() moves to the checkout; this puts it back after
    old = signal.getsignal(signal.SIGALRM)
    out = tmp_path / "RESULTS.md"
    try:
        rc = gpu_check.main(["--skip", "tests", "--bench", "mlp:8", "--bench", "attention:2",
                             "--op", "exp", "--op", "nn.conv2d", "--out", str(out),
                             "--budget", "120"])  # fmt: skip
    finally:
        signal.signal(signal.SIGALRM, old)
    text = out.read_text()
    assert rc == 0, text
    assert "CPU stand-in" in text and "CUDA runtime 12.4" in text
    assert "| mlp | 8 |" in text and "| attention | 2 |" in text
    assert (
        "Target (mlp and cnn at batch 1024 within 1.5x of PyTorch CUDA eager): not measured" in text
    )
    assert "2 of 2 ops" in text and "0 failed" in text


def test_time_guard_writes_partial_results(gpu_check, monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_check, "preflight", _numpy_as_cupy)
    monkeypatch.setattr(gpu_check, "BACKEND", "numpy")
    monkeypatch.chdir(ROOT)
    old = signal.getsignal(signal.SIGALRM)
    out = tmp_path / "RESULTS.md"
    try:
        rc = gpu_check.main(["--skip", "tests", "--bench", "mlp:8", "--out", str(out),
                             "--budget", "3"])  # fmt: skip
    finally:
        signal.signal(signal.SIGALRM, old)
    text = out.read_text()
    assert rc == 1
    assert "not run: time guard" in text
