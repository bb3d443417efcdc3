"""backplane.profile(): op calls attributed to (op, backend) rows, how they
ran, the report's text, and the context manager's behaviour when it is read
early, nested, or left by an exception; its timeline as a Chrome trace."""
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import backplane


@pytest.fixture
def xy():
    return backplane.ones([4, 4]), backplane.ones([4, 4])


def test_counts_each_call_of_an_op_on_its_backend(xy):
    x, y = xy
    with backplane.profile() as p:
        for _ in range(5):
            backplane.add(x, y)
    row = p.find("bp::add.Tensor", "CPU")
    assert row is not None, p.table()
    assert (row.op, row.backend, row.calls) == ("bp::add.Tensor", "CPU", 5)
    assert row.failed_calls == 0
    assert row.fallback_calls == 0 and row.fallback_bytes == 0
    assert row.transfer_bytes == 0 and row.transfer_copies == 0
    # A device type names the same backend as its dispatch key.
    assert p.find("bp::add.Tensor", "cpu").calls == 5
    assert p.find("bp::mul.Tensor") is None


def test_composite_and_native_rows_and_their_times(xy):
    x, y = xy
    with backplane.profile() as p:
        for _ in range(3):
            x + y
    # add.Tensor is a composite over the CPU plugin's add.out kernel: both
    # rows, each call counted once by how it ran.
    composite = p.find("bp::add.Tensor")
    native = p.find("bp::add.out")
    assert (composite.calls, composite.composite_calls, composite.native_calls) == (3, 3, 0)
    assert (native.calls, native.native_calls, native.composite_calls) == (3, 3, 0)
    assert composite.how == "composite" and native.how == "native"
    # Total time includes the nested calls, self time does not.
    assert native.self_time_ns == native.total_time_ns > 0
    assert composite.total_time_ns >= composite.self_time_ns + native.total_time_ns
    assert composite.total_time == pytest.approx(composite.total_time_ns / 1e9)
    assert composite.self_time == pytest.approx(composite.self_time_ns / 1e9)


def test_rows_agree_with_the_calls_made(xy):
    x, y = xy
    with backplane.profile() as p:
        for _ in range(4):
            backplane.mul(x, y)
        backplane.matmul(x, y)
    rows = p.rows()
    by_op = {(r.op, r.backend): r for r in rows}
    assert by_op[("bp::mul.Tensor", "CPU")].calls == 4
    assert by_op[("bp::mul.out", "CPU")].calls == 4
    assert by_op[("bp::matmul", "CPU")].calls == 1
    for r in rows:
        assert r.calls == r.native_calls + r.composite_calls + r.cpu_fallback_calls + r.backend_fallback_calls
    # Longest self time first; self times add up to the time in ops.
    selfs = [r.self_time_ns for r in rows]
    assert selfs == sorted(selfs, reverse=True)
    assert sum(selfs) <= p.report().wall_time_ns
    assert 0 < p.wall_time < 60


def test_table_is_the_reports_text(xy):
    x, y = xy
    with backplane.profile() as p:
        backplane.add(x, y)
        backplane.mul(x, y)
    table = p.table()
    lines = table.splitlines()
    assert lines[0].split() == ["op", "backend", "calls", "how", "fallback", "bytes", "host<->device", "self",
                                "self", "%", "total"]
    for op in ("bp::add.Tensor", "bp::add.out", "bp::mul.Tensor", "bp::mul.out"):
        assert any(line.split()[:3] == [op, "CPU", "1"] for line in lines[1:]), table
    # One line per row, then the summary line.
    assert len(lines) == 1 + len(p.rows()) + 1
    assert table == str(p.report())
    assert lines[-1] == p.summary()
    assert p.summary().startswith("4 ops ran (4 calls): 2 native, 2 composite, 0 fell back (0 calls, 0 B copied); ")


def test_calls_outside_the_block_are_not_recorded(xy):
    x, y = xy
    backplane.add(x, y)
    with backplane.profile() as p:
        backplane.add(x, y)
    backplane.add(x, y)
    assert not p.recording
    assert p.find("bp::add.Tensor").calls == 1
    wall = p.wall_time
    assert p.wall_time == wall  # stopped: the report no longer changes


def test_report_read_while_recording_is_a_snapshot(xy):
    x, y = xy
    with backplane.profile() as p:
        backplane.add(x, y)
        assert p.recording
        early = p.report()
        assert early.find("bp::add.Tensor").calls == 1
        assert "bp::add.Tensor" in p.table()
        backplane.add(x, y)
        backplane.add(x, y)
        assert p.find("bp::add.Tensor").calls == 3
    assert early.find("bp::add.Tensor").calls == 1  # a snapshot, not a view
    assert p.find("bp::add.Tensor").calls == 3
    assert p.wall_time >= early.wall_time


def test_profiles_do_not_nest_and_the_outer_one_keeps_recording(xy):
    x, y = xy
    with backplane.profile() as outer:
        backplane.add(x, y)
        inner = backplane.profile()
        with pytest.raises(backplane.FailedPreconditionError, match="profiles do not nest") as e:
            with inner:
                pass
        assert e.value.code == "FAILED_PRECONDITION"
        assert not inner.recording
        assert outer.recording
        backplane.add(x, y)
    assert outer.find("bp::add.Tensor").calls == 2
    # Once the outer one stopped, a new profile starts.
    with backplane.profile() as again:
        backplane.add(x, y)
    assert again.find("bp::add.Tensor").calls == 1


