"""backplane.conformance.run(): the `backplane conformance` command's
results as objects, its report files, and its errors as exceptions."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

import backplane
from backplane import conformance

ADD_MUL = [r"^bp::add\b", r"^bp::mul\b"]
ADD_MUL_FORMS = {
    ("bp::add.Tensor", "functional"), ("bp::add_.Tensor", "inplace"), ("bp::add.out", "out"),
    ("bp::add.Scalar", "functional"), ("bp::add_.Scalar", "inplace"), ("bp::add.Scalar_out", "out"),
    ("bp::mul.Tensor", "functional"), ("bp::mul_.Tensor", "inplace"), ("bp::mul.out", "out"),
    ("bp::mul.Scalar", "functional"), ("bp::mul_.Scalar", "inplace"), ("bp::mul.Scalar_out", "out"),
    # Gradient forms (docs/conformance.md): the functional ops that differentiate.
    ("bp::add.Tensor", "gradient"), ("bp::add.Scalar", "gradient"),
    ("bp::mul.Tensor", "gradient"), ("bp::mul.Scalar", "gradient"),
}


@pytest.fixture
def faulty_plugin(test_plugin):
    """The conformance suite's faulty test plugin (two "faulty" devices)."""
    return test_plugin("faulty_test_plugin")


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("cpu")
    paths = {k: d / f"report.{k}" for k in ("json", "xml", "md")}
    report = conformance.run(backend="cpu", ops=ADD_MUL, json=paths["json"], junit=paths["xml"],
                             markdown=paths["md"])
    return report, paths


def test_cpu_passes_with_a_result_per_form_of_the_named_ops(cpu_run):
    report, _ = cpu_run
    assert report.passed and report.verdict == "PASSED" and not report.strict, report.text
    assert {(r.op, r.form) for r in report.results} == ADD_MUL_FORMS
    assert len(report) == len(ADD_MUL_FORMS) == len(list(report))
    for r in report:
        assert (r.backend, r.device, r.outcome, r.counts_as_failure) == ("cpu", 0, "pass", False)
        assert r.kernel in ("native", "composite") and r.kernel_kind == r.kernel
        assert r.samples > 0 and r.sample == "" and r.message == ""
        assert r.max_abs_error == 0.0 and r.max_rel_error == 0.0
    kernels = {(r.op, r.kernel) for r in report}
    assert ("bp::add.out", "native") in kernels and ("bp::add.Tensor", "composite") in kernels
    assert report.failures == []
    (cpu,) = report.backends
    assert (cpu.name, cpu.provider, cpu.device, cpu.status, cpu.reason) == ("cpu", "built-in", 0, "run", "")
    assert cpu.devices >= 1 and cpu.seconds > 0
    assert cpu.counts == {"forms": 16, "pass": 16, "fail": 0, "fallback": 0, "error": 0, "crash": 0,
                          "unsupported": 0, "xfail": 0, "failures": 0}
    assert report.counts == cpu.counts
    assert report.text.rstrip().endswith("conformance: PASSED (0 failures)")
    assert "conformance: running cpu:0 (built-in)" in report.log


def test_report_files_hold_the_same_results(cpu_run):
    report, paths = cpu_run
    data = json.loads(paths["json"].read_text())
    assert data["passed"] is True and data["strict"] is False
    assert [(r["op"], r["form"], r["kernel"], r["outcome"], r["samples"]) for r in data["results"]] == [
        (r.op, r.form, r.kernel, r.outcome, r.samples) for r in report.results]

    root = ET.parse(paths["xml"]).getroot()
    assert root.tag == "testsuites" and root.get("name") == "backplane conformance"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("16", "0", "0")
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "cpu:0"
    cases = suite.findall("testcase")
    assert {c.get("name") for c in cases} == {f"{op} [{form}]" for op, form in ADD_MUL_FORMS}
    assert all(c.get("classname") == "conformance.cpu:0" for c in cases)
    assert not suite.findall("testcase/failure") and not suite.findall("testcase/error")

    md = paths["md"].read_text()
    assert md.startswith("# Backplane conformance\n\n**PASSED**\n")
    for op, form in ADD_MUL_FORMS:
        assert f"| `{op}` | {form} | ✅ " in md


def _without_times(path, kind):
    text = open(path, encoding="utf-8").read()
    if kind == "json":
        data = json.loads(text)
        for b in data["backends"]:
            b.pop("seconds")
        return data
    if kind == "xml":
        return re.sub(r' time="[^"]*"', "", text)
    return re.sub(r"\| [0-9.]+ s \|", "| s |", text)


