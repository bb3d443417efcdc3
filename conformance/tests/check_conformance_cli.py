#!/usr/bin/env python3
"""End-to-end tests of `backplane conformance`: runs the tool as a user or a
CI job would and checks its exit code, summary and reports.

The faulty test plugin registers device type "faulty" (two devices) with an
add.out that subtracts, a neg.out that dies of SIGSEGV on one sample of the
functional and out= forms (and is wrong on device 1), an abs.out that
never returns, and exp, exp_ and sqrt.out kernels whose typed entries are
wrong while their boxed ones are right; the runner must report a failure, a crash, a timeout and the typed
call's failure, each naming the op, form and sample, and go on."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

# The faulty plugin's neg.out dies of SIGSEGV; under AddressSanitizer
# (abort_on_error=1, as scripts/test.sh sets it) the sanitizer catches the
# fault and the worker dies of SIGABRT instead.
CRASH_SIGNAL = re.compile(r"signal (11 \(SIGSEGV\)|6 \(SIGABRT\))")

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAILED: " + what, file=sys.stderr)


def command(args, tool, plugins, default_plugins=False):
    cmd = [tool]
    if not default_plugins:
        cmd.append("--no-default-plugins")
    for p in plugins:
        cmd += ["--plugin", p]
    return cmd + args


def run(args, tool, plugins, default_plugins=False, timeout=240):
    cmd = command(args, tool, plugins, default_plugins)
    # errors="strict": the tool's output must be UTF-8 whatever a plugin says.
    proc = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="strict", timeout=timeout)
    shown = [c if len(c) < 200 else c[:40] + "...(%d characters)" % len(c) for c in cmd]
    print("$ " + " ".join(shown) + "\n-> exit %d\n%s%s" % (proc.returncode, proc.stdout[-20000:], proc.stderr[-4000:]))
    return proc


def results_by_op_form(report, device=0):
    return {(r["backend"], r["op"], r["form"]): r for r in report["results"] if r["device"] == device}


def summary_rows(stdout):
    """The summary table's rows as dicts keyed by the header's column names."""
    lines = stdout.splitlines()
    header = next((i for i, l in enumerate(lines) if l.startswith("BACKEND ")), None)
    if header is None:
        return []
    # Columns start where their names do (the table is left-aligned).
    starts = [m.start() for m in re.finditer(r"\S+", lines[header])]
    names = lines[header].split()
    rows = []
    for line in lines[header + 1:]:
        if not line.strip():
            break
        if line[:1].isspace():
            continue  # a note under a row
        bounds = zip(starts, starts[1:] + [len(line)])
        rows.append({n: line[b:e].strip() for n, (b, e) in zip(names, bounds)})
    return rows


def footer_failures(stdout):
    m = re.search(r"^conformance: (PASSED|FAILED) \((\d+) failures?", stdout, re.M)
    return (m.group(1), int(m.group(2))) if m else (None, None)


def test_faulty_plugin(a):
    paths = {k: os.path.join(a.work_dir, "faulty." + k) for k in ("json", "xml", "md")}
    # neg crashes in two of its forms; relu runs after it to show the run goes
    # on. The time limit is generous here (sanitizer builds are slow); the
    # hang has its own run.
    ops = r"^(bp::(add|mul|neg|relu|exp|sqrt)\b|device\.)"
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

    # The crash is blamed on the form and sample that were running, not on
    # the op as a whole; the forms that ended, and the in-place one after the
    # crash, keep their own results.
    check(("faulty", "bp::neg", "all") not in res, "no crash is blamed on a whole op when a sample was running")
    for op, form, kernel in (("bp::neg", "functional", "composite"), ("bp::neg.out", "out", "native")):
        r = res.get(("faulty", op, form))
        check(r is not None and r["outcome"] == "crash" and CRASH_SIGNAL.search(r["message"]) and
              r["sample"] == "empty [0,5] float32" and r["kernel"] == kernel and r["samples"] == 3,
              "%s (%s) is reported as crashed at sample 'empty [0,5] float32' with its signal: %r" % (op, form, r))
    inplace = res.get(("faulty", "bp::neg_", "inplace"))
    check(inplace is not None and inplace["outcome"] == "pass" and inplace["samples"] > 3,
          "the in-place neg_, which does not crash, runs in a new worker after the crash and passes: %r" % (inplace,))
    check(re.search(r"faulty:0  bp::neg\.out \(out, native\): crash at sample 'empty \[0,5\] float32': the worker was "
                    r"killed by signal (11 \(SIGSEGV\)|6 \(SIGABRT\)) while running this sample", proc.stdout),
          "the summary's failure list names the op, form, kernel, sample and signal")

    for op, form in (("bp::relu", "functional"), ("bp::relu_", "inplace"), ("bp::relu.out", "out"),
                     ("bp::mul.Tensor", "functional"), ("bp::mul.out", "out")):
        r = res.get(("faulty", op, form))
        check(r is not None and r["outcome"] == "pass", "%s (%s) passes on faulty: %r" % (op, form, r))
    # Note [Typed calls in conformance]: exp's, exp_'s and sqrt.out's boxed
    # entries are right (they decline, and the host serves the calls
    # elsewhere), their typed entries return self; each form calls both and
    # fails on the typed call, blamed on the native kernel that call reached.
    for op, form, what in (("bp::exp", "functional", "element"), ("bp::exp_", "inplace", "element"),
                           ("bp::sqrt.out", "out", "the out= form did not return its out argument")):
        r = res.get(("faulty", op, form))
        check(r is not None and r["outcome"] == "fail" and r["message"].startswith("called typed: " + what) and
              r["kernel"] == "native" and "(called typed, it declined 0)" in r["note"],
              "%s (%s), whose typed entry is wrong, fails called typed, on its native kernel: %r" % (op, form, r))
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
    check(suite is not None and suite.get("name") == "faulty:0", "one <testsuite> for device 0 of the faulty backend")
    cases = {c.get("name"): c for c in suites.iter("testcase")}
    add_out = cases.get("bp::add.out [out]")
    check(add_out is not None and add_out.find("failure") is not None, "add.out is a JUnit <failure>")
    neg = cases.get("bp::neg.out [out]")
    check(neg is not None and neg.find("error") is not None and
          "empty [0,5] float32" in neg.find("error").get("message", ""),
          "the crash of neg.out is a JUnit <error> naming the sample")
    fails = sum(1 for r in report["results"] if r["outcome"] == "fail")
    errors = sum(1 for r in report["results"] if r["outcome"] in ("error", "crash"))
    check((int(suites.get("failures")), int(suites.get("errors")), int(suites.get("tests"))) ==
          (fails, errors, len(report["results"])), "JUnit totals match the JSON results")

    with open(paths["md"]) as f:
        md = f.read()
    check("| `bp::add.out` | out | ❌ fail (native) |" in md, "the Markdown matrix marks add.out as failing")
    check("💥 crash" in md and "## Failures" in md, "the Markdown report lists the crash and the failures")


def test_hanging_kernel(a):
    # abs.out never returns: each form that calls it is killed after the time
    # limit, named with its first sample, and a new worker runs the next
    # form, then relu, which comes after abs.
    path = os.path.join(a.work_dir, "hang.json")
    proc = run(["conformance", "--backend", "faulty", "--ops", r"^bp::(abs|relu)\b", "--timeout", "2", "--json", path],
               a.backplane, [a.cpu_plugin, a.faulty_plugin])
    check(proc.returncode == 1, "a run with a hanging kernel exits 1, got %d" % proc.returncode)
    with open(path) as f:
        res = results_by_op_form(json.load(f))
    for op, form in (("bp::abs", "functional"), ("bp::abs_", "inplace"), ("bp::abs.out", "out")):
        hung = res.get(("faulty", op, form))
        check(hung is not None and hung["outcome"] == "crash" and "time limit of 2 s" in hung["message"] and
              hung["sample"] == "[3,4] float32",
              "%s (%s), which hangs, is reported as a crash after the time limit at its first sample: %r" %
              (op, form, hung))
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
    check(summary_rows(ok.stdout) and "FALLBACK" not in summary_rows(ok.stdout)[0],
          "without --strict the table has no FALLBACK column")

    # Under --strict the table, the footer and every report count the same
    # failures: a passing fallback is in FALLBACK, not in PASS.
    paths = {k: os.path.join(a.work_dir, "strict." + k) for k in ("json", "xml", "md")}
    strict = run(["conformance", "--backend", "faulty", "--ops", r"^bp::(mul|add)\b", "--strict", "--json",
                  paths["json"], "--junit", paths["xml"], "--markdown", paths["md"]], a.backplane, plugins)
    verdict, failures = footer_failures(strict.stdout)
    rows = summary_rows(strict.stdout)
    check(verdict == "FAILED" and failures and len(rows) == 1, "one summary row and a FAILED footer: %r" % (rows,))
    if rows and failures:
        row = {k: int(v) for k, v in rows[0].items() if v.isdigit()}
        check(row["FALLBACK"] == 1 and row["FAIL"] > 0,
              "mul.out's passing fallback is in FALLBACK, add's wrong results in FAIL: %r" % (rows[0],))
        check(row["FAIL"] + row["FALLBACK"] + row["ERROR"] + row["CRASH"] == failures,
              "the table's failure columns add up to the footer's %d failures: %r" % (failures, rows[0]))
        check(row["PASS"] + row["FAIL"] + row["FALLBACK"] + row["ERROR"] + row["CRASH"] == row["FORMS"],
              "every form is in one column: %r" % (rows[0],))
        with open(paths["json"]) as f:
            report = json.load(f)
        b = report["backends"][0]
        check((b["pass"], b["fail"], b["fallback"], b["failures"]) ==
              (row["PASS"], row["FAIL"], row["FALLBACK"], failures),
              "the JSON counts are the table's: %r" % (b,))
        check(sum(1 for r in report["results"] if r["counts_as_failure"]) == failures,
              "as many JSON results count as failures as the footer says")
        suites = ET.parse(paths["xml"]).getroot()
        check(int(suites.get("failures")) + int(suites.get("errors")) == failures,
              "JUnit failures and errors add up to the footer's failures")
        with open(paths["md"]) as f:
            md = f.read()
        check("| fallback |" in md and "| %d | %d | 1 | 0 | 0 |" % (row["PASS"], row["FAIL"]) in md,
              "the Markdown summary has the same pass, fail and fallback counts")
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


def test_native(a):
    # --native certifies what a plugin serves itself, with no regex: the
    # device checks and the specs with a native kernel on the backend (the
    # declared plugin's add.out; every form of add runs), nothing served by
    # a fallback, so --strict passes it.
    path = os.path.join(a.work_dir, "native.json")
    proc = run(["conformance", "--backend", "declared", "--native", "--strict", "--json", path], a.backplane,
               [a.cpu_plugin, a.declared_plugin])
    check(proc.returncode == 0 and "conformance: PASSED" in proc.stdout,
          "--native --strict passes the declared plugin, got exit %d:\n%s%s" % (proc.returncode, proc.stdout,
                                                                             proc.stderr))
    check(re.search(r"^conformance: --native: 1 op spec has a native kernel on declared$", proc.stderr, re.M),
          "--native says how many specs it chose: %r" % proc.stderr)
    with open(path) as f:
        report = json.load(f)
    ops = {r["op"] for r in report["results"]}
    check({"device.allocate", "device.copy", "device.synchronize"} <= ops, "the device checks run: %r" % ops)
    check({o for o in ops if not o.startswith("device.")} == {"bp::add.Tensor", "bp::add_.Tensor", "bp::add.out"},
          "only add's forms run, add.out being its one native kernel: %r" % ops)
    usage = run(["conformance", "--native", "--onnx", a.work_dir], a.backplane, [a.cpu_plugin])
    check(usage.returncode == 2 and "--native selects op specs" in usage.stderr,
          "--native with --onnx is a usage error: %r" % usage.stderr)


def test_stream_and_event_checks(a):
    # tp_good's two devices have streams, events and event_wait_device (ABI
    # 1.8): device.streams and device.events run, the latter once per device
    # and once across the two. (Only those two: tp_good's arena allocates
    # with operator new, which a sanitizer build without
    # allocator_may_return_null aborts on device.allocate's 2^60 bytes.)
    path = os.path.join(a.work_dir, "tpdev.json")
    proc = run(["conformance", "--backend", "tpdev", "--ops", r"^device\.(streams|events)$", "--json", path],
               a.backplane, [a.cpu_plugin, a.tp_good_plugin])
    check(proc.returncode == 0, "tp_good's device checks pass: %s%s" % (proc.stdout, proc.stderr))
    with open(path) as f:
        res = {r["op"]: r for r in json.load(f)["results"]}
    check(set(res) == {"device.streams", "device.events"},
          "the stream and event checks run where the type has them: %r" % sorted(res))
    events = res.get("device.events")
    check(events is not None and events["outcome"] == "pass" and events["samples"] == 5,
          "device.events: two steps per device and one across them: %r" % (events,))


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


def test_explicit_plugin_that_does_not_load(a):
    # Named with --plugin, a plugin that fails to load fails the run, even
    # with no --backend (the other backends would pass without it).
    missing = os.path.join(a.work_dir, "no_such_plugin.so")
    proc = run(["conformance", "--ops", r"^bp::mul\b"], a.backplane, [a.cpu_plugin, missing])
    check(proc.returncode == 1, "a plugin named with --plugin that does not load fails the run, got %d" %
          proc.returncode)
    check("conformance: PASSED" not in proc.stdout and "the plugin named with --plugin %s did not load" % missing
          in proc.stderr and "No such file or directory" in proc.stderr,
          "the error names the plugin's path and why it did not load")


def test_devices(a):
    plugins = [a.cpu_plugin, a.faulty_plugin]
    # --device 1: the op specs run on faulty:1, where neg.out is wrong.
    path = os.path.join(a.work_dir, "device1.json")
    proc = run(["conformance", "--backend", "faulty", "--ops", r"^bp::neg\b", "--device", "1", "--json", path],
               a.backplane, plugins)
    check(proc.returncode == 1, "neg on faulty:1 fails, got %d" % proc.returncode)
    with open(path) as f:
        report = json.load(f)
    check([(b["name"], b["device"]) for b in report["backends"]] == [("faulty", 1)],
          "the report names the device the run used: %r" % (report["backends"],))
    out = results_by_op_form(report, device=1).get(("faulty", "bp::neg.out", "out"))
    check(out is not None and out["outcome"] == "fail" and out["sample"] == "[3,4] float32",
          "neg.out is wrong on device 1 only: %r" % (out,))
    check("faulty:1  bp::neg.out (out, native): fail" in proc.stdout, "the failure list names faulty:1")
    check(any(r.get("BACKEND") == "faulty" and r.get("DEVICE") == "1" for r in summary_rows(proc.stdout)),
          "the summary has a DEVICE column")

    # --all-devices: one run per device; the device checks (which cover
    # every device) run once, with device 0.
    path = os.path.join(a.work_dir, "all_devices.json")
    xml = os.path.join(a.work_dir, "all_devices.xml")
    proc = run(["conformance", "--backend", "faulty", "--ops", r"^(bp::mul\b|device\.)", "--all-devices", "--json",
                path, "--junit", xml], a.backplane, plugins)
    check(proc.returncode == 0, "mul passes on both faulty devices, got %d" % proc.returncode)
    with open(path) as f:
        report = json.load(f)
    check([(b["name"], b["device"]) for b in report["backends"]] == [("faulty", 0), ("faulty", 1)],
          "one run per device: %r" % (report["backends"],))
    for device in (0, 1):
        r = results_by_op_form(report, device).get(("faulty", "bp::mul.out", "out"))
        check(r is not None and r["outcome"] == "pass", "mul.out passes on faulty:%d: %r" % (device, r))
    check(("faulty", "device.several_devices", "device") in results_by_op_form(report, 0) and
          not any(r["form"] == "device" for r in report["results"] if r["device"] == 1),
          "the device checks run once, with device 0")
    names = [s.get("name") for s in ET.parse(xml).getroot().iter("testsuite")]
    check(names == ["faulty:0", "faulty:1"], "a JUnit suite per device: %r" % (names,))

    # A device the backend does not have is an error naming its count.
    proc = run(["conformance", "--backend", "faulty", "--ops", r"^bp::mul\b", "--device", "2"], a.backplane, plugins)
    check(proc.returncode == 2 and "--device 2 is out of range for backend 'faulty', which has 2 devices" in
          proc.stderr, "--device 2 on a 2-device backend is an error naming its device count")
    # Without --backend, every backend must have the device (cpu has one).
    proc = run(["conformance", "--ops", r"^bp::mul\b", "--device", "1"], a.backplane, plugins)
    check(proc.returncode == 2 and "backend 'cpu', which has 1 device" in proc.stderr,
          "--device 1 with cpu among the backends is an error naming cpu's count")


def test_usage_errors(a):
    plugins = [a.cpu_plugin]
    for args, needle in ((["conformance", "--backend", "nosuch"], "no loaded plugin provides backend 'nosuch'"),
                         (["conformance", "--ops", "("], "--ops '(' is not a valid regular expression (RE2 syntax): "
                                                         "missing ): ("),
                         # A selection of nothing must not pass (Note [Name patterns]).
                         (["conformance", "--ops", "bp::reluu"], "--ops 'bp::reluu' matches none of the "),
                         (["conformance", "--ops", "bp::reluu"], "run 'backplane ops' to list the op names"),
                         # Backtracking would never end; RE2 answers at once.
                         (["conformance", "--ops", "(.+)+X"], "--ops '(.+)+X' matches none of the "),
                         (["conformance", "--ops", ".x" * 30000], "the --ops pattern is too large (60000 bytes): it "
                                                                  "compiles past RE2's memory limit of 1 MiB"),
                         (["conformance", "--ops", "a" * 90000], "the --ops pattern is too large (90000 bytes; at "
                                                                 "most 65536)"),
                         (["conformance", "--timeout", "0"], "positive number of seconds"),
                         (["conformance", "--timeout", "1e300"], "at most 2592000 (30 days), not '1e300'"),
                         (["conformance", "--timeout", "inf"], "at most 2592000 (30 days), not 'inf'"),
                         # An option value that is an option: not a file named "--strict".
                         (["conformance", "--json", "--strict"], "option --json needs a value, not the option "
                                                                 "'--strict' (for a value that starts with '--', "
                                                                 "write --json=--strict)"),
                         (["conformance", "--ops", "--strict"], "option --ops needs a value, not the option"),
                         (["conformance", "--device", "-1"], "needs a device index"),
                         (["conformance", "--device", "1", "--all-devices"], "exclude each other"),
                         (["devices", "--all-devices"], "applies only to the 'conformance' command"),
                         (["ops", "--strict"], "applies only to the 'conformance' command")):
        start = time.monotonic()
        proc = run(args, a.backplane, plugins, timeout=60)
        shown = [x if len(x) < 40 else x[:10] + "..." for x in args]
        check(proc.returncode == 2, "%s is a usage error (exit 2), got %d" % (shown, proc.returncode))
        check(needle in proc.stderr, "%s says %r" % (shown, needle))
        check(time.monotonic() - start < 20, "%s is refused at once" % (shown,))
    check(not os.path.exists("--strict"), "--json --strict writes no file named --strict")


def test_report_paths(a):
    """Each report path is checked before the run, writable and its own, and
    nothing is written or emptied when one is refused."""
    plugins = [a.cpu_plugin]
    existing = os.path.join(a.work_dir, "existing.json")
    with open(existing, "w") as f:
        f.write("kept")
    spelled = os.path.join(a.work_dir, ".", "sub", "..", "existing.json")
    os.makedirs(os.path.join(a.work_dir, "sub"), exist_ok=True)
    link = os.path.join(a.work_dir, "link.xml")
    if not os.path.lexists(link):
        os.symlink(existing, link)
    missing_dir = os.path.join(a.work_dir, "no_such_folder")
    for args, needle in (
            (["--json", existing, "--junit", existing], "--junit %s names the same file as --json %s: give each "
                                                        "report its own file" % (existing, existing)),
            (["--json", existing, "--markdown", spelled], "names the same file as --json"),
            (["--json", existing, "--junit", link], "names the same file as --json"),
            (["--json", os.path.join(missing_dir, "r.json")], "cannot write the report --json %s: its folder %s "
                                                              "does not exist" % (os.path.join(missing_dir, "r.json"),
                                                                                 missing_dir)),
            (["--junit", a.work_dir], "cannot write the report --junit %s: it is a folder" % a.work_dir)):
        # A selection of many ops: a refusal after the run would take long.
        proc = run(["conformance", "--backend", "cpu", "--ops", "^bp::", "--timeout", "5"] + args, a.backplane,
                   plugins, timeout=60)
        check(proc.returncode == 2 and needle in proc.stderr, "%s is refused before the run: %r" % (args, needle))
        check("conformance: running" not in proc.stderr, "%s: nothing runs" % (args,))
        with open(existing) as f:
            check(f.read() == "kept", "%s leaves the existing report as it was" % (args,))


def test_hostile_messages(a):
    """The faulty plugin's sign.out fails with bytes that are not UTF-8, an ANSI
    colour sequence and 1 MiB of text (Note [Report text])."""
    paths = {k: os.path.join(a.work_dir, "hostile." + k) for k in ("json", "xml", "md")}
    proc = run(["conformance", "--backend", "faulty", "--ops", r"^bp::sign\b", "--json", paths["json"],
                "--junit", paths["xml"], "--markdown", paths["md"]], a.backplane, [a.cpu_plugin, a.faulty_plugin])
    check(proc.returncode == 1, "the hostile kernel fails the run, got %d" % proc.returncode)
    for name, path in paths.items():
        with open(path, "rb") as f:
            data = f.read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            check(False, "the %s report is UTF-8: %s" % (name, e))
        check(len(data) < 64 * 1024, "the %s report holds capped messages: %d bytes" % (name, len(data)))
        if name != "json":  # JSON escapes it as \u001b
            check(b"\x1b" not in data and b"\\x1b[31mred" in data, "the %s report shows the escape as text" % name)
    with open(paths["json"], encoding="utf-8") as f:
        report = json.load(f)
    ET.parse(paths["xml"])  # raises if ill-formed
    messages = [r["message"] for r in report["results"] if r["op"].startswith("bp::sign")]
    check(len(messages) == 4, "the four forms of sign fail (functional, inplace, out, gradient): %r" % (len(messages),))
    for m in messages:
        check("\ufffd\ufffd \x1b[31mred" in m, "the bytes that are not UTF-8 are U+FFFD in JSON: %r" % m[:200])
        check(len(m) < 4200 and re.search(r"\.\.\. \(\d+ more bytes; --full-errors to see all\)$", m),
              "a 1 MiB message is cut at 4 KiB, saying how to see it all: %d, %r" % (len(m), m[-80:]))
    check("\x1b" not in proc.stdout and "\\x1b[31mred" in proc.stdout, "the summary shows the escape as text")
    check(len(proc.stdout) < 64 * 1024, "the summary holds capped messages: %d" % len(proc.stdout))
    full = run(["conformance", "--backend", "faulty", "--ops", r"^bp::sign\.out$", "--full-errors", "--json",
                paths["json"]], a.backplane, [a.cpu_plugin, a.faulty_plugin])
    with open(paths["json"], encoding="utf-8") as f:
        whole = [r["message"] for r in json.load(f)["results"]]
    check(full.returncode == 1 and whole and len(whole[0]) > 1 << 20 and "more bytes" not in whole[0],
          "--full-errors keeps the whole message: %r" % ([len(m) for m in whole],))


def processes_in_session(sid):
    """The live processes of session `sid` (the tool and its workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, session, ...
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry))
    return found


