"""Packaging: ``backends/`` is imported as ``autodiff.backends``, so a user's folder with
its own ``backends.py`` and ``gradcheck.py`` shadows nothing autodiff needs, whether
autodiff is installed (``pip install -e .``) or run from the checkout (``PYTHONPATH``)."""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

USER_FILES = {
    "backends.py": "raise ImportError('the user backends.py was imported')\n",
    "gradcheck.py": "raise ImportError('the user gradcheck.py was imported')\n",
}

# Trains one step and checks the gradient by hand: d/dx sum(x * x) = 2x.
PROGRAM = textwrap.dedent(
    """
    import sys
    if sys.argv[1] == "checkout":  # as if autodiff were not installed: no editable finder
        sys.meta_path[:] = [f for f in sys.meta_path
                            if "__editable__" not in getattr(f, "__module__", "")]
    import numpy as np
    import autodiff as ad
    from autodiff import backends

    xp = ad.Autodiff(np)
    x = xp.asarray([1.0, -2.0, 3.0], requires_grad=True)
    xp.sum(x * x).backward()
    assert x.grad.data.tolist() == [2.0, -4.0, 6.0], x.grad
    assert backends.__name__ == "autodiff.backends", backends.__name__
    assert "backends" not in sys.modules  # the user's file was never imported
    print(backends.__file__)
    """
)


def _user_folder(tmp_path):
    for name, text in USER_FILES.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("mode", ["installed", "checkout"])
def test_autodiff_runs_beside_a_users_backends_and_gradcheck(tmp_path, mode):
    folder = _user_folder(tmp_path)
    env = dict(os.environ)
    if mode == "checkout":
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the package's own folder (the checkout's, or an install's), not the user's file
    found = pathlib.Path(proc.stdout.strip())
    assert (found.parent.name, found.name) == ("backends", "__init__.py")
    assert folder not in found.parents
    if mode == "checkout":
        assert found == ROOT / "backends" / "__init__.py"


def test_gradcheck_command_runs_beside_a_users_gradcheck(tmp_path):
    command = shutil.which("gradcheck")
    if command is None:
        pytest.skip("the gradcheck command is installed by pip install -e .")
    proc = subprocess.run(
        [command, "--op", "tanh", "--op", "nn.conv2d", "-q"],
        cwd=_user_folder(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout
