"""The benchmark cases run (two timed repeats each): each first checks that autodiff,
hand-written NumPy and PyTorch (when installed) agree on the losses or gradients,
so this is also an end-to-end check of autodiff against hand-derived backward passes."""

import re

import pytest

from benchmarks import _case, _timing
from benchmarks.__main__ import CASES, main


@pytest.fixture(autouse=True)
def _reset():
    yield
    _case.SKIP.clear()
    _timing.ALONE.clear()


def _rows(out):
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| ([^|]+?) \| ([0-9.]+) \|", out, re.M)}


@pytest.mark.parametrize("case", CASES)
def test_case_runs_and_reports_each_implementation(case, capsys, monkeypatch):
    if case in ("transformer", "resnet"):  # their weights come from torch
        pytest.importorskip("torch", reason=f"the {case} case takes torch's weights")
    if case == "dask_logistic":  # tiny data (it still starts a 2-worker LocalCluster)
        pytest.importorskip("distributed", reason="the dask_logistic case needs distributed")
        from benchmarks import dask_logistic

        monkeypatch.setattr(dask_logistic, "CLUSTER", (3, 400, 5))
        monkeypatch.setattr(dask_logistic, "IN_MEMORY", (3, 400, 5))
    main([case, "--repeats", "2"])
    rows = _rows(capsys.readouterr().out)
    # complex_chain: per dtype
    assert any(k.startswith(("autodiff (numpy)", "autodiff (dask)")) for k in rows)
    assert all(float(v) > 0 for v in rows.values())


def test_alone_times_in_blocks_and_without_leaves_torch_out(capsys):
    main(["mlp", "--repeats", "2", "--alone", "--without", "torch"])
    out = capsys.readouterr().out
    assert "runs of each alone" in out
    assert set(_rows(out)) == {"autodiff (numpy)", "autodiff jit (numpy)", "hand-written NumPy"}
