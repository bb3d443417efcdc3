#!/usr/bin/env python3
"""Checks a timeline that `train --trace FILE` wrote under mpirun (Note
[Timelines], Note [Gradient buckets]): it is a Chrome trace (JSON, complete
"X" events), every rank has its own process with named threads, and on
every rank a bucket's comm::all_reduce_ started on the communication thread
while backward went on: the main thread ran more of backward's ops (not the
buckets' own staging copies) after the all_reduce started and before the
step's optimizer op. With --stream-tracks (a device with event timing),
every rank also has a track named after a device stream ("gpusim:0 default
stream") holding the device's work ("device" events), forward's and
backward's included. Prints what it found.

    check_trace.py TRACE.json RANKS [--stream-tracks]
"""
import json
import sys


def main():
    path, ranks = sys.argv[1], int(sys.argv[2])
    want_streams = "--stream-tracks" in sys.argv[3:]
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    ok = True
    for rank in range(ranks):
        mine = [e for e in events if e.get("pid") == rank]
        names = [e for e in mine if e.get("ph") == "M" and e["name"] == "process_name"]
        calls = [e for e in mine if e.get("ph") == "X" and e.get("cat") != "device"]
        device = [e for e in mine if e.get("ph") == "X" and e.get("cat") == "device"]
        tracks = {e["tid"]: e["args"]["name"] for e in mine if e.get("ph") == "M" and e["name"] == "thread_name"}
        if not names or names[0]["args"]["name"] != f"rank {rank}" or not calls:
            print(f"rank {rank}: no process named 'rank {rank}' with calls")
            ok = False
            continue
        main_tid = min(calls, key=lambda e: e["ts"])["tid"]  # the step's forward comes first
        buckets = [e for e in calls if e["name"] == "comm::all_reduce_" and e["tid"] != main_tid]
        main = sorted((e for e in calls if e["tid"] == main_tid), key=lambda e: e["ts"])
        optimizer = [e["ts"] for e in main if "adamw" in e["name"] or "sgd" in e["name"]]
        staging = {"bp::copy_", "bp::_copy_on_device_", "comm::all_reduce_"}
        during = 0
        for r in buckets:
            step_end = min((t for t in optimizer if t > r["ts"]), default=float("inf"))
            if any(r["ts"] < o["ts"] < step_end and o["name"] not in staging for o in main):
                during += 1
        print(f"rank {rank}: {len(calls)} calls on {len({e['tid'] for e in calls})} threads; "
              f"{len(buckets)} bucket all_reduces on thread(s) {sorted({e['tid'] for e in buckets})}, "
              f"{during} of them started while backward went on (main thread {main_tid})")
        if during == 0:
            ok = False
        if want_streams:
            streams = sorted({tracks.get(e["tid"], "?") for e in device})
            backward = sum(1 for e in device if "backward" in e["name"])
            print(f"rank {rank}: {len(device)} device events on stream tracks {streams}, {backward} of backward ops")
            if not device or backward == 0 or not all("stream" in s for s in streams):
                ok = False
    print("trace: overlap " + ("seen on every rank" if ok else "MISSING"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
