"""Conformance from Python: certify backends op by op, as the
`backplane conformance` command does, with the results as objects.

    report = backplane.conformance.run(backend="cpu", ops=[r"^bp::add\\b"],
                                       junit="conformance.xml")
    assert report.passed, report.text
    for r in report.failures:
        print(r.op, r.form, r.kernel, r.outcome, r.message)

Note [Conformance from Python]
run() runs the package's own `backplane` tool (the build's in a build tree,
backplane/bin/backplane in a wheel: Note [The Python package's layout] in
python/CMakeLists.txt) as `backplane conformance ... --json FILE` and reads
the JSON it writes back as objects. The command is the one implementation:
it starts a worker process per backend (and again after a crash), so a
kernel that crashes or hangs costs one form of one op and never this
interpreter; the JUnit and Markdown files are the command's own, and the
JSON file is its report copied once it is complete; its errors (an unknown
backend, a bad --ops regex, a selection of nothing, a plugin that does not
load) are raised with its message. Report paths are checked before the run
without creating or truncating anything, so a run refused for its arguments
leaves existing reports as they were. Whatever bytes a plugin or a kernel
puts in a name or a message, the report is UTF-8 (Note [Report text] in
conformance/include/backplane/conformance/text_format.h). If this
interpreter is interrupted (KeyboardInterrupt) during the run,
subprocess.run kills the tool, and its workers die with it (Note [Workers
die with their parent] in conformance/src/workers.cc). The tool loads the default plugin sources as
this process did at import, and run() also hands it every plugin this
process has loaded (backplane.load_plugin() included), so the backends are
the ones this process sees, plus `plugins`.
"""
import errno
import json as _json
import math
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Optional, Tuple

from . import _backplane

__all__ = ["run", "Report", "BackendRun", "Result"]

# The command's per-op time limit (--timeout), in seconds, and its largest
# (30 days: kMaxTimeoutSeconds in backplane/conformance/command.h).
DEFAULT_TIMEOUT = 300.0
MAX_TIMEOUT = 30 * 24 * 3600.0


@dataclass(frozen=True)
class Result:
    """One form of one op spec (or one device check) on one backend."""

    backend: str  # "cpu", "cuda", ...
    device: int  # the device index the op specs ran on
    op: str  # the form's op, "bp::add_.Tensor", or a device check, "device.allocate"
    form: str  # "functional", "inplace", "out"; "device" for a device check, "all" for a whole op
    # What served the op: "native", "composite", "backend_fallback",
    # "cpu_fallback", "missing"; "-" for a device check.
    kernel: str
    # "pass", "fail", "error" or "crash"; for ONNX node tests also
    # "unsupported" (no standard op expresses the node) and "xfail" (a
    # listed expected failure); neither counts as a failure.
    outcome: str
    counts_as_failure: bool  # anything but a pass, or a fallback under strict=True
    samples: int  # samples run
    sample: str  # the failing (or crashing) sample's name
    message: str  # what went wrong
    max_abs_error: Optional[float]  # over the failing sample; None where not finite
    max_rel_error: Optional[float]
    # For a native kernel that declares the dtypes it serves: those dtypes,
    # and what served the samples of the others (Note [Declared dtypes]).
    dtypes: Optional[Tuple[str, ...]]
    declined: Optional[str]
    note: str  # worth knowing, not a failure

    @property
    def kernel_kind(self):
        """`kernel`, or None for a device check (which has no kernel)."""
        return None if self.kernel == "-" else self.kernel


@dataclass(frozen=True)
class BackendRun:
    """One backend on one device, as the command's summary shows it."""

    name: str
    provider: str  # "built-in", or the plugin that registered the device type
    devices: int
    device: int
    status: str  # "run", "skipped" (no devices, not named) or "aborted" (could not finish)
    reason: str  # why it was skipped or aborted
    seconds: float
    # "forms", "pass", "fail", "fallback" (passed on a fallback: failures
    # under strict=True), "error", "crash", "unsupported" and "xfail" (ONNX
    # node tests), "failures" (what the verdict counts, an aborted run
    # included).
    counts: dict


@dataclass(frozen=True)
class Report:
    """What run() found: the verdict, each backend's counts and every result."""

    passed: bool  # the verdict: nothing counted as a failure
    strict: bool
    backends: Tuple[BackendRun, ...]
    results: Tuple[Result, ...]
    text: str  # what the command printed: the summary table, failures, the verdict
    log: str  # what it wrote to stderr: the backends it ran, warnings

    @property
    def verdict(self):
        """"PASSED" or "FAILED", as the command prints it."""
        return "PASSED" if self.passed else "FAILED"

    @property
    def failures(self):
        """The results that count as failures (the verdict's)."""
        return [r for r in self.results if r.counts_as_failure]

    @property
    def counts(self):
        """The backends' counts added up ("forms", "pass", "fail", ...)."""
        total = {}
        for b in self.backends:
            for k, v in b.counts.items():
                total[k] = total.get(k, 0) + v
        return total

    def __iter__(self):
        return iter(self.results)

    def __len__(self):
        return len(self.results)


