"""The profiler: which ops ran, on which backend, how (native, composite,
fallback) and for how long.

    with backplane.profile() as p:
        y = model(x)
    print(p.table())
    for row in p.rows():
        print(row.op, row.backend, row.calls, row.how, row.self_time)

Every op call made while the profile records, on any thread and through any
entry point (these functions, Tensor methods, backplane.ops, plugins'
kernels calling ops), counts in the row (op, backend) of the backend whose
kernel served it. Self times add up to the time spent in ops; total times
include the ops each call made (backplane/runtime/profiler.h has the details, and
what `synchronize_device` changes on asynchronous devices).

With record_events=True it also keeps every call for a timeline, which
export_chrome_trace(path) writes in the Chrome trace event format, as
PyTorch's profiler does: open it in Perfetto (ui.perfetto.dev) or
chrome://tracing. It has a track per thread and, on devices with event
timing (CUDA, HIP, gpusim), one per stream with the device's own time.

One profile records at a time in a process: starting a second while one
records raises FailedPreconditionError, and the first keeps recording. A
profile's report can be read while it records (a snapshot) and after it
stopped; an exception leaving the `with` block stops the recording and
propagates, and the calls made until then (the failed one included, counted
in failed_calls) stay in the report.
"""
from . import _backplane
from ._backplane import OpReport, OpStats  # noqa: F401

__all__ = ["profile", "OpReport", "OpStats"]


class profile:
    """Records every op call between start() and stop(), or over a `with`
    block. Each profile records once; make a new one to record again.

    synchronize_device: wait for the device before and after every op on a
    device other than the CPU, so that each op's time includes its device
    work (slower, but honest per-op times on asynchronous devices).
    """

    def __init__(self, synchronize_device=False, record_events=False):
        for name, value in (("synchronize_device", synchronize_device), ("record_events", record_events)):
            if not isinstance(value, bool):
                raise TypeError(f"backplane.profile(): {name} must be True or False, not {type(value).__name__}")
        self.synchronize_device = synchronize_device
        self.record_events = record_events
        self._profiler = None
        self._final = None  # the report once stopped (it no longer changes)

    def start(self):
        """Starts recording. Raises FailedPreconditionError if another
        profile records, RuntimeError if this one has already recorded."""
        if self._profiler is not None:
            raise RuntimeError(
                "this backplane.profile() has already recorded; each profile records once: "
                "make a new backplane.profile() to record again")
        try:
            self._profiler = _backplane._Profiler(self.synchronize_device, self.record_events)
        except _backplane.FailedPreconditionError as e:
            error = _backplane.FailedPreconditionError(
                "cannot start backplane.profile(): another profile is already recording in this "
                "process, and profiles do not nest (each call would be charged to both). Leave the "
                "outer `with backplane.profile()` block (or call its stop()) first, or read the "
                "outer profile's rows() at the points you want to compare")
            error.code = e.code
            raise error from None
        return self

    def stop(self):
        """Stops recording; calls still running on other threads are not
        recorded. Idempotent. The report stays available."""
        if self._profiler is not None and self._final is None:
            self._profiler.stop()
            self._final = self._profiler.report()

    @property
    def recording(self):
        """Whether this profile records now."""
        return self._profiler is not None and self._final is None

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False  # an exception from the block propagates

    def report(self):
        """The OpReport: the final one once stopped, else a snapshot of what
        was recorded so far (calls finishing meanwhile on other threads may
        or may not be in it)."""
        if self._final is not None:
            return self._final
        if self._profiler is None:
            raise RuntimeError(
                "this backplane.profile() has not started: use it as "
                "`with backplane.profile() as p:` or call p.start() first")
        return self._profiler.report()

    def rows(self):
        """One OpStats per (op, backend), longest self time first."""
        return self.report().rows

    def find(self, op, backend="CPU"):
        """The row of `op` ('bp::add.Tensor') on `backend` ('CPU', 'cuda',
        or a device type 'cpu'), or None if it did not run there."""
        return self.report().find(op, backend)

    def export_chrome_trace(self, path, pid=0, process_name="backplane"):
        """Writes the recorded calls to `path` as a Chrome trace (JSON) and
        returns the path. Needs record_events=True. `pid` and
        `process_name` name the trace's process (a rank, when the traces
        of several processes are merged)."""
        if not self.record_events:
            raise RuntimeError(
                "export_chrome_trace needs the calls' timeline: make the profile with "
                "backplane.profile(record_events=True)")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.report().chrome_trace(pid, process_name))
        return path

    def table(self):
        """A fixed-width table of every row, then the summary line: the text
        OpReport::table() prints in C++."""
        return self.report().table()

    def summary(self):
        """One line: ops, calls, how they ran, time in ops, wall time and
        host<->device transfers."""
        return self.report().summary()

    @property
    def wall_time(self):
        """Seconds from start until stop (until now while recording)."""
        return self.report().wall_time

    def __repr__(self):
        state = ("recording" if self.recording
                 else "stopped" if self._final is not None else "not started")
        return f"<backplane.profile {state}>"
