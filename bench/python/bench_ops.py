#!/usr/bin/env python3
"""The cost of one operator call from Python, end to end: `add` on two
one-element float32 CPU tensors through each way Backplane offers, next to
PyTorch eager's (Debian's torch, when importable) in the same run.

    PYTHONPATH=build-release/python python3 bench/python/bench_ops.py [--repeats N] [--number N] [--check]

Each case is timed with timeit: --repeats rounds (20) of --number calls
(20000); the rounds of all cases run interleaved in a shuffled order, so a
noisy neighbour or a clock change lands on a case and its baseline alike.
The table gives the time per call of the best and the median round; the
ratios use medians. Targets (issue 22, "Speed"): backplane.add no slower
than torch.add, and the generic path backplane.ops.bp.add within 1.5x of the
typed backplane.add. Reporting only, unless --check: then the exit status is
1 when a target is missed.
"""
import argparse
import random
import statistics
import sys
import timeit

import backplane

# (label, statement); each runs with the globals of setup().
BACKPLANE_CASES = [
    ("backplane.add(a, b)", "add(a, b)"),
    ("a + b", "a + b"),
    ("backplane.ops.bp.add(a, b)", "generic(a, b)"),
    ("backplane.ops.bp.add.Tensor(a, b)", "overload(a, b)"),
    ("a.add(b)", "a.add(b)"),
]
TORCH_CASES = [
    ("torch.add(ta, tb)", "torch_add(ta, tb)"),
    ("ta + tb", "ta + tb"),
]
# (what, case, baseline, target description, predicate on the ratio or None)
RATIOS = [
    ("backplane / torch", "backplane.add(a, b)", "torch.add(ta, tb)", "<= 1.0x", lambda r: r <= 1.0),
    ("backplane / torch", "a + b", "ta + tb", "(report)", None),
    ("generic / typed", "backplane.ops.bp.add(a, b)", "backplane.add(a, b)", "<= 1.5x", lambda r: r <= 1.5),
    ("overload / typed", "backplane.ops.bp.add.Tensor(a, b)", "backplane.add(a, b)", "(report)", None),
]


def setup():
    g = {
        "a": backplane.ones(1),
        "b": backplane.ones(1),
        "add": backplane.add,
        "generic": backplane.ops.bp.add,
        "overload": backplane.ops.bp.add.Tensor,
    }
    try:
        import torch
    except ImportError:
        return g, False
    torch.set_num_threads(1)  # one-element ops: threads only add overhead
    g.update(torch_add=torch.add, ta=torch.ones(1), tb=torch.ones(1))
    return g, True


def measure(cases, g, repeats, number):
    """Per case, the time per call (s) of each round."""
    timers = {label: timeit.Timer(stmt, globals=g) for label, stmt in cases}
    for t in timers.values():  # warm-up: caches, lazy lookups, allocator pools
        t.timeit(number // 10 or 1)
    rounds = {label: [] for label in timers}
    order = list(timers)
    rng = random.Random(0)
    for _ in range(repeats):
        rng.shuffle(order)
        for label in order:
            rounds[label].append(timers[label].timeit(number) / number)
    return rounds


def us(seconds):
    return f"{seconds * 1e6:.3f} us"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=20, help="rounds per case (%(default)s)")
    p.add_argument("--number", type=int, default=20000, help="calls per round (%(default)s)")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.number < 1:
        p.error("--repeats and --number must be at least 1")

    g, have_torch = setup()
    cases = BACKPLANE_CASES + (TORCH_CASES if have_torch else [])
    rounds = measure(cases, g, args.repeats, args.number)
    median = {label: statistics.median(r) for label, r in rounds.items()}

    print(f"one-element float32 add on the CPU, from Python {sys.version.split()[0]}; "
          f"{args.repeats} rounds of {args.number} calls per case"
          + ("" if have_torch else "; torch is not importable: no PyTorch baseline"))
    width = max(len(label) for label, _ in cases)
    print(f"{'call':<{width}}  {'best':>10}  {'median':>10}")
    for label, _ in cases:
        print(f"{label:<{width}}  {us(min(rounds[label])):>10}  {us(median[label]):>10}")
    print()
    missed = []
    for what, case, base, target, ok in RATIOS:
        if case not in median or base not in median:
            print(f"{what:<18} {case} vs {base}: skipped (no {base})")
            continue
        r = median[case] / median[base]
        verdict = "" if ok is None else ("  ok" if ok(r) else "  MISSED")
        if ok is not None and not ok(r):
            missed.append(case)
        print(f"{what:<18} {case:<{width}} / {base:<{width}} = {r:5.2f}x  target {target}{verdict}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
