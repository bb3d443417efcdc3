#!/usr/bin/env python3
"""Runs the layers of spconv_bench in spconv 2.x (PyTorch, CPU) and Backplane
side by side, on the same synthetic KITTI-like scan.

    bench/spconv/compare_spconv.py [--bench PATH] [--repetitions N]

Backplane's numbers come from spconv_bench itself (its JSON output); the
scan comes from `spconv_bench --write_scan`, so both libraries see the same
voxels. For each layer it prints the rulebook's size in both (output voxels
and pairs: they must be equal, or the two disagree about the convolution),
the median time of the convolution with its rulebook built beforehand
(spconv's native algorithm: gather, GEMM per offset, scatter-add, as
Backplane's), and of rulebook building for the submanifold 3x3x3 case. spconv is not a
dependency: without it (`pip install spconv torch`) the script says so and
exits 0. Reporting only.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (benchmark, in channels, out channels, stride, subm)
LAYERS = [
    ("BM_SubmConv3x3x3_C16", 16, 16, 1, True),
    ("BM_SubmConv3x3x3_C64", 64, 64, 1, True),
    ("BM_SparseConv3x3x3_Stride2_C32", 32, 32, 2, False),
]


def find_bench(path):
    candidates = [path] if path else [os.path.join(ROOT, d, "bench/spconv/spconv_bench") for d in
                                      ("build-release", "build")]
    for c in candidates:
        if os.path.exists(c):
            return c
    sys.exit(f"compare_spconv.py: spconv_bench not found (tried {', '.join(candidates)}); "
             "build it first: scripts/bench.sh --filter=Conv, or ninja -C build spconv_bench")


def read_scan(bench, path, which):
    import numpy as np
    subprocess.run([bench, f"--write_scan={path}", f"--scan={which}"], check=True)
    with open(path, "rb") as f:
        n, batch, d, h, w, c = np.frombuffer(f.read(48), dtype=np.int64)
        indices = np.frombuffer(f.read(int(n) * 16), dtype=np.int32).reshape(int(n), 4)
        features = np.frombuffer(f.read(int(n * c) * 4), dtype=np.float32).reshape(int(n), int(c))
    return indices, features, int(batch), [int(d), int(h), int(w)]


def backplane_results(bench, repetitions):
    names = "|".join(name for name, *_ in LAYERS) + "|BM_RulebookSubm_40k"
    out = subprocess.run([bench, f"--benchmark_filter=^({names})(/|$)", f"--benchmark_repetitions={repetitions}",
                          "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True, env=dict(os.environ, BACKPLANE_FALLBACK="silent"))
    results = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
            results[b["run_name"].split("/")[0]] = dict(b, ms=b["real_time"] * scale)
    return results


def median_ms(fn, repetitions):
    fn()  # warm-up
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", help="path to spconv_bench (default: build-release/, then build/)")
    parser.add_argument("--repetitions", type=int, default=10)
    args = parser.parse_args()
    try:
        import numpy as np
        import torch
        import spconv
        from spconv.core import ConvAlgo
        from spconv.pytorch import functional as Fsp
        from spconv.pytorch import ops
    except ImportError as e:
        print(f"compare_spconv.py: skipped: it needs spconv 2.x, torch and numpy ({e}); pip install spconv torch")
        return 0

    bench = find_bench(args.bench)
    mine = backplane_results(bench, args.repetitions)
    tmp = tempfile.mkdtemp()
    try:
        indices, _, batch, shape = read_scan(bench, os.path.join(tmp, "kitti.bin"), "kitti")
        dense_indices, _, dense_batch, dense_shape = read_scan(bench, os.path.join(tmp, "40k.bin"), "40k")
    finally:
        shutil.rmtree(tmp)

    torch.manual_seed(0)
    algo = ConvAlgo.Native  # gather, GEMM per offset, scatter-add: the same scheme as Backplane's
    print(f"spconv {spconv.__version__} (torch {torch.__version__}, {torch.get_num_threads()} threads) against "
          f"Backplane, on {len(indices)} voxels of {shape} (scan seed 0); median of {args.repetitions}\n")
    print(f"{'layer':32} {'out voxels':>21} {'pairs':>23} {'spconv ms':>10} {'backplane ms':>13} {'speedup':>8}")
    ind = torch.from_numpy(indices.copy())
    with torch.no_grad():
        for name, cin, cout, stride, subm in LAYERS:
            args3 = ([3] * 3, [stride] * 3, [1] * 3, [1] * 3, [0] * 3)
            out_ids, pairs, pair_num = ops.get_indice_pairs(ind, batch, shape, algo, *args3, subm, False)
            features = torch.randn(len(indices), cin)
            weight = torch.randn(cout, 3, 3, 3, cin)  # spconv 2.x layout: [Cout, kD, kH, kW, Cin]
            conv = Fsp.indice_subm_conv if subm else Fsp.indice_conv
            spconv_ms = median_ms(lambda: conv(features, weight, pairs, pair_num, out_ids.shape[0], algo),
                                  args.repetitions)
            b = mine.get(name)
            if b is None:
                print(f"{name:32} (not in spconv_bench's output)")
                continue
            pairs_total = int(pair_num.sum())
            if subm:
                # spconv's native submanifold rulebook keeps only the offsets before the centre: the others
                # are their mirror images, and the centre pairs every site with itself.
                pairs_total = 2 * pairs_total + len(indices)
            same = out_ids.shape[0] == b["out_voxels"] and pairs_total == b["pairs"]
            print(f"{name:32} {out_ids.shape[0]:>10}/{int(b['out_voxels']):<10} {pairs_total:>11}/"
                  f"{int(b['pairs']):<11} {spconv_ms:>10.2f} {b['ms']:>13.2f} {spconv_ms / b['ms']:>7.2f}x"
                  f"{'' if same else '  RULEBOOKS DIFFER'}")
        dense = torch.from_numpy(dense_indices.copy())
        spconv_ms = median_ms(lambda: ops.get_indice_pairs(dense, dense_batch, dense_shape, algo, [3] * 3, [1] * 3,
                                                           [1] * 3, [1] * 3, [0] * 3, True, False), args.repetitions)
        b = mine.get("BM_RulebookSubm_40k")
        if b is not None:
            print(f"{'BM_RulebookSubm_40k':32} {len(dense_indices):>21} {'':>23} {spconv_ms:>10.2f} {b['ms']:>13.2f} "
                  f"{spconv_ms / b['ms']:>7.2f}x")
    print("\nout voxels and pairs: spconv/Backplane; speedup: spconv time / Backplane time (> 1: Backplane is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
