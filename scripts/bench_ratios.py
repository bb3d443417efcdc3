#!/usr/bin/env python3
"""Prints the ratios between benchmarks of one Google Benchmark JSON run.

Each line: a benchmark, its baseline, the ratio of their median times, and
the target from the issue that asked for it. Reporting only; it never fails.
"""
import json
import sys

# (benchmark, baseline, target description, predicate on ratio)
RATIOS = [
    ("BM_DispatchUnboxed_Noop", "BM_RawFunctionPointer", "<= 2.0x", lambda r: r <= 2.0),
    ("BM_DispatchBoxed_Noop", "BM_RawFunctionPointer", "<= 8x", lambda r: r <= 8.0),
    ("BM_DispatchUnboxed_Noop", "BM_RawFunctionPointer_PlainStruct", "(for scale)", lambda r: True),
    ("BM_PluginKernelCall", "BM_DispatchUnboxed_Noop", "<= +10 ns", None),
]


def medians(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b["name"]).split("/")[0]
        if b.get("aggregate_name") in (None, "median"):
            out.setdefault(name, b["real_time"])
            if b.get("aggregate_name") == "median":
                out[name] = b["real_time"]
    return out


def main():
    times = medians(sys.argv[1] if len(sys.argv) > 1 else "build/bench/results.json")
    print(f"{'benchmark':34} {'baseline':34} {'time':>10} {'ratio':>7}  target")
    for name, base, target, ok in RATIOS:
        if name not in times or base not in times:
            continue
        r = times[name] / times[base]
        if ok is None:  # an absolute difference target
            diff = times[name] - times[base]
            verdict = "ok" if diff <= 10.0 else "MISSED"
            print(f"{name:34} {base:34} {times[name]:8.2f}ns {r:6.2f}x  {target} ({diff:+.2f} ns) {verdict}")
            continue
        print(f"{name:34} {base:34} {times[name]:8.2f}ns {r:6.2f}x  {target} {'' if target.startswith('(') else ('ok' if ok(r) else 'MISSED')}")
    if "BM_LoadAllPlugins" in times:
        t = times["BM_LoadAllPlugins"]
        print(f"{'BM_LoadAllPlugins':34} {'':34} {t:8.3f}ms          < 50 ms {'ok' if t < 50 else 'MISSED'}")


if __name__ == "__main__":
    main()
