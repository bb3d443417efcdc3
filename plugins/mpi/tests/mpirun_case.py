#!/usr/bin/env python3
"""Runs one failure case of mpi_collectives_tests under `mpirun -np 2` and
checks that the job ends, and how.

  mpirun_case.py CASE MPIRUN TEST_PROGRAM

never_arrives: rank 1 never receives rank 0's send, nor calls the all_reduce.
  Rank 0 must fail the send after its group's 2 s, and the all_reduce with
  kDeadlineExceeded within BACKPLANE_COMM_TIMEOUT (the environment sets 3 s),
  and end the job, long before rank 1's 120 s sleep would.
never_starts: rank 1 never calls a collective, so never starts MPI: rank 0
  waits in MPI_Init, whose watchdog must end it after the timeout (status 124).
dies: rank 1 exits before the all_reduce; mpirun must end rank 0 instead of
  leaving it waiting.
"""
import os
import re
import subprocess
import sys
import time


def main() -> int:
    case, mpirun, program = sys.argv[1:4]
    env = dict(os.environ, BACKPLANE_MPI_CASE=case)
    command = [mpirun, "-np", "2", program, "--gtest_filter=CollectiveFailures.*"]
    start = time.monotonic()
    try:
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        print(f"FAIL: {case}: the job still ran after 90 s: a collective hung", file=sys.stderr)
        return 1
    took = time.monotonic() - start
    output = run.stdout + run.stderr
    print(output)
    print(f"{case}: mpirun exited with {run.returncode} after {took:.1f} s")
    failures = []
    if run.returncode == 0:
        failures.append("mpirun exited with 0, but a rank failed: the job should fail")
    if took > 60:
        failures.append(f"the job took {took:.0f} s; it should end within seconds of the timeout")
    if "[  FAILED  ]" in output:
        failures.append("a rank's test failed (see above)")
    if case == "never_arrives":
        for needed in ("CASE-RESULT rank 0 failed after", "waited 3", "for the other ranks to arrive",
                       "CASE-SEND", "waited 2.0 s for the receiver to take the header"):
            if needed not in output:
                failures.append(f"rank 0's output lacks {needed!r}")
        for line in output.splitlines():
            if line.startswith("CASE-RESULT"):
                waited = float(line.split("after ")[1].split(" s")[0])
                if not 2.5 <= waited <= 15:
                    failures.append(f"rank 0 failed after {waited} s; the timeout is 3 s")
    if case == "dies":
        if "CollectiveFailures.ARankThatDies" not in output or not re.search(r"Exit code:\s+9", output):
            failures.append("the output does not show rank 1 dying with status 9 inside the test")
    if case == "never_starts" and "MPI_Init waited 3.0 s for the other ranks" not in output:
        failures.append("rank 0's output lacks the MPI_Init watchdog's message")
    for f in failures:
        print(f"FAIL: {case}: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