def test_report_files_are_the_commands(cpu_run, tmp_path):
    # The tool itself with the same options writes the same files (but for
    # the times).
    report, paths = cpu_run
    ops = "|".join(f"(?:{o})" for o in ADD_MUL)
    mine = {k: tmp_path / f"tool.{k}" for k in ("json", "xml", "md")}
    proc = subprocess.run([conformance._tool(), "conformance", "--backend", "cpu", "--ops", ops, "--json",
                           str(mine["json"]), "--junit", str(mine["xml"]), "--markdown", str(mine["md"])],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for kind in ("json", "xml", "md"):
        assert _without_times(paths[kind], kind) == _without_times(mine[kind], kind), kind
    assert re.sub(r"[0-9.]+ s\b", "s", proc.stdout) == re.sub(r"[0-9.]+ s\b", "s", report.text)


def test_an_unknown_backend_raises_the_commands_message():
    with pytest.raises(backplane.InvalidArgumentError,
                       match=r"^no loaded plugin provides backend 'nope' \(loaded: cpu.*\)$") as e:
        conformance.run(backend="nope", ops=ADD_MUL)
    assert isinstance(e.value, ValueError) and isinstance(e.value, backplane.Error)
    assert e.value.code == "INVALID_ARGUMENT"


def test_usage_errors_raise():
    with pytest.raises(backplane.InvalidArgumentError, match=r"^--ops '\(' is not a valid regular expression"):
        conformance.run(backend="cpu", ops="(")
    with pytest.raises(backplane.InvalidArgumentError, match="--device 7 is out of range for backend 'cpu'"):
        conformance.run(backend="cpu", device=7, ops=ADD_MUL)
    with pytest.raises(backplane.InvalidArgumentError,
                       match="the plugin named with --plugin /nonexistent/plugin.so did not load: cannot load "
                             "plugin '/nonexistent/plugin.so': No such file or directory"):
        conformance.run(backend="cpu", ops=ADD_MUL, plugins=["/nonexistent/plugin.so"])


def test_arguments_of_the_wrong_kind_raise_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="device must be a device index"):
        conformance.run(backend="cpu", device=-1)
    with pytest.raises(ValueError, match="ops=\\[\\] selects nothing"):
        conformance.run(backend="cpu", ops=[])
    with pytest.raises(TypeError, match="ops must"):
        conformance.run(backend="cpu", ops=3)
    for timeout in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            conformance.run(backend="cpu", timeout=timeout)
    with pytest.raises(TypeError, match="backend must be"):
        conformance.run(backend=["cpu", 1])
    with pytest.raises(FileNotFoundError):
        conformance.run(backend="cpu", ops=ADD_MUL, junit=tmp_path / "missing" / "report.xml")
    with pytest.raises(IsADirectoryError):
        conformance.run(backend="cpu", ops=ADD_MUL, markdown=tmp_path)
    with pytest.raises(ValueError, match="timeout must be at most 2.592e\\+06 seconds"):
        conformance.run(backend="cpu", timeout=1e300)


def test_a_selection_of_nothing_raises():
    # A typo must not pass (exit 0 and passed=True before).
    with pytest.raises(backplane.InvalidArgumentError,
                       match=r"^--ops 'bp::reluu' matches none of the \d+ op specs and device checks .*"
                             r"run 'backplane ops' to list the op names$"):
        conformance.run(backend="cpu", ops="bp::reluu")


def test_patterns_are_re2():
    # A backtracking matcher would run for ages on this one; RE2 answers at once.
    with pytest.raises(backplane.InvalidArgumentError, match=r"^--ops '\(\.\+\)\+X' matches none"):
        conformance.run(backend="cpu", ops="(.+)+X")
    with pytest.raises(backplane.InvalidArgumentError, match=r"^the --ops pattern is too large \(90000 bytes"):
        conformance.run(backend="cpu", ops="a" * 90000)
    report = conformance.run(backend="cpu", ops=[r"^bp::mul\.out$", r"^bp::add\.out$"])
    assert {r.op.split(".")[0].rstrip("_") for r in report} == {"bp::mul", "bp::add"}


