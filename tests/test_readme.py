"""The README keeps its promises: every Python block runs as written (each on its own,
in a fresh folder), the quick start is the two commands CI runs, and the gradcheck
transcript shows the counts the CLI gives today."""

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(language):
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


PYTHON = _blocks("python")


def test_the_readme_has_its_python_blocks():
    assert len(PYTHON) >= 5


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_block_runs(index, tmp_path, monkeypatch):
    code = PYTHON[index]
    if re.search(r"^import cupy", code, flags=re.M):
        if importlib.util.find_spec("cupy") is None:
            pytest.skip("the GPU block needs CuPy (pip install -e .[cuda])")
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("the GPU block needs a CUDA device")
    monkeypatch.chdir(tmp_path)  # blocks that save a checkpoint write it here
    exec(compile(code, f"README.md python block {index}", "exec"), {"__name__": "__readme__"})


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    quick = README[README.index("## Quick start") : README.index("## A first example")]
    (block,) = re.findall(r"```bash\n(.*?)```", quick, flags=re.S)
    commands = block.strip().splitlines()
    assert len(commands) == 2
    assert "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci
    # the optional libraries the comparisons need are installed by the test command itself
    assert "torch==2.13.0" in commands[1] and "jax==0.10.2" in commands[1]


def test_gradcheck_transcript_shows_todays_counts():
    transcript = README[README.index("$ gradcheck --op") :]
    transcript = transcript[: transcript.index("```")]
    first, _, second = transcript.partition("$ gradcheck -q")
    ops = re.findall(r"--op (\S+)", first.splitlines()[0])
    rows = dict(re.findall(r"^(\S+)\s+(\d+)\s+\S+\s+\S+\s+ok$", first, flags=re.M))
    assert set(rows) == set(ops)
    cli = [sys.executable, "-m", "gradcheck"]
    run = subprocess.run(
        [*cli, *(a for op in ops for a in ("--op", op))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    for op, checks in rows.items():
        assert re.search(rf"^{re.escape(op)}\s+{checks}\s", run.stdout, flags=re.M), run.stdout
    summary = re.compile(r"(\d+) ops, (\d+) checks on numpy")
    assert summary.search(first).groups() == summary.search(run.stdout).groups()
    everything = subprocess.run([*cli, "-q"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert everything.returncode == 0, everything.stdout
    assert summary.search(second).groups() == summary.search(everything.stdout).groups()
