"""gradcheck itself: it passes right rules, fails wrong ones (naming the op and
the sample), tells kinks from wrong rules, and its CLI keeps its contract."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autodiff as ad
from autodiff.engine import registry
from gradcheck.core import GradcheckError, check_grad, check_op, check_second

xp = ad.Autodiff(np)
X = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.6]])

# A process that registers two deliberately wrong rules with specs, then runs the CLI.
WRONG = textwrap.dedent(
    """
    import sys
    from autodiff.rules._util import binary, unary
    from gradcheck.specs import Sample, spec

    # 1.01 * the right gradient of exp
    unary("scaled_exp", lambda xp, g, ans, x: 1.01 * g * ans, impl=lambda B: B.exp,
          saves=(), saves_ans=True)
    # add's rule for a broadcast x2 drops the broadcast axis (keeps one column
    # instead of summing them), as a hand-written unbroadcast might
    binary("bad_add", lambda xp, g, ans, x1, x2: g,
           lambda xp, g, ans, x1, x2: g[..., :1], impl=lambda B: B.add, saves=())
    import numpy as np
    spec("scaled_exp", lambda rng: [Sample((rng.uniform(-1, 1, (3,)),),
         lambda xp, a: xp._ops_for_test.scaled_exp(a), "vector of 3")])
    spec("bad_add", lambda rng: [Sample((rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (2, 1))),
         lambda xp, a, b: xp._ops_for_test.bad_add(a, b), "(2, 3) with (2, 1)")])
    import autodiff as ad
    ns = ad.Autodiff(np)
    ns._ops_for_test = ad.engine.namespace.recorder_of(ns.asarray(0.0)).xp
    from gradcheck.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def _cli(*args, script=None):
    cmd = [sys.executable, "-c", script] if script else [sys.executable, "-m", "gradcheck"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)


def test_cli_fails_on_wrong_rules_and_names_op_and_sample():
    proc = _cli("--op", "scaled_exp", "--op", "bad_add", "--op", "exp", script=WRONG)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "FAIL scaled_exp [vector of 3] order 1" in out
    assert "FAIL bad_add [(2, 3) with (2, 1)] order 1" in out
    assert "exp " in out and "0 failed" not in out
    # Every registered op now lacks nothing but these two extras have specs: the run
    # reports them, and exp itself still passes.
    exp_line = next(line for line in out.splitlines() if line.startswith("exp "))
    assert exp_line.rstrip().endswith("ok")