def test_an_exception_in_the_block_stops_it_and_keeps_the_calls(xy):
    x, y = xy
    index = backplane.full([1], 7, dtype=backplane.int64)
    with pytest.raises(backplane.OutOfRangeError, match="out of range"):
        with backplane.profile() as p:
            backplane.add(x, y)
            backplane.index_select(x, 0, index)  # the kernel raises: 7 is out of range for size 4
    assert not p.recording
    assert p.find("bp::add.Tensor").calls == 1
    failed = p.find("bp::index_select.out")
    assert (failed.calls, failed.failed_calls) == (1, 1)
    assert failed.how == "native (1 failed)"
    assert p.find("bp::index_select").failed_calls == 1  # the composite around it failed too
    assert "; 2 calls failed; " in p.summary()
    with pytest.raises(ValueError, match="boom"):
        with backplane.profile():
            raise ValueError("boom")
    with backplane.profile() as after:  # nothing left recording
        backplane.add(x, y)
    assert after.find("bp::add.Tensor").calls == 1


def test_calls_on_other_threads_are_recorded(xy):
    x, y = xy

    def work():
        for _ in range(10):
            backplane.mul(x, y)

    with backplane.profile() as p:
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert p.find("bp::mul.Tensor").calls == 30


def test_a_profile_records_once_and_must_be_started(xy):
    p = backplane.profile()
    assert repr(p) == "<backplane.profile not started>"
    with pytest.raises(RuntimeError, match="has not started"):
        p.table()
    with p:
        assert repr(p) == "<backplane.profile recording>"
    assert repr(p) == "<backplane.profile stopped>"
    with pytest.raises(RuntimeError, match="records once"):
        p.start()
    p.stop()  # idempotent
    with pytest.raises(TypeError, match="synchronize_device"):
        backplane.profile(synchronize_device="yes")
    with pytest.raises(backplane.InvalidArgumentError, match="no backend named 'nope'"):
        p.find("bp::add.Tensor", "nope")


def test_start_and_stop_without_a_with_block(xy):
    x, y = xy
    p = backplane.profile(synchronize_device=True).start()
    try:
        backplane.add(x, y)
    finally:
        p.stop()
    assert p.find("bp::add.Tensor").calls == 1


@pytest.fixture
def faulty_plugin(test_plugin):
    """The conformance suite's faulty test plugin (device type "faulty",
    which has no mul kernel: the CPU fallback serves it)."""
    return test_plugin("faulty_test_plugin")


def test_cpu_fallback_calls_and_bytes_on_a_plugin_device(faulty_plugin):
    # In a child interpreter: loading the plugin here would add a device
    # type to this process (and to `auto`) for every later test.
    code = textwrap.dedent("""
        import sys, backplane
        backplane.load_plugin(sys.argv[1])
        x = backplane.ones([4, 4], device="faulty:0")
        with backplane.profile() as p:
            y = backplane.mul(x, x)
            y.to("cpu")
        mul = p.find("bp::mul.out", "faulty")
        print(mul.backend, mul.calls, mul.cpu_fallback_calls, mul.native_calls, mul.fallback_bytes,
              mul.transfer_bytes, mul.transfer_copies, mul.how)
        print(p.find("bp::copy_", "faulty").transfer_bytes)
        print(p.summary())
    """)
    env = dict(os.environ, BACKPLANE_FALLBACK="silent")
    proc = subprocess.run([sys.executable, "-c", code, faulty_plugin], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    mul, copy, summary = proc.stdout.splitlines()
    # Two float32 [4,4] inputs copied to the host and the result back.
    assert mul.split() == ["faulty", "1", "1", "0", "192", "192", "3", "cpu_fallback"]
    assert copy == "64"  # y.to("cpu"): one [4,4] float32 to the host
    assert "1 fell back (1 call, 192 B copied)" in summary
    assert summary.endswith("host<->device: 256 B in 4 copies")


def test_a_timeline_in_the_chrome_trace_format(xy, tmp_path):
    x, y = xy
    with backplane.profile(record_events=True) as p:
        backplane.add(x, y)
        t = threading.Thread(target=lambda: backplane.mul(x, y))
        t.start()
        t.join()
    assert p.report().event_count >= 2
    path = p.export_chrome_trace(str(tmp_path / "trace.json"), pid=3, process_name="rank 3")
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    calls = [e for e in events if e["ph"] == "X"]
    assert {"bp::add.Tensor", "bp::mul.Tensor"} <= {e["name"] for e in calls}
    assert len({e["tid"] for e in calls}) == 2, "a track per thread"
    assert all(e["pid"] == 3 and e["dur"] >= 0 for e in calls)
    assert {"name": "process_name", "ph": "M", "pid": 3, "tid": 0, "args": {"name": "rank 3"}} in events
    # Without record_events there is no timeline to export.
    with backplane.profile() as plain:
        backplane.add(x, y)
    with pytest.raises(RuntimeError, match="record_events=True"):
        plain.export_chrome_trace(str(tmp_path / "none.json"))
    with pytest.raises(TypeError, match="record_events must be True or False"):
        backplane.profile(record_events=1)


def test_a_device_stream_has_a_track_of_its_own(gpusim_plugin, tmp_path):
    # In a child interpreter: loading a plugin changes this process's devices.
    code = textwrap.dedent("""
        import json, sys, backplane
        backplane.load_plugin(sys.argv[1])
        x = backplane.ones([64], device="gpusim:0")
        with backplane.profile(record_events=True) as p:
            y = backplane.mul(x, x)
        print(p.report().streams)
        trace = json.load(open(p.export_chrome_trace(sys.argv[2]), encoding="utf-8"))
        names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"]
        device = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "device"]
        print(names[-1], "bp::mul.Tensor" in device)
    """)
    proc = subprocess.run([sys.executable, "-c", code, gpusim_plugin, str(tmp_path / "t.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    streams, track = proc.stdout.splitlines()
    assert streams == "['gpusim:0 default stream']"
    assert track == "gpusim:0 default stream True"
