"""The comm:: collectives from Python, as operators (bp.ops.comm.*): in this
process (a world of one) on the CPU and on a device without kernels, and
across two processes under mpirun (docs/collectives.md), called by name
(test_distributed.py covers backplane.distributed over them)."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import backplane as bp


def test_a_world_of_one(device):
    x = bp.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    bp.ops.comm.all_reduce_(x, "max")
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    gathered = bp.ops.comm.all_gather(x)
    assert gathered.shape == (2, 2) and gathered.device == x.device
    assert bp.ops.comm.reduce_scatter(x, "sum").tolist() == x.tolist()


def test_errors_name_what_is_wrong():
    with pytest.raises(bp.Error, match="unknown reduction 'mean'"):
        bp.ops.comm.all_reduce_(bp.ones([2]), "mean")
    with pytest.raises(bp.Error, match="a rank cannot send to or receive from itself"):
        bp.ops.comm.send(bp.ones([2]), 0)


SCRIPT = textwrap.dedent(
    """
    import backplane as bp
    x = bp.full([3], 1.0)
    rank = int(__import__("os").environ["OMPI_COMM_WORLD_RANK"])
    bp.ops.comm.all_reduce_(x, "sum")
    g = bp.ops.comm.all_gather(bp.full([1], float(rank)))
    b = bp.ops.comm.broadcast(bp.full([2], float(rank + 5)), 1)
    print(f"rank {rank}: sum {x.tolist()} gathered {g.tolist()} broadcast {b.tolist()}", flush=True)
    """
)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (Open MPI's openmpi-bin)")
def test_two_processes_under_mpirun():
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_rmaps_base_oversubscribe="1", BACKPLANE_COMM_TIMEOUT="60", BACKPLANE_FALLBACK="silent")
    run = subprocess.run(["mpirun", "-np", "2", sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    for rank in (0, 1):
        assert (f"rank {rank}: sum [2.0, 2.0, 2.0] gathered [0.0, 1.0] broadcast [6.0, 6.0]" in run.stdout), run.stdout