def test_cli_passes_and_writes_json(tmp_path):
    path = tmp_path / "out.json"
    proc = _cli("--op", "tanh", "--op", "matmul", "--json", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = json.loads(path.read_text())
    assert {r["op"] for r in records} == {"tanh", "matmul"}
    assert all(r["status"] == "ok" and r["max_abs"] < 1e-6 for r in records)
    assert {r["order"] for r in records} == {1, 2}
    assert "passed, 0 failed" in proc.stdout


def test_cli_usage_errors_exit_2():
    assert _cli("--backend", "no_such_module").returncode == 2
    assert _cli("--op", "no_such_op").returncode == 2
    assert _cli("--mode", "sideways").returncode == 2


def test_cli_list_names_every_spec():
    from gradcheck.specs import SPECS

    proc = _cli("--list")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["op", "chapter", "samples", "vjp", "jvp", "batch", "notes"]
    assert lines[-1] == f"{len(SPECS)} ops with specs, 0 without a rule"
    assert "MISSING" not in proc.stdout
    rows = [line.split() for line in lines[1:-1]]
    assert {row[0] for row in rows} == set(SPECS)
    joined = dict((r[0], " ".join(r)) for r in rows)
    assert "(real inputs only)" in joined["maximum"]
    # where each rule comes from, one column each: VJP, JVP ("fallback": the double-VJP
    # trick on that node), batching ("derived": a generic rule or the metadata's)
    kinds = {row[0]: tuple(row[3:6]) for row in rows}
    assert kinds["linalg.svd"] == ("written", "fallback", "derived")
    assert kinds["exp"] == ("written", "derived", "derived")
    assert kinds["sum"] == ("written", "linear", "derived")
    assert kinds["matmul"] == ("written", "bilinear", "written")
    assert kinds["unique_values"][2] == "fallback"
    assert all(k[0] in registry.VJP_KINDS and k[1] in registry.JVP_KINDS for k in kinds.values())
    assert {k[2] for k in kinds.values()} == set(registry.BATCH_KINDS)
    chapters = [row[1] for row in rows]
    assert chapters == sorted(chapters)  # grouped by chapter
    assert dict(row[:2] for row in rows)["linalg.solve"] == "linalg"


def test_every_op_says_where_its_vjp_comes_from():
    ops = registry.ops().values()
    assert {op.vjp_kind for op in ops if op.kind == registry.DIFF} == {"written"}
    assert all(op.vjp_kind is None for op in ops if op.kind == registry.CONST)
    assert all(op.vjp_kind == "missing" for op in ops if op.kind == registry.MISSING)
    # a custom_jvp's VJP is its JVP transposed: derived

    @ad.custom_jvp
    def f(x):
        return xp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return xp.sin(x), xp.cos(x) * t

    y = f(xp.asarray(X, requires_grad=True))
    assert y.grad_fn.op.vjp_kind == "derived" and y.grad_fn.op.jvp_kind == "written"


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_wrong_rule_is_caught_in_every_mode(mode):
    from autodiff.engine.registry import get

    op = get("sin")
    right = op.vjp
    op.vjp = (lambda xp, g, ans, x: 1.01 * g * xp.cos(x),)
    try:
        with pytest.raises(GradcheckError):
            check_grad(lambda a: xp.sin(a), X, xp=xp, mode=mode)
    finally:
        op.vjp = right
    assert check_grad(lambda a: xp.sin(a), X, xp=xp, mode=mode).ok


def test_full_mode_reports_the_worst_element():
    from autodiff.engine.registry import get

    op = get("sin")
    right = op.vjp
    # wrong (doubled) only at the element X[1, 2]
    op.vjp = (lambda xp, g, ans, x: g * xp.cos(x) * xp.where(x == X[1, 2], 2.0, 1.0),)
    try:
        res = check_grad(lambda a: xp.sin(a), X, xp=xp, mode="full", raise_on_fail=False)
    finally:
        op.vjp = right
    assert res.status == "FAIL"
    assert res.where == "d out[5] / d input 0[1, 2]"
    assert res.analytic == pytest.approx(2 * np.cos(X[1, 2]))
    assert res.numeric == pytest.approx(np.cos(X[1, 2]))


def test_a_kink_is_reported_as_such():
    # |x| written with where: at exactly 0 the rule picks one side, the function has
    # no derivative; gradcheck must say "non-differentiable point", not "wrong rule".
    f = lambda a: xp.where(a > 0, a, -a)  # noqa: E731
    res = check_grad(f, np.array([0.0, 1.5, -2.0]), xp=xp, raise_on_fail=False)
    assert res.ok and res.status == "nondiff" and "non-differentiable" in str(res)
    # away from the kink it is a plain pass
    assert check_grad(f, np.array([0.5, 1.5, -2.0]), xp=xp).status == "ok"


def test_float32_checks_at_float32_tolerance():
    res = check_grad(lambda a: xp.exp(a) * a, X, xp=xp, dtype="float32")
    assert res.ok and res.max_abs > 1e-9  # a float32 gradient is not float64-exact
    with pytest.raises(GradcheckError):
        check_grad(lambda a: xp.exp(a) * a, X, xp=xp, dtype="float32", atol=0, rtol=0)


def test_second_order_catches_a_rule_that_is_not_differentiated():
    from autodiff.engine.registry import get

    op = get("tanh")
    right = op.vjp
    # right values, but computed from a detached copy: the second derivative is lost
    op.vjp = (lambda xp, g, ans, x: g * (1 - ans.detach() ** 2) if hasattr(ans, "detach")
              else g * (1 - ans * ans),)  # fmt: skip
    try:
        assert check_grad(lambda a: xp.tanh(a), X, xp=xp).ok
        with pytest.raises(GradcheckError):
            check_second(lambda a: xp.tanh(a), X, xp=xp)
    finally:
        op.vjp = right
    assert check_second(lambda a: xp.tanh(a), X, xp=xp).ok


def test_check_op_runs_every_sample():
    results = check_op("sum")
    assert len(results) >= 10 and all(r.ok for _, _, r in results)


def test_a_sample_the_backend_cannot_run_is_reported_not_failed(monkeypatch, capsys):
    # array_api_compat's torch raises NotImplementedError for unique_all, for instance
    from gradcheck import cli
    from gradcheck.specs import SPECS, Sample, Spec

    def lacking(xp, a):
        raise NotImplementedError("sum() not yet implemented for this library")

    monkeypatch.setitem(
        SPECS, "sum", Spec("sum", lambda rng: [Sample((np.ones(2),), lacking, "x")])
    )
    records = list(cli.run("numpy", ops=["sum"]))
    assert [r["status"] for r in records] == ["unsupported"]
    assert "the backend lacks it" in records[0]["detail"]
    assert cli.main(["--op", "sum", "-q"]) == 0
    assert "0 failed, 1 the backend can't run" in capsys.readouterr().out


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_the_whole_registry_passes_on_torch(dtype):
    # numpy and array_api_strict run every spec in tests/test_ops.py; torch (through
    # array_api_compat) runs the CLI's walk of the registry, real and complex
    pytest.importorskip("torch", reason="the torch backend needs torch")
    from gradcheck.cli import run

    records = list(run("torch", dtype=dtype))
    bad = [r for r in records if r["status"] not in ("ok", "nondiff", "unsupported", "real only")]
    assert bad == [], bad[:5]
    checked = [r for r in records if r["status"] in ("ok", "nondiff")]
    assert len(checked) > (800 if dtype == "float64" else 500)
    # what torch can't run is the backend's own gap, named
    assert all("lacks it" in r["detail"] or "real inputs only" in r["detail"]
               for r in records if r["status"] == "unsupported")  # fmt: skip


def test_cli_jobs_give_the_records_of_one_process(tmp_path):
    """--jobs N checks the ops in N processes: the same records, in the same order."""
    from gradcheck import cli

    paths = [tmp_path / "one.json", tmp_path / "two.json"]
    ops = ["--op", "exp", "--op", "matmul", "--op", "nn.relu", "--op", "linalg.det"]
    for jobs, path in zip(("1", "2"), paths):
        assert cli.main([*ops, "--jobs", jobs, "-q", "--json", str(path)]) == 0
    one, two = (json.loads(p.read_text()) for p in paths)
    assert len(one) > 20 and one == two
