#!/usr/bin/env python3
"""End-to-end tests of `backplane conformance`: runs the tool as a user or a
CI job would and checks its exit code, summary and reports.

The faulty test plugin registers device type "faulty" with an add.out that
subtracts, a neg.out that aborts and an abs.out that never returns; the
runner must report a failure, a crash and a timeout, and go on."""
import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAILED: " + what, file=sys.stderr)


def run(args, tool, plugins, default_plugins=False):
    cmd = [tool]
    if not default_plugins:
        cmd.append("--no-default-plugins")
    for p in plugins:
        cmd += ["--plugin", p]
    cmd += args
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    print("$ " + " ".join(cmd) + "\n-> exit %d\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
    return proc


def results_by_op_form(report):
    return {(r["backend"], r["op"], r["form"]): r for r in report["results"]}


def test_faulty_plugin(a):
    paths = {k: os.path.join(a.work_dir, "faulty." + k) for k in ("json", "xml", "md")}
    # neg crashes; relu runs after it to show the run goes on. The time limit
    # is generous here (sanitizer builds are slow); the hang has its own run.
    ops = r"^(bp::(add|mul|neg|relu)\b|device\.)"
    proc = run(["conformance", "--backend", "faulty", "--ops", ops, "--timeout", "120", "--json", paths["json"],
                "--junit", paths["xml"], "--markdown", paths["md"]], a.backplane, [a.cpu_plugin, a.faulty_plugin])
    check(proc.returncode == 1, "a run with a wrong kernel exits 1, got %d" % proc.returncode)
    check("conformance: FAILED" in proc.stdout, "the summary says FAILED")

    with open(paths["json"]) as f:
        report = json.load(f)
    check(report["passed"] is False, "the JSON report says the run did not pass")
    res = results_by_op_form(report)

    wrong = res.get(("faulty", "bp::add.out", "out"))
    check(wrong is not None and wrong["outcome"] == "fail" and wrong["kernel"] == "native",
          "the subtracting add.out is a native kernel reported as fail: %r" % (wrong,))
    if wrong:
        check(wrong["max_abs_error"] > 0 and wrong["sample"] and "expected" in wrong["message"],
              "the failure names the sample and the error: %r" % (wrong,))
    composite = res.get(("faulty", "bp::add.Tensor", "functional"))
    check(composite is not None and composite["outcome"] == "fail",
          "add.Tensor, a composite over the wrong add.out, fails too: %r" % (composite,))

    aborted = res.get(("faulty", "bp::neg", "all"))
    check(aborted is not None and aborted["outcome"] == "crash" and "SIGABRT" in aborted["message"],
          "the aborting neg.out is reported as a crash with its signal: %r" % (aborted,))

    for op, form in (("bp::relu", "functional"), ("bp::relu_", "inplace"), ("bp::relu.out", "out"),
                     ("bp::mul.Tensor", "functional"), ("bp::mul.out", "out")):
        r = res.get(("faulty", op, form))
        check(r is not None and r["outcome"] == "pass", "%s (%s) passes on faulty: %r" % (op, form, r))
    fallback = res.get(("faulty", "bp::mul.out", "out"))
    check(fallback is not None and fallback["kernel"] == "cpu_fallback",
          "mul.out on faulty is served by the CPU fallback: %r" % (fallback,))
    device = res.get(("faulty", "device.allocate", "device"))
    check(device is not None and device["kernel"] == "-", "a device check has no kernel: %r" % (device,))
    for check_name in ("device.allocate", "device.copy", "device.synchronize"):
        r = res.get(("faulty", check_name, "device"))
        check(r is not None and r["outcome"] == "pass", "%s passes on faulty: %r" % (check_name, r))

    suites = ET.parse(paths["xml"]).getroot()
    check(suites.tag == "testsuites", "JUnit root is <testsuites>")
    suite = suites.find("testsuite")
    check(suite is not None and suite.get("name") == "faulty", "one <testsuite> for the faulty backend")
    cases = {c.get("name"): c for c in suites.iter("testcase")}
    add_out = cases.get("bp::add.out [out]")
    check(add_out is not None and add_out.find("failure") is not None, "add.out is a JUnit <failure>")
    neg = cases.get("bp::neg [all]")
    check(neg is not None and neg.find("error") is not None, "the crash of neg is a JUnit <error>")
    fails = sum(1 for r in report["results"] if r["outcome"] == "fail")
    errors = sum(1 for r in report["results"] if r["outcome"] in ("error", "crash"))
    check((int(suites.get("failures")), int(suites.get("errors")), int(suites.get("tests"))) ==
          (fails, errors, len(report["results"])), "JUnit totals match the JSON results")

    with open(paths["md"]) as f:
        md = f.read()
    check("| `bp::add.out` | out | ❌ fail (native) |" in md, "the Markdown matrix marks add.out as failing")
    check("💥 crash" in md and "## Failures" in md, "the Markdown report lists the crash and the failures")


def test_hanging_kernel(a):
    # abs.out never returns: the worker is killed after the time limit and a
    # new one runs relu, which comes after abs.
    path = os.path.join(a.work_dir, "hang.json")
    proc = run(["conformance", "--backend", "faulty", "--ops", r"^bp::(abs|relu)\b", "--timeout", "2", "--json", path],
               a.backplane, [a.cpu_plugin, a.faulty_plugin])
    check(proc.returncode == 1, "a run with a hanging kernel exits 1, got %d" % proc.returncode)
    with open(path) as f:
        res = results_by_op_form(json.load(f))
    hung = res.get(("faulty", "bp::abs", "all"))
    check(hung is not None and hung["outcome"] == "crash" and "time limit of 2 s" in hung["message"],
          "the hanging abs.out is reported as a crash after the time limit: %r" % (hung,))
    relu = res.get(("faulty", "bp::relu.out", "out"))
    check(relu is not None and relu["outcome"] == "pass", "relu runs after the hang: %r" % (relu,))


def test_strict_and_clean_runs(a):
    plugins = [a.cpu_plugin, a.faulty_plugin]
    ok = run(["conformance", "--backend", "faulty", "--ops", r"^bp::mul\b"], a.backplane, plugins)
    check(ok.returncode == 0 and "conformance: PASSED" in ok.stdout, "mul on faulty passes through the fallback")
    strict = run(["conformance", "--backend", "faulty", "--ops", r"^bp::mul\b", "--strict"], a.backplane, plugins)
    check(strict.returncode == 1, "--strict fails a backend that serves mul.out by the fallback")
    check("cpu_fallback (counted as a failure: --strict)" in strict.stdout,
          "--strict says why a passing fallback failed, naming the kind")
    check(any(line.startswith("BACKEND") and "CPU_FALLBACK" in line for line in ok.stdout.splitlines()),
          "the summary counts each kernel kind under its name")
    cpu = run(["conformance", "--backend", "cpu", "--ops", r"^bp::mul\b", "--strict"], a.backplane, plugins)
    check(cpu.returncode == 0, "the CPU plugin's native mul passes even with --strict")


def test_declared_dtypes(a):
    # Conformance certifies what is declared (Note [Declared dtypes]): an
    # add.out that serves float32 only passes --strict, its other dtypes
    # having run through the CPU fallback by declaration, and every report
    # names its dtypes.
    paths = {k: os.path.join(a.work_dir, "declared." + k) for k in ("json", "xml", "md")}
    proc = run(["conformance", "--backend", "declared", "--ops", r"^bp::add\b", "--strict", "--json", paths["json"],
                "--junit", paths["xml"], "--markdown", paths["md"]], a.backplane, [a.cpu_plugin, a.declared_plugin])
    check(proc.returncode == 0 and "conformance: PASSED" in proc.stdout,
          "--strict passes a kernel that declares float32, got exit %d" % proc.returncode)
    check("bp::add.out (out): native (float32), cpu_fallback (others)" in proc.stdout,
          "the text summary lists the kernel with its declared dtypes")
    with open(paths["json"]) as f:
        report = json.load(f)
    out = results_by_op_form(report).get(("declared", "bp::add.out", "out"))
    check(out is not None and out["kernel"] == "native" and out["dtypes"] == ["float32"]
          and out["declined"] == "cpu_fallback" and not out["counts_as_failure"] and out["outcome"] == "pass",
          "the JSON result carries the declared dtypes: %r" % (out,))
    functional = results_by_op_form(report).get(("declared", "bp::add.Tensor", "functional"))
    check(functional is not None and functional["dtypes"] is None and functional["declined"] is None,
          "a kernel that declares nothing has dtypes null: %r" % (functional,))
    junit = ET.parse(paths["xml"]).getroot()
    texts = [c.findtext("system-out") or "" for c in junit.iter("testcase") if c.get("name") == "bp::add.out [out]"]
    check(any("kernel: native (float32), cpu_fallback (others)" in t for t in texts),
          "JUnit names the declared dtypes: %r" % (texts,))
    with open(paths["md"]) as f:
        check("✅ native (float32), cpu_fallback (others)" in f.read(), "the Markdown matrix names the declared dtypes")


def test_backends_without_devices(a):
    # Every backend by default: clitestnone has no devices and is skipped;
    # clitest has two, so the several-devices check runs.
    path = os.path.join(a.work_dir, "clitest.json")
    proc = run(["conformance", "--ops", r"^(bp::mul\b|device\.)", "--json", path], a.backplane,
               [a.cpu_plugin, a.cli_test_plugin])
    with open(path) as f:
        report = json.load(f)
    backends = {b["name"]: b for b in report["backends"]}
    check(backends.get("clitestnone", {}).get("status") == "skipped", "a backend without devices is skipped")
    check("no clitestnone hardware" in backends.get("clitestnone", {}).get("reason", ""),
          "the skip gives the plugin's reason")
    res = results_by_op_form(report)
    several = res.get(("clitest", "device.several_devices", "device"))
    check(several is not None, "device.several_devices runs on a backend with two devices")
    check(proc.returncode == (0 if report["passed"] else 1), "the exit code matches the report")
    # Asked for by name, a backend without devices fails the run.
    named = run(["conformance", "--backend", "clitestnone", "--ops", r"^bp::mul\b"], a.backplane,
                [a.cpu_plugin, a.cli_test_plugin])
    check(named.returncode == 1 and "no devices" in named.stdout, "a named backend without devices fails")


def test_usage_errors(a):
    plugins = [a.cpu_plugin]
    for args, needle in ((["conformance", "--backend", "nosuch"], "no loaded plugin provides backend 'nosuch'"),
                         (["conformance", "--ops", "("], "not a valid regular expression"),
                         (["conformance", "--timeout", "0"], "positive number of seconds"),
                         (["ops", "--strict"], "applies only to the 'conformance' command")):
        proc = run(args, a.backplane, plugins)
        check(proc.returncode == 2, "%s is a usage error (exit 2), got %d" % (args, proc.returncode))
        check(needle in proc.stderr, "%s says %r" % (args, needle))


def main():
    p = argparse.ArgumentParser()
    for name in ("--backplane", "--cpu-plugin", "--faulty-plugin", "--declared-plugin", "--cli-test-plugin",
                 "--work-dir"):
        p.add_argument(name, required=True)
    a = p.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    test_faulty_plugin(a)
    test_hanging_kernel(a)
    test_strict_and_clean_runs(a)
    test_declared_dtypes(a)
    test_backends_without_devices(a)
    test_usage_errors(a)
    if FAILURES:
        print("\n%d check(s) failed:\n  " % len(FAILURES) + "\n  ".join(FAILURES), file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