def test_reports_are_not_emptied_when_the_run_is_refused(tmp_path):
    paths = {k: tmp_path / f"kept.{k}" for k in ("json", "xml", "md")}
    for p in paths.values():
        p.write_text("kept")
    for kwargs in ({"backend": "nope"}, {"backend": "cpu", "ops": "bp::reluu"}):
        with pytest.raises(backplane.InvalidArgumentError):
            conformance.run(json=paths["json"], junit=paths["xml"], markdown=paths["md"], **kwargs)
        assert all(p.read_text() == "kept" for p in paths.values()), kwargs
    with pytest.raises(backplane.InvalidArgumentError, match="junit and json name the same file"):
        conformance.run(backend="cpu", ops=ADD_MUL, json=paths["json"], junit=tmp_path / "." / "kept.json")
    assert paths["json"].read_text() == "kept"


def test_failures_and_crashes_are_results(tmp_path, faulty_plugin):
    paths = {k: tmp_path / f"faulty.{k}" for k in ("json", "xml", "md")}
    report = conformance.run(backend="faulty", plugins=[faulty_plugin], ops=r"^bp::(add|neg|mul)\b",
                             json=paths["json"], junit=paths["xml"], markdown=paths["md"])
    assert not report.passed and report.verdict == "FAILED"
    by_form = {(r.op, r.form): r for r in report}
    wrong = by_form[("bp::add.out", "out")]
    assert (wrong.backend, wrong.kernel, wrong.outcome, wrong.counts_as_failure) == ("faulty", "native", "fail", True)
    assert wrong.sample and "expected" in wrong.message
    assert wrong.max_abs_error > 0 and wrong.max_rel_error > 0
    crash = by_form[("bp::neg.out", "out")]
    assert (crash.outcome, crash.sample) == ("crash", "empty [0,5] float32")
    assert "SIGSEGV" in crash.message
    assert by_form[("bp::neg_", "inplace")].outcome == "pass"  # the run went on after the crash
    fallback = by_form[("bp::mul.out", "out")]
    assert (fallback.kernel, fallback.outcome, fallback.counts_as_failure) == ("cpu_fallback", "pass", False)
    assert {(r.op, r.form) for r in report.failures} == {
        (r.op, r.form) for r in report if r.outcome != "pass"}
    counts = report.counts
    # neg's gradient form crashes too (its backward calls neg on the device);
    # add's passes (its gradient is the incoming one, times alpha).
    assert by_form[("bp::neg", "gradient")].outcome == "crash"
    assert by_form[("bp::add.Tensor", "gradient")].outcome == "pass"
    assert counts["crash"] == 3 and counts["fail"] == 6 and counts["failures"] == 9
    assert counts["forms"] == counts["pass"] + counts["fail"] + counts["error"] + counts["crash"]
    assert "conformance: FAILED (9 failures)" in report.text

    assert json.loads(paths["json"].read_text())["passed"] is False
    root = ET.parse(paths["xml"]).getroot()
    assert (root.get("failures"), root.get("errors")) == ("6", "3")
    assert len(root.findall("testsuite/testcase/failure")) == 6
    assert "## Failures" in paths["md"].read_text()


def test_strict_counts_a_fallback_as_a_failure(faulty_plugin):
    report = conformance.run(backend="faulty", plugins=[faulty_plugin], ops=r"^bp::mul\b", strict=True)
    assert report.strict and not report.passed
    fallback = next(r for r in report if r.op == "bp::mul.out")
    assert (fallback.outcome, fallback.kernel, fallback.counts_as_failure) == ("pass", "cpu_fallback", True)
    assert report.counts["fallback"] == len(report.failures) > 0


def test_a_kernel_that_declares_its_dtypes(test_plugin):
    # Device type "declared": add.out native for float32 only, the CPU
    # fallback for the other dtypes by declaration, which --strict passes.
    report = conformance.run(backend="declared", plugins=[test_plugin("declared_dtypes_test_plugin")],
                             ops=r"^bp::add\b", strict=True)
    assert report.passed and report.strict, report.text
    out = next(r for r in report if r.op == "bp::add.out")
    assert (out.kernel, out.dtypes, out.declined, out.counts_as_failure) == ("native", ("float32",),
                                                                            "cpu_fallback", False)
    assert all(r.dtypes is None and r.declined is None for r in report if r.op != "bp::add.out")
    assert "declared:0  bp::add.out (out): native (float32), cpu_fallback (others)" in report.text


def test_every_device(faulty_plugin):
    # One run per device with device="all"; device=1 runs on the second.
    report = conformance.run(backend="faulty", plugins=[faulty_plugin], ops=r"^bp::mul\b", device="all")
    assert report.passed, report.text
    assert [(b.name, b.device) for b in report.backends] == [("faulty", 0), ("faulty", 1)]
    assert sorted({r.device for r in report}) == [0, 1]
    second = conformance.run(backend="faulty", plugins=[faulty_plugin], ops=r"^bp::mul\b", device=1)
    assert [(b.name, b.device) for b in second.backends] == [("faulty", 1)]
    assert {r.device for r in second} == {1}