def _tool():
    """The package's `backplane` tool (Note [The Python package's layout])."""
    try:
        from . import _build_paths
    except ImportError:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "backplane")
    else:
        path = _build_paths.tool
    if not os.access(path, os.X_OK):
        raise _error(
            _backplane.UnavailableError, "UNAVAILABLE",
            f"backplane.conformance needs the package's `backplane` tool, which is not at {path}: "
            "the installation is incomplete (reinstall the package, or rebuild the build tree's "
            "target backplane_python_package)")
    return path


def _ops_regex(ops):
    if ops is None:
        return None
    if isinstance(ops, str):
        if not ops:
            raise ValueError("ops='' selects nothing; pass None to run every op")
        return ops
    try:
        items = list(ops)
    except TypeError:
        raise TypeError(
            "ops must be a regular expression (str), a list of them, or None, "
            f"not {type(ops).__name__}") from None
    if not items:
        raise ValueError("ops=[] selects nothing; pass None to run every op")
    for o in items:
        if not isinstance(o, str) or not o:
            raise TypeError(f"ops must hold non-empty str regular expressions, not {o!r}")
    return items[0] if len(items) == 1 else "|".join(f"(?:{o})" for o in items)


def _check_report_path(name, path):
    """Raises OSError unless `path` can be written as a report, creating and
    truncating nothing (the command checks again before its run)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, f"{name}={path!r} is a folder; name a file in it", path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(path):
        if not os.path.isdir(folder):
            raise FileNotFoundError(errno.ENOENT, f"the folder of {name}={path!r} does not exist; create it first",
                                    path)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, f"{name}={path!r} cannot be created in {folder}", path)
    elif not os.access(path, os.W_OK):
        raise PermissionError(errno.EACCES, f"{name}={path!r} cannot be written", path)


def _strs(value, what):
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    out = []
    for v in value:
        if not isinstance(v, (str, os.PathLike)):
            raise TypeError(f"{what} must be a str or a list of str, not {type(v).__name__}")
        out.append(os.fspath(v))
    return out


def _messages(stderr):
    """The command's error lines, without their "backplane: error: " prefix."""
    prefix = "backplane: error: "
    lines = [l[len(prefix):] for l in stderr.splitlines() if l.startswith(prefix)]
    return "\n".join(lines) if lines else stderr.strip()


def _error(cls, code, message):
    """A backplane.Error subclass as the extension raises them (with `code`)."""
    e = cls(message)
    e.code = code
    return e


def _finite(v):
    return float(v) if v is not None and math.isfinite(v) else None


def _parse(data, text, log):
    results = tuple(
        Result(backend=r["backend"], device=r["device"], op=r["op"], form=r["form"],
               kernel=r["kernel"], outcome=r["outcome"],
               counts_as_failure=r["counts_as_failure"], samples=r["samples"],
               sample=r["sample"], message=r["message"],
               max_abs_error=_finite(r["max_abs_error"]),
               max_rel_error=_finite(r["max_rel_error"]),
               dtypes=None if r["dtypes"] is None else tuple(r["dtypes"]),
               declined=r["declined"], note=r["note"])
        for r in data["results"])
    count_keys = ("forms", "pass", "fail", "fallback", "error", "crash", "unsupported", "xfail", "failures")
    backends = tuple(
        BackendRun(name=b["name"], provider=b["provider"], devices=b["devices"],
                   device=b["device"], status=b["status"], reason=b["reason"],
                   seconds=b["seconds"] if b["seconds"] is not None else math.nan,
                   counts={k: b[k] for k in count_keys})
        for b in data["backends"])
    return Report(passed=data["passed"], strict=data["strict"], backends=backends,
                  results=results, text=text, log=log)