def test_killing_the_tool_kills_its_workers(a):
    """A worker inside a hung kernel dies with the tool: SIGTERM (forwarded
    to its process group) and SIGKILL (its parent-death signal)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        cmd = command(["conformance", "--backend", "faulty", "--ops", r"^bp::abs\b", "--timeout", "200"],
                      a.backplane, [a.cpu_plugin, a.faulty_plugin])
        # A session of its own: every process it starts is found by its id.
        proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        workers = []
        while time.monotonic() < deadline and not workers:
            workers = [p for p in processes_in_session(proc.pid) if p != proc.pid]
            time.sleep(0.1)
        check(workers, "the tool started a worker (%s)" % sig.name)
        time.sleep(1)  # into the hanging kernel
        proc.send_signal(sig)
        proc.wait(30)
        check(proc.returncode == -sig, "the tool ends by %s: %r" % (sig.name, proc.returncode))
        deadline = time.monotonic() + 5
        left = processes_in_session(proc.pid)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = processes_in_session(proc.pid)
        check(not left, "no worker outlives the tool killed by %s: %r" % (sig.name, left))
        for p in left:  # leave nothing behind even when the check failed
            os.kill(p, signal.SIGKILL)


def main():
    p = argparse.ArgumentParser()
    for name in ("--backplane", "--cpu-plugin", "--faulty-plugin", "--declared-plugin", "--cli-test-plugin",
                 "--tp-good-plugin", "--work-dir"):
        p.add_argument(name, required=True)
    a = p.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    test_faulty_plugin(a)
    test_hanging_kernel(a)
    test_strict_and_clean_runs(a)
    test_declared_dtypes(a)
    test_native(a)
    test_stream_and_event_checks(a)
    test_backends_without_devices(a)
    test_explicit_plugin_that_does_not_load(a)
    test_devices(a)
    test_usage_errors(a)
    test_report_paths(a)
    test_hostile_messages(a)
    test_killing_the_tool_kills_its_workers(a)
    if FAILURES:
        print("\n%d check(s) failed:\n  " % len(FAILURES) + "\n  ".join(FAILURES), file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
