"""Streams and events from Python (python/backplane/streams.py, src/streams.cc):
torch.cuda's names over backplane::Stream and Event. The ordering tests run
on gpusim, whose streams defer their work until something forces it, so a
missing wait shows as stale values every time; each runs in a process of
its own (loading a plugin changes the process's `auto` device)."""
import os
import subprocess
import sys

import pytest

import backplane as bp


def test_the_cpu_has_no_streams_and_says_so():
    for make in (lambda: bp.Stream("cpu"), lambda: bp.current_stream("cpu"), lambda: bp.default_stream("cpu")):
        with pytest.raises(bp.UnimplementedError, match="cpu has no streams"):
            make()
    with pytest.raises(bp.UnimplementedError, match="cpu has no events"):
        bp.Event("cpu")


def test_a_device_argument_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match=r"Stream\(\): device must be a str"):
        bp.Stream(1.5)
    with pytest.raises(TypeError, match="expected a backplane.Stream or None, not str"):
        with bp.stream("cuda:0"):
            pass


def test_stream_none_changes_nothing():
    with bp.stream(None) as s:
        assert s is None


@pytest.fixture
def run_on_gpusim(gpusim_plugin):
    """Runs `body` in a Python process of its own with gpusim loaded and
    `dev` naming its device; fails with the process's output."""
    def run(body):
        code = f"import backplane as bp\nbp.load_plugin({gpusim_plugin!r})\ndev = 'gpusim:0'\n" + body
        env = {k: v for k, v in os.environ.items() if k != "BACKPLANE_GPUSIM_SYNC_STREAMS"}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
    return run


def test_work_on_a_stream_is_ordered_only_by_an_event(run_on_gpusim):
    run_on_gpusim("""
side = bp.Stream(dev)
assert not side.is_default and bp.default_stream(dev).is_default
assert bp.current_stream(dev).is_default
y = bp.zeros(64, device=dev)
with bp.stream(side) as s:
    assert s is side and bp.current_stream(dev) is side
    y.fill_(5.0)
assert bp.current_stream(dev).is_default
stale = (y + 1).cpu().tolist()   # the default stream does not wait for `side`
assert stale == [1.0] * 64, stale
done = side.record_event()
done.wait()                      # the default stream waits for `side`'s fill
fresh = (y + 1).cpu().tolist()
assert fresh == [6.0] * 64, fresh
""")


def test_events_query_and_synchronize_and_streams_wait_for_streams(run_on_gpusim):
    run_on_gpusim("""
producer, consumer = bp.Stream(dev), bp.Stream(dev)
assert producer != consumer and producer == producer and len({producer, producer}) == 1
e = bp.Event(dev)
assert e.query(), "an event never recorded has completed"
y = bp.zeros(16, device=dev)
with bp.stream(producer):
    y.fill_(3.0)
e.record(producer)
assert not e.query(), "query must not force the work"
e.synchronize()
assert e.query()
with bp.stream(producer):
    y.fill_(4.0)
consumer.wait_stream(producer)
with bp.stream(consumer):
    z = y * 2
consumer.synchronize()
assert z.cpu().tolist() == [8.0] * 16, z.cpu().tolist()
again = bp.Event(dev)
assert producer.record_event(again) is again
""")


def test_the_block_restores_the_previous_stream_also_on_an_exception(run_on_gpusim):
    run_on_gpusim("""
a, b = bp.Stream(dev), bp.Stream(dev)
with bp.stream(a):
    try:
        with bp.stream(b):
            assert bp.current_stream(dev) is b
            raise KeyError("leave")
    except KeyError:
        pass
    assert bp.current_stream(dev) is a
assert bp.current_stream(dev).is_default
# The current stream is per host thread.
import threading
seen = []
with bp.stream(a):
    t = threading.Thread(target=lambda: seen.append(bp.current_stream(dev).is_default))
    t.start(); t.join()
assert seen == [True]
""")


def test_timed_events_measure_device_time_and_untimed_ones_refuse(run_on_gpusim):
    run_on_gpusim("""
assert bp.capabilities(dev).event_timing and not bp.capabilities("cpu").event_timing
start, end = bp.Event(dev, enable_timing=True), bp.Event(dev, enable_timing=True)
x = bp.ones(1 << 16, device=dev)
side = bp.Stream(dev)
with bp.stream(side):
    start.record()
    for _ in range(20):
        x = x * 1.0001
    end.record()
try:
    start.elapsed_time(end)
    raise AssertionError("gpusim defers a side stream's work until it is forced")
except bp.FailedPreconditionError as e:
    assert "not completed yet" in str(e), str(e)
end.synchronize()
ms = start.elapsed_time(end)
assert isinstance(ms, float) and ms >= 0.0, ms
plain = bp.Event(dev)
plain.record()
try:
    start.elapsed_time(plain)
    raise AssertionError("an event made without timing has no time")
except bp.InvalidArgumentError as e:
    assert "made without timing" in str(e) and "enable_timing=True" in str(e), str(e)
""")
    with pytest.raises(bp.UnimplementedError, match="cpu has no events"):
        bp.Event("cpu", enable_timing=True)


def test_a_graph_replays_its_captured_work_on_refilled_inputs(run_on_gpusim):
    run_on_gpusim("""
assert bp.capabilities(dev).graphs and not bp.capabilities("cpu").graphs
side = bp.Stream(dev)
x = bp.zeros(32, device=dev)
outs = []
def layer():
    outs.append((x * 2 + 1).relu())
g = bp.Graph.capture(side, layer)
assert g.stream == side and str(g.device) == dev and "Graph" in repr(g)
(y,) = outs
for v in (3.0, -4.0, 0.5):
    x.copy_(bp.full([32], v))   # refill the input in place
    g.replay()
    side.synchronize()
    assert y.cpu().tolist() == [max(2 * v + 1, 0.0)] * 32, (v, y.cpu().tolist())
""")


def test_what_a_graph_cannot_replay_raises_during_the_capture_and_leaves_it_clean(run_on_gpusim):
    run_on_gpusim("""
side = bp.Stream(dev)
x = bp.ones(8, device=dev)
for fn, err, text in ((lambda: x.sum().item(), bp.FailedPreconditionError, "cannot be captured"),
                      (lambda: bp.zeros(1 << 20, device=dev), bp.ResourceExhaustedError, "pool_bytes=")):
    try:
        bp.Graph.capture(side, fn, pool_bytes=1 << 16)
        raise AssertionError("captured " + text)
    except err as e:
        assert text in str(e), str(e)
class Stop(Exception):
    pass
try:
    bp.Graph.capture(side, lambda: (_ for _ in ()).throw(Stop()))
    raise AssertionError("the exception was swallowed")
except Stop:
    pass
out = []
g = bp.Graph.capture(side, lambda: out.append(x + 1))   # the device captures again after each failure
g.replay(); side.synchronize()
assert out[0].cpu().tolist() == [2.0] * 8
""")
