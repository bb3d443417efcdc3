"""backplane.distributed (docs/collectives.md): the collectives, groups, the
world's store and the data-parallel wrappers, in a world of one (on the CPU
and on a device without kernels), and across two processes under mpirun,
where DistributedDataParallel's gradients must equal one process's on the
whole batch."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import backplane as bp
import backplane.distributed as dist


def test_a_world_of_one(device):
    assert dist.get_rank() == 0 and dist.get_world_size() == 1
    x = bp.tensor([1.0, 2.0, 3.0], device=device)
    assert dist.all_reduce(x, "max") is not None and x.tolist() == [1.0, 2.0, 3.0]
    assert dist.all_gather(x).tolist() == [1.0, 2.0, 3.0]
    assert dist.reduce_scatter(x).tolist() == [1.0, 2.0, 3.0]
    dist.barrier()
    s = dist.store()  # the process's: keys of their own per test
    s.set(f"k-{device}", "v")
    assert s.get(f"k-{device}") == b"v" and s.add(f"n-{device}", 2) == 2 and s.add(f"n-{device}") == 3
    with pytest.raises(bp.Error, match="was not set within"):
        s.get("never", timeout=0.1)


def test_groups_and_bad_arguments_are_named():
    g = dist.new_group([0])
    assert g.rank == 0 and g.size == 1 and g.world_ranks == [0] and g.id > 0
    assert dist.all_reduce(bp.ones([2]), group=g).tolist() == [1.0, 1.0]
    with pytest.raises(bp.Error, match="world rank 1 does not exist"):
        dist.new_group([0, 1])
    with pytest.raises(TypeError, match="group must be"):
        dist.all_reduce(bp.ones([2]), group=3)
    with pytest.raises(bp.Error, match="unknown reduction 'mean'"):
        dist.all_reduce(bp.ones([2]), "mean")


def test_data_parallel_in_one_process_matches_one_device_and_its_gradients(device):
    bp.manual_seed(0)
    w = bp.randn([3, 4]).requires_grad_()
    x = bp.randn([5, 4])
    model = dist.DataParallel(lambda p, part: bp.relu(part @ p[0].t()), [w], ["cpu", device, "cpu"])
    y = model(x)
    assert dist.split_sizes(5, 3) == [2, 2, 1]
    assert bp.allclose(y, bp.relu(x @ w.t()))
    y.sum().backward()
    g = w.grad.clone()
    w.grad = None
    bp.relu(x @ w.t()).sum().backward()
    assert bp.allclose(g, w.grad)
    with pytest.raises(ValueError, match="a batch of 2 cannot be split over 3 devices"):
        model(bp.randn([2, 4]))

    def fails(p, part):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="replica 0 on cpu: boom"):
        dist.DataParallel(fails, [w], ["cpu", "cpu"])(x)


SCRIPT = textwrap.dedent(
    """
    import backplane as bp, backplane.distributed as dist
    rank, size = dist.get_rank(), dist.get_world_size()
    s = dist.store()
    s.set(f"hello{rank}", f"from {rank}")
    other = s.get(f"hello{1 - rank}").decode()
    bp.manual_seed(5)
    w = bp.randn([4, 6]).requires_grad_()
    b = bp.randn([4]).requires_grad_()
    x, t = bp.randn([4, 6]), bp.randn([4, 4])
    loss = lambda xs, ts: ((xs @ w.t() + b - ts) ** 2).mean()
    gw, gb = bp.autograd.grad(loss(x, t), [w, b])
    ddp = dist.DistributedDataParallel([w, b], bucket_cap_mb=0.00005, first_bucket_mb=0.00001)
    loss(x.narrow(0, 2 * rank, 2), t.narrow(0, 2 * rank, 2)).backward()
    ddp.finish_gradient_sync()
    ok = bp.allclose(w.grad, gw, rtol=1e-6, atol=1e-7) and bp.allclose(b.grad, gb, rtol=1e-6, atol=1e-7)
    g = dist.all_gather(bp.full([1], float(rank)))
    print(f"rank {rank} of {size}: store {other}; buckets {ddp.bucket_count}; ddp grads equal one process: {ok}; "
          f"gathered {g.tolist()}", flush=True)
    """
)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (Open MPI's openmpi-bin)")
def test_two_processes_under_mpirun(tmp_path):
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_rmaps_base_oversubscribe="1", BACKPLANE_COMM_TIMEOUT="60", BACKPLANE_FALLBACK="silent",
               BACKPLANE_MASTER_PORT=str(port))
    run = subprocess.run(["mpirun", "-np", "2", sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    for rank in (0, 1):
        assert (f"rank {rank} of 2: store from {1 - rank}; buckets 2; ddp grads equal one process: True; "
                f"gathered [0.0, 1.0]") in run.stdout, run.stdout + run.stderr
