"""backplane.distributed: collectives across processes, process groups, the
world's key-value store, and data parallelism in one process and across
processes (docs/collectives.md).

    import backplane as bp
    import backplane.distributed as dist

    x = bp.ones([4])
    dist.all_reduce(x)                       # in place: the sum over every rank
    g = dist.all_gather(bp.full([1], float(dist.get_rank())))
    evens = dist.new_group([0, 2])           # every rank makes it, in the same order

    ddp = dist.DistributedDataParallel(params)   # rank 0's values broadcast
    loss(my_rows).backward()                     # buckets' all_reduces during backward
    ddp.finish_gradient_sync()                   # averaged gradients in p.grad
    opt.step()

The world comes from the launcher (mpirun's variables, PMI's, or
BACKPLANE_RANK and BACKPLANE_WORLD_SIZE); without one it is this process
alone and every collective works on it. The collectives are the comm::
operators (bp.ops.comm.*), dispatched on the tensors' device: Open MPI for
CPU tensors, NCCL for CUDA tensors, the CPU engine through host memory for
any other device. A reduction op is one of "sum", "avg", "min", "max",
"product". Errors are backplane.Error subclasses naming what went wrong; a
rank that never arrives makes the others fail after the group's timeout
(BACKPLANE_COMM_TIMEOUT, seconds).
"""
import threading

from . import _backplane
from ._ops import ops as _ops

__all__ = [
    "Group", "world", "get_rank", "get_world_size", "new_group",
    "all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "send", "recv", "barrier",
    "Store", "store", "DistributedDataParallel", "DataParallel", "split_sizes",
]

Group = _backplane._Group


def world():
    """The world group (every process of the job)."""
    return _backplane._world()


def get_rank(group=None):
    """This process's rank in `group` (the world by default); -1 if it is not a member."""
    return (group or world()).rank


def get_world_size(group=None):
    """The number of ranks in `group` (the world by default)."""
    return (group or world()).size


def new_group(ranks, timeout=None):
    """A sub-group of the given world ranks, in group-rank order. Every rank of
    the world calls it with the same ranks, in the same order of calls; a rank
    outside it gets a group it is not a member of (rank -1). `timeout`:
    seconds a collective on it waits for the others (default
    BACKPLANE_COMM_TIMEOUT, else 300)."""
    return _backplane._new_group(list(ranks), float(timeout or 0.0))


def _gid(group):
    if group is None:
        return 0
    if not isinstance(group, Group):
        raise TypeError(f"group must be a backplane.distributed.Group or None, not {type(group).__name__}")
    return group.id


def all_reduce(tensor, op="sum", group=None):
    """Replaces `tensor` with the reduction of every rank's; returns it."""
    return _ops.comm.all_reduce_(tensor, op, _gid(group))


def broadcast(tensor, src, group=None):
    """Replaces `tensor` with rank `src`'s; returns it."""
    return _ops.comm.broadcast_(tensor, src, _gid(group))


def all_gather(tensor, group=None):
    """Every rank's `tensor`, concatenated along dim 0 in rank order (a 0-d
    tensor gathers into [size])."""
    return _ops.comm.all_gather(tensor, _gid(group))


def reduce_scatter(tensor, op="sum", group=None):
    """Block `rank` of the reduction of every rank's `tensor` (dim 0 split into
    `size` blocks)."""
    return _ops.comm.reduce_scatter(tensor, op, _gid(group))


def all_to_all(tensor, group=None):
    """Block j of `tensor` (dim 0 split into `size` blocks) goes to rank j;
    block j of the result came from rank j."""
    return _ops.comm.all_to_all(tensor, _gid(group))


def send(tensor, dst, tag=0, group=None):
    """Sends `tensor` to rank `dst`, which receives it with recv(..., tag)."""
    _ops.comm.send(tensor, dst, tag, _gid(group))


def recv(tensor, src, tag=0, group=None):
    """Receives into `tensor` (of the sent dtype and shape) from rank `src`; returns it."""
    return _ops.comm.recv_(tensor, src, tag, _gid(group))


def barrier(group=None):
    """Returns once every rank of `group` has called it."""
    _ops.comm.barrier(_gid(group))


