#!/usr/bin/env python3
"""Data-parallel training end to end (Note [Gradient buckets]): the train
sample on DEVICE (cpu by default) in one process, then under `mpirun -np 2`
with gradient buckets and a timeline; every step's loss (the mean over the
ranks, which is the whole batch's) must equal the single process's to 1e-6
relative, and the timeline must show buckets' all_reduces during backward
(check_trace.py), and on a device with event timing (gpusim) a track for
each rank's stream with the device's work.

    mpirun_train_check.py MPIEXEC TRAIN WORKDIR [DEVICE]
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def losses(text):
    return [float(m) for m in re.findall(r"^step +\d+  loss ([0-9.eE+-]+)$", text, re.M)]


def main():
    mpiexec, train, workdir = sys.argv[1:4]
    device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_mca_base_component_disable_dlclose="1", BACKPLANE_FALLBACK="silent")
    steps = ["--device", device, "--steps", "3"]
    one = subprocess.run([train] + steps, env=env, capture_output=True, text=True, timeout=300)
    print(one.stdout)
    if one.returncode != 0:
        print(one.stderr)
        return 1
    trace = os.path.join(workdir, f"train_np2_{device.replace(':', '_')}_trace.json")
    two = subprocess.run([mpiexec, "-np", "2", train] + steps + ["--bucket-mb", "0.01", "--trace", trace],
                         env=env, capture_output=True, text=True, timeout=300)
    print(two.stdout)
    if two.returncode != 0:
        print(two.stderr)
        return 1
    want = losses(one.stdout)
    # Both ranks print every step's loss (the same mean), interleaved.
    both = losses(two.stdout)
    if len(want) != 3 or len(both) != 6:
        print(f"expected 3 losses from one process and 6 lines from two ranks, got {want} and {both}")
        return 1
    lines = re.findall(r"^step +(\d+)  loss ([0-9.eE+-]+)$", two.stdout, re.M)
    for step, loss in lines:
        w = want[int(step) - 1]
        if abs(float(loss) - w) > 1e-6 * abs(w):
            print(f"step {step}: two ranks' loss {loss} != one process's {w}")
            return 1
    print(f"losses: two ranks equal one process at every step: {want}")
    streams = [] if device == "cpu" else ["--stream-tracks"]
    return subprocess.run([sys.executable, os.path.join(HERE, "check_trace.py"), trace, "2"] + streams).returncode


if __name__ == "__main__":
    sys.exit(main())