def test_an_op_past_the_time_limit_is_a_crash(faulty_plugin):
    # abs.out hangs on faulty: each form of abs is killed after `timeout`
    # seconds and reported as a crash naming the sample; the run goes on.
    report = conformance.run(backend="faulty", plugins=[faulty_plugin], ops=r"^bp::abs\b", timeout=1)
    assert [(r.op, r.form) for r in report] == [("bp::abs", "functional"), ("bp::abs_", "inplace"),
                                                ("bp::abs.out", "out"), ("bp::abs", "gradient")]
    for r in report:
        assert r.outcome == "crash" and r.sample and "ran past the time limit of 1 s" in r.message


def test_hostile_messages_come_back_as_text(faulty_plugin):
    # faulty's sign.out fails with bytes that are not UTF-8, an ANSI colour
    # sequence and 1 MiB of text (Note [Report text]): no UnicodeDecodeError,
    # U+FFFD for the bytes, the message cut unless full_errors=True.
    report = conformance.run(backend="faulty", plugins=[faulty_plugin], ops=r"^bp::sign\b")
    assert len(report.failures) == 4  # functional, inplace, out and gradient
    for r in report.failures:
        assert "faulty: sign \ufffd\ufffd \x1b[31mred\x1b[0m x" in r.message
        assert re.search(r"\.\.\. \(\d+ more bytes; --full-errors to see all\)$", r.message) and len(r.message) < 4200
    assert "\x1b" not in report.text and "\\x1b[31mred" in report.text
    whole = conformance.run(backend="faulty", plugins=[faulty_plugin], ops=r"^bp::sign\.out$", full_errors=True)
    assert [len(r.message) > 1 << 20 for r in whole] == [True] * 4  # the spec's four forms


def _processes_in_session(sid):
    """The live processes of session `sid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, session, ...
            if fields[0] != "Z" and int(fields[3]) == sid:
                found.append(int(entry))
    return found


def test_keyboard_interrupt_kills_the_tool_and_its_workers(faulty_plugin):
    # A child interpreter in a session of its own runs faulty's abs, which
    # hangs; ^C (SIGINT to the interpreter) must leave no tool and no worker
    # (Note [Workers die with their parent]).
    code = textwrap.dedent("""
        import sys, backplane
        try:
            backplane.conformance.run(backend="faulty", plugins=[sys.argv[1]], ops=r"^bp::abs\\b", timeout=200)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(3)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code, faulty_plugin], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_processes_in_session(proc.pid)) < 3:
            time.sleep(0.05)  # the interpreter, the tool and its worker
        assert len(_processes_in_session(proc.pid)) >= 3
        time.sleep(0.5)  # into the hanging kernel
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, out.strip()) == (3, "interrupted"), err
        deadline = time.monotonic() + 5
        while _processes_in_session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_in_session(proc.pid) == []
    finally:
        for pid in _processes_in_session(proc.pid):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def test_the_plugins_this_process_loaded_are_used(faulty_plugin):
    # A child interpreter loads the plugin (in this one it would add a
    # device type for every later test); run() needs no plugins=.
    code = textwrap.dedent("""
        import sys, backplane
        backplane.load_plugin(sys.argv[1])
        report = backplane.conformance.run(backend="faulty", ops=r"^bp::mul\\b")
        print(report.passed, sorted({(r.backend, r.kernel) for r in report}))
    """)
    proc = subprocess.run([sys.executable, "-c", code, faulty_plugin], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True [('faulty', 'composite'), ('faulty', 'cpu_fallback')]"


def test_without_a_build_tree_the_tool_is_the_packages_own(monkeypatch):
    # A wheel has no _build_paths: the tool is backplane/bin/backplane
    # (Note [The Python package's layout]); a package without it says so.
    monkeypatch.setitem(sys.modules, "backplane._build_paths", None)  # import fails as in a wheel
    monkeypatch.delattr(backplane, "_build_paths", raising=False)
    expected = os.path.join(os.path.dirname(os.path.abspath(conformance.__file__)), "bin", "backplane")
    if os.access(expected, os.X_OK):
        assert conformance._tool() == expected
    else:
        with pytest.raises(backplane.UnavailableError, match=f"tool, which is not at {re.escape(expected)}"):
            conformance.run(backend="cpu", ops=ADD_MUL)
