"""Streams and events, as torch.cuda's: `bp.Stream(device)`, `bp.Event(device)`,
`bp.current_stream(device)`, `bp.default_stream(device)` and the block
`with bp.stream(s):`, inside which the operators this thread calls on s's
device are queued on s (Note [Streams in the application API] in
backplane/runtime/stream.h says what orders work across streams).

The device keeps a thread's current stream as a bare handle; this module
keeps the Stream object that was made current, per thread and device, so
that `current_stream()` returns that object (which keeps the stream alive)
and never a handle that could outlive it.
"""
import contextlib
import threading

from . import _backplane

_local = threading.local()


def _made_current():
    table = getattr(_local, "streams", None)
    if table is None:
        table = _local.streams = {}
    return table


def current_stream(device):
    """This thread's current stream of `device` (torch.cuda.current_stream):
    the default stream unless a `with bp.stream(s):` block says otherwise."""
    live = _backplane._current_stream(device)
    mine = _made_current().get(str(live.device))
    return mine if mine is not None and mine == live else live


@contextlib.contextmanager
def stream(s):
    """Inside the block, `s` is this thread's current stream of its device
    (torch.cuda.stream); the stream current before comes back when the
    block is left, also by an exception. `None` changes nothing."""
    if s is None:
        yield None
        return
    if not isinstance(s, _backplane.Stream):
        raise TypeError(f"stream(): expected a backplane.Stream or None, not {type(s).__name__}")
    key = str(s.device)
    table = _made_current()
    previous = current_stream(s.device)
    _backplane._set_current_stream(s)
    table[key] = s
    try:
        yield s
    finally:
        _backplane._set_current_stream(previous)
        if previous.is_default:
            table.pop(key, None)
        else:
            table[key] = previous