def run(backend=None, *, device=None, ops=None, plugins=(), default_plugins=True,
        strict=False, junit=None, json=None, markdown=None, timeout=DEFAULT_TIMEOUT,
        full_errors=False):
    """Certifies backends op by op, as `backplane conformance` does, and
    returns a Report (Note [Conformance from Python]).

    backend: a backend name ("cpu", "cuda") or a list of them; None runs
        every backend with devices (--backend).
    device: the device index the op specs run on (default 0), or "all" for
        one run per device (--device N, --all-devices).
    ops: a regular expression (RE2 syntax, searched anywhere in the op's
        name; matched in linear time) or a list of them, any of which selects
        an op; None runs every op (--ops). A selection that matches no op
        raises.
    plugins: paths of plugin libraries to load as well (--plugin); one that
        does not load raises.
    default_plugins: False runs with `plugins` only: not this process's
        plugins nor the default sources (--no-default-plugins).
    strict: an op served by a fallback counts as a failure (--strict).
    junit, json, markdown: paths the command writes its reports to, each
        its own file.
    timeout: seconds per op before it is reported as a crash (--timeout),
        at most MAX_TIMEOUT (30 days).
    full_errors: keep every message whole; by default one longer than
        4 KiB is cut, ending "... (N more bytes; --full-errors to see all)"
        (--full-errors).

    A run with failures returns a Report whose `passed` is False. Raises
    InvalidArgumentError (a ValueError) with the command's message for an
    unknown backend, a device out of range, a bad regex, a regex that
    selects nothing, two reports on one file or a plugin that does not
    load, TypeError/ValueError for arguments of the wrong kind, OSError for
    a report path that cannot be written (checked before the run, emptying
    nothing), and another backplane.Error if the command itself fails.
    """
    backends = _strs(backend, "backend")
    if device is not None and device != "all" and (
            isinstance(device, bool) or not isinstance(device, int) or device < 0):
        raise ValueError(f"device must be a device index (0, 1, ...), 'all' or None, not {device!r}")
    regex = _ops_regex(ops)
    plugin_paths = _strs(plugins, "plugins")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if timeout > MAX_TIMEOUT:
        raise ValueError(f"timeout must be at most {MAX_TIMEOUT:g} seconds (30 days), not {timeout!r}")
    tool = _tool()
    reports = {"json": json, "junit": junit, "markdown": markdown}
    for name, path in reports.items():
        if path is not None:
            if not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"{name} must be a path (str or os.PathLike), not {type(path).__name__}")
            # A path that cannot be written fails here, as Python's OSError,
            # before anything runs, and nothing is created or emptied.
            _check_report_path(name, path)
    given = [(name, os.path.realpath(os.fspath(p))) for name, p in reports.items() if p is not None]
    for i, (name, real) in enumerate(given):
        for other, other_real in given[:i]:
            if real == other_real:
                raise _error(_backplane.InvalidArgumentError, "INVALID_ARGUMENT",
                             f"{name} and {other} name the same file ({real}): give each report its own file")

    argv = [tool]
    if default_plugins:
        # This process's plugins (the default sources' and load_plugin()'s):
        # the tool loads each library once whatever the path it is named by.
        seen = set(plugin_paths)
        for p in _backplane.plugins():
            if p.loaded and p.path not in seen:
                seen.add(p.path)
                plugin_paths.append(p.path)
    else:
        argv.append("--no-default-plugins")
    argv += [f"--plugin={p}" for p in plugin_paths]
    argv.append("conformance")
    argv += [f"--backend={b}" for b in backends]
    if device == "all":
        argv.append("--all-devices")
    elif device is not None:
        argv.append(f"--device={device}")
    if regex is not None:
        argv.append(f"--ops={regex}")
    if strict:
        argv.append("--strict")
    argv.append(f"--timeout={float(timeout)!r}")
    if full_errors:
        argv.append("--full-errors")
    for name in ("junit", "markdown"):
        if reports[name] is not None:
            argv.append(f"--{name}={os.fspath(reports[name])}")

    with tempfile.TemporaryDirectory(prefix="backplane-conformance-") as tmp:
        # The command writes into this fresh folder: a run that stops early
        # leaves no report to read, and json= is replaced only by a whole one.
        json_path = os.path.join(tmp, "report.json")
        argv.append(f"--json={json_path}")
        # On any exception here (KeyboardInterrupt included) subprocess.run
        # kills the tool; its workers die with it.
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace")
        if proc.returncode == 2:  # a usage error: the arguments
            raise _error(_backplane.InvalidArgumentError, "INVALID_ARGUMENT", _messages(proc.stderr))
        if proc.returncode < 0:
            raise _error(
                _backplane.InternalError, "INTERNAL",
                f"the backplane tool ({tool}) was killed by signal {-proc.returncode} "
                f"running conformance; its last output:\n{proc.stderr[-4000:]}")
        try:
            # The command writes UTF-8 (Note [Report text]); a byte that is
            # not would still become U+FFFD, not a UnicodeDecodeError.
            with open(json_path, encoding="utf-8", errors="replace") as f:
                data = _json.load(f)
        except FileNotFoundError:
            data = None
        if data is None or proc.returncode not in (0, 1):
            message = _messages(proc.stderr)
            if "did not load" in message:  # a plugin named with --plugin
                raise _error(_backplane.InvalidArgumentError, "INVALID_ARGUMENT", message)
            raise _error(
                _backplane.UnknownError, "UNKNOWN",
                f"`backplane conformance` failed (exit status {proc.returncode}) without a "
                f"report: {message}")
        if json is not None:
            shutil.copyfile(json_path, os.fspath(json))
    report = _parse(data, proc.stdout, proc.stderr)
    if proc.returncode == 1 and report.passed:  # a report file it could not write
        raise _error(_backplane.UnknownError, "UNKNOWN", _messages(proc.stderr))
    return report