class Store:
    """The world's key-value store (Note [The world's store]): world rank 0
    serves it at BACKPLANE_MASTER_ADDR (default 127.0.0.1) and
    BACKPLANE_MASTER_PORT, which a world of two or more must set; a world of
    one keeps it in the process. Every call waits at most the world's timeout."""

    def set(self, key, value):
        """Sets `key` (str) to `value` (bytes or str)."""
        if isinstance(value, str):
            value = value.encode()
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"Store.set: value must be bytes or str, not {type(value).__name__}")
        _backplane._store_set(str(key), bytes(value))

    def get(self, key, timeout=None):
        """The value (bytes) of `key`, waiting up to `timeout` seconds (the
        world's timeout by default) for a rank to set it."""
        return _backplane._store_get(str(key), float(timeout if timeout is not None else world().timeout))

    def add(self, key, delta=1):
        """Adds `delta` to the integer `key` holds (0 when unset) and returns the sum."""
        return _backplane._store_add(str(key), int(delta))


def store():
    """The world's key-value store."""
    return Store()


class DistributedDataParallel:
    """Gradients averaged over `group` in buckets during backward (Note
    [Gradient buckets]): rank 0's parameter values are broadcast when it is
    made; after each backward, finish_gradient_sync() waits for the buckets'
    all_reduces and writes the averages into each parameter's grad, the same
    on every rank, equal to one process's gradient of the mean loss over the
    whole batch. `params`: leaf tensors that require grad, the same shapes in
    the same order on every rank."""

    def __init__(self, params, group=None, bucket_cap_mb=25.0, first_bucket_mb=1.0):
        self._params = list(params)
        self._impl = _backplane._DistributedDataParallel(self._params, group or world(), float(bucket_cap_mb),
                                                         float(first_bucket_mb))

    def finish_gradient_sync(self):
        self._impl.finish_gradient_sync()

    @property
    def bucket_count(self):
        return self._impl.bucket_count

    def bucket_of_parameters(self):
        """The bucket of each parameter, in the order they were given."""
        return self._impl.bucket_of_parameters()


def split_sizes(size, parts):
    """How DataParallel splits `size` items over `parts` devices: size // parts
    each, one more for the first size % parts."""
    if parts < 1:
        raise ValueError("split_sizes: no devices to split over")
    if size < parts:
        raise ValueError(f"a batch of {size} cannot be split over {parts} devices (each needs at least one item)")
    return [size // parts + (1 if i < size % parts else 0) for i in range(parts)]


class DataParallel:
    """Data parallelism in one process (Note [Data parallel in one process]):
    each call splits `batch` along `dim` over `devices`, copies `params` to
    each device (differentiably, so gradients come back to `params`), runs
    fn(params_on_device, part) on every device at once, one thread each, and
    concatenates the results on `output_device` (the first device by
    default). A replica's exception is raised, naming it, after every replica
    has finished."""

    def __init__(self, fn, params, devices, output_device=None, dim=0):
        if not devices:
            raise ValueError("DataParallel: no devices")
        self.fn, self.params, self.dim = fn, list(params), dim
        self.devices = list(devices)
        self.output_device = output_device if output_device is not None else self.devices[0]

    def __call__(self, batch):
        sizes = split_sizes(batch.shape[self.dim], len(self.devices))
        parts, start = [], 0
        for d, n in zip(self.devices, sizes):
            parts.append(batch.narrow(self.dim, start, n).to(d))
            start += n
        replicas = [[p.to(d) for p in self.params] for d in self.devices]
        outputs = [None] * len(self.devices)
        errors = [None] * len(self.devices)

        def run(i):
            try:
                outputs[i] = self.fn(replicas[i], parts[i])
            except BaseException as e:  # noqa: BLE001: raised below, after every replica
                errors[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(1, len(self.devices))]
        for t in threads:
            t.start()
        run(0)
        for t in threads:
            t.join()
        for i, e in enumerate(errors):
            if e is not None:
                raise type(e)(f"replica {i} on {self.devices[i]}: {e}") from e
        from . import cat
        return cat([o.to(self.output_device) for o in outputs], self.dim)
