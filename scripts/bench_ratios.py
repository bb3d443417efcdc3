#!/usr/bin/env python3
"""Prints the ratios between benchmarks of one run of the Google Benchmark
programs (their JSON files, given as arguments; a missing or empty one, from a
program none of whose benchmarks matched the filter, is skipped).

Each line: a benchmark, its baseline, the benchmark's median time, the
ratio and the target from the issue that asked for it. Two kinds of ratio:
"time" (benchmark time / baseline time: lower is better) and "speed"
(baseline time / benchmark time: the fraction of the baseline's speed
reached, higher is better). Reporting only; it never fails.
"""
import json
import os
import sys

# (benchmark, baseline, kind, target description, predicate on the ratio or None)
RATIOS = [
    ("BM_DispatchUnboxed_Noop", "BM_RawFunctionPointer", "time", "<= 2.0x", lambda r: r <= 2.0),
    ("BM_DispatchBoxed_Noop", "BM_RawFunctionPointer", "time", "<= 8x", lambda r: r <= 8.0),
    ("BM_DispatchUnboxed_Noop", "BM_RawFunctionPointer_PlainStruct", "time", "(for scale)", None),
    ("BM_PluginKernelCall", "BM_DispatchUnboxed_Noop", "diff", "<= +5 ns", lambda d: d <= 5.0),
    # A standard op's signature with an optional tensor (linear's) is called
    # typed too (typed_calls.h); one no standard op has is called boxed.
    ("BM_PluginKernelCall_LinearSignature", "BM_PluginKernelCall", "diff", "<= +5 ns (typed, as the no-op)",
     lambda d: d <= 5.0),
    ("BM_PluginKernelCall_BoxedSignature", "BM_PluginKernelCall", "diff", "(report: a boxed call)", None),
    # Declining a call (Note [Declined calls]): what a decline adds to the
    # call of the kernel it goes to, through the C ABI and the C++ SDK.
    ("BM_PluginKernelDecline_Abi", "BM_PluginKernelCall", "diff", "(report)", None),
    ("BM_PluginKernelDecline_Sdk", "BM_PluginKernelCall", "diff", "(report)", None),
    ("BM_Add_1M_f32", "BM_Memcpy_Equivalent", "speed", ">= 0.9x", lambda r: r >= 0.9),
    ("BM_Matmul_512_f32", "BM_OneDNN_Matmul_512_f32", "speed", ">= 0.97x", lambda r: r >= 0.97),
    # The same two products with a model's ops (bias add, gelu, layer_norm,
    # softmax) run before each one, the product alone timed.
    ("BM_Matmul_512_f32_Interleaved", "BM_OneDNN_Matmul_512_f32_Interleaved", "speed", ">= 0.97x",
     lambda r: r >= 0.97),
    ("BM_Conv2d_ResNetBlock", "BM_OneDNN_Conv2d_ResNetBlock", "speed", ">= 0.95x", lambda r: r >= 0.95),
    # A dense layer with its gelu fused into the product (_addmm_activation)
    # against linear then gelu, and against the product alone.
    ("BM_LinearGelu_Fused_f32", "BM_LinearGelu_Unfused_f32", "speed", "(report)", None),
    ("BM_LinearGelu_Fused_f32", "BM_Linear_f32", "time", "(report: the gelu epilogue)", None),
    # conv2d's backward op on the CPU plugin (oneDNN's backward primitives)
    # against its composite (two conv2d calls), and against the forward
    # (twice the forward's flops).
    ("BM_Conv2dBackward_ResNetBlock", "BM_Conv2dBackward_ResNetBlock_Composite", "speed", "(report)", None),
    ("BM_Conv2dBackward_ResNetBlock", "BM_Conv2d_ResNetBlock", "time", "(report; 2x the flops)", None),
    ("BM_Add_Tiny_EndToEnd", "BM_RawFunctionPointer", "time", "(report; < 187 ns absolute)", None),
    # Autograd (docs/autograd.md): recording a tiny add's node, against the add without grad.
    ("BM_Add_Tiny_EndToEnd_RequiresGrad", "BM_Add_Tiny_EndToEnd", "time", "<= 3x", lambda r: r <= 3.0),
    # libtorch 1.13's own cost of the same (train_bench), for scale.
    ("BM_Torch_Add_Tiny_RequiresGrad", "BM_Torch_Add_Tiny", "time", "(libtorch, for scale)", None),
    # The BERT-base encoder layer's forward + backward against its forward with
    # the graph recorded: backward <= 2.2x the forward is a ratio <= 3.2x.
    ("BM_EncoderLayer_ForwardBackward", "BM_EncoderLayer_Forward_Recorded", "time", "<= 3.2x (backward <= 2.2x)",
     lambda r: r <= 3.2),
    # One training step of samples/train's model against the same step in libtorch 1.13.
    ("BM_TrainStep_Backplane", "BM_TrainStep_Libtorch", "time", "<= 1.0x", lambda r: r <= 1.0),
    # softmax / log_softmax (the CPU plugin's own kernels, Note [Softmax
    # kernels]) against oneDNN's softmax_v2 primitive on the same shapes and
    # axis (issue: >= 0.95x along any dim), and along the first dim against
    # the same tensor along the last (report).
    ("BM_Softmax_f32_Dispatcher", "BM_OneDNN_Softmax_f32", "speed", ">= 0.95x", lambda r: r >= 0.95),
    ("BM_LogSoftmax_f32_Dispatcher", "BM_OneDNN_LogSoftmax_f32", "speed", ">= 0.95x", lambda r: r >= 0.95),
    ("BM_Softmax_Dim0_f32", "BM_OneDNN_Softmax_Dim0_f32", "speed", ">= 0.95x", lambda r: r >= 0.95),
    ("BM_Softmax_Mid_f32", "BM_OneDNN_Softmax_Mid_f32", "speed", ">= 0.95x", lambda r: r >= 0.95),
    ("BM_Softmax_Dim0_f32", "BM_Softmax_f32_Dispatcher", "speed", "(report)", None),
    # gelu through oneDNN's kernel against the plugin's own loop on the same values.
    ("BM_Gelu_3M_f32", "BM_Gelu_3M_f32_Loop", "speed", "(report)", None),
    # Sparse convolution (bench/spconv): gather + GEMMs + scatter-add against
    # the same total GEMM work in one oneDNN matmul.
    ("BM_SubmConv3x3x3_C16", "BM_OneDNN_Matmul_SubmConv3x3x3_C16", "speed", ">= 0.6x", lambda r: r >= 0.6),
    ("BM_SubmConv3x3x3_C64", "BM_OneDNN_Matmul_SubmConv3x3x3_C64", "speed", ">= 0.6x", lambda r: r >= 0.6),
    ("BM_SparseConv3x3x3_Stride2_C32", "BM_OneDNN_Matmul_SparseConv3x3x3_Stride2_C32", "speed", ">= 0.6x",
     lambda r: r >= 0.6),
    # The strided layer on a batch of four scans: a few milliseconds per
    # iteration, so that the ratio holds on a shared machine; then its phases
    # (the rulebook, and gather, GEMM and scatter as separate passes, as a
    # device without a fused kernel runs them) against the fused convolution.
    ("BM_SparseConv3x3x3_Stride2_C32_Batch4", "BM_OneDNN_Matmul_SparseConv3x3x3_Stride2_C32_Batch4", "speed",
     ">= 0.6x", lambda r: r >= 0.6),
    ("BM_SparseConv3x3x3_Stride2_C32_Batch4_Rulebook", "BM_SparseConv3x3x3_Stride2_C32_Batch4", "time",
     "(report: phase / fused)", None),
    ("BM_SparseConv3x3x3_Stride2_C32_Batch4_Gather", "BM_SparseConv3x3x3_Stride2_C32_Batch4", "time",
     "(report: phase / fused)", None),
    ("BM_SparseConv3x3x3_Stride2_C32_Batch4_Gemm", "BM_SparseConv3x3x3_Stride2_C32_Batch4", "time",
     "(report: phase / fused)", None),
    ("BM_SparseConv3x3x3_Stride2_C32_Batch4_Scatter", "BM_SparseConv3x3x3_Stride2_C32_Batch4", "time",
     "(report: phase / fused)", None),
    # The CUDA plugin (bench/gpu; skipped without a GPU): a bandwidth-bound
    # kernel against a copy moving the same bytes, cuBLAS through the
    # dispatcher against cuBLAS called directly, and a whole tiny call
    # against the bare launch it ends in.
    ("BM_Cuda_Add_64M_f32", "BM_Cuda_Memcpy_D2D_64M_f32", "speed", ">= 0.95x", lambda r: r >= 0.95),
    ("BM_Cuda_Matmul_4096", "BM_Cublas_Sgemm_4096", "speed", ">= 0.97x", lambda r: r >= 0.97),
    ("BM_Cuda_Add_Tiny_EndToEnd", "BM_Cuda_EmptyKernelLaunch", "diff", "<= +1000 ns", lambda d: d <= 1000.0),
    # Against PyTorch on the same GPU (scripts/gpu-check/torch_baseline.py's
    # JSON among the inputs: its figures become Torch_* baselines).
    ("BM_Cuda_EncoderLayer_f32", "Torch_EncoderLayer_f32", "speed", "(report)", None),
    ("BM_Cuda_EncoderLayer_Graph_f32", "Torch_EncoderLayer_f32", "time", "<= 0.6x", lambda r: r <= 0.6),
    ("BM_Cuda_EncoderLayer_Graph_f32", "Torch_EncoderLayer_CudaGraph_f32", "speed", "(report)", None),
    ("BM_Cuda_EncoderLayer_Graph_f32", "BM_Cuda_EncoderLayer_f32", "speed", "(report)", None),
    ("BM_Cuda_ResNetBlock_f32", "Torch_ResNetBlock_f32", "speed", ">= 0.9x", lambda r: r >= 0.9),
    # The encoder layer's forward recording its graph plus its backward
    # (issue 35's GPU target), against PyTorch eager doing the same.
    ("BM_Cuda_EncoderLayer_ForwardBackward_f32", "Torch_EncoderLayer_ForwardBackward_f32", "time", "<= 1.0x",
     lambda r: r <= 1.0),
    # Row kernels against the memory system: bytes per second over the
    # copy's (each reads its input and writes its output once).
    ("BM_Cuda_Softmax_LayerNorm", "BM_Cuda_Memcpy_D2D_64M_f32", "bandwidth", "(report)", None),
    # Sparse convolution on the GPU: the fused gather-GEMM-scatter against
    # the same GEMM work in one cuBLAS call.
    ("BM_Cuda_SubmConv3x3x3_C64", "BM_Cublas_Sgemm_SubmConv3x3x3_C64", "speed", ">= 0.5x", lambda r: r >= 0.5),
    ("BM_Cuda_SparseConv3x3x3_Stride2_C32", "BM_Cublas_Sgemm_SparseConv3x3x3_Stride2_C32", "speed", "(report)",
     None),
]


# Counters a benchmark sets that have a target of their own: (benchmark,
# counter, what it is, target, predicate on its median).
COUNTERS = [
    ("BM_EncoderLayer_Forward", "others_pct", "% op time outside products", "<= 5%",
     lambda v: v <= 5.0),
]


# Counters shown beside a line of the table (benchmark, counter).
LABELS = [("BM_LoadAllPlugins", "plugins"), ("BM_Cuda_EncoderLayer_ForwardBackward_f32", "fallback_calls")]


def medians(paths):
    """Median time (ns), median bytes_per_second (or None) and median
    counters (COUNTERS') per benchmark."""
    out, bandwidth, counters = {}, {}, {}
    for path in paths:
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            continue
        with open(path) as f:
            add_medians(json.load(f), out, bandwidth, counters)
    return out, bandwidth, counters


# torch_baseline.py's figures (milliseconds) as baselines of the ratios.
TORCH_FIGURES = {"encoder_layer_fp32_ms": "Torch_EncoderLayer_f32",
                 "encoder_layer_fp32_cudagraph_ms": "Torch_EncoderLayer_CudaGraph_f32",
                 "encoder_layer_fwd_bwd_fp32_ms": "Torch_EncoderLayer_ForwardBackward_f32",
                 "resnet_block_fp32_ms": "Torch_ResNetBlock_f32"}


def add_medians(data, out, bandwidth, counters):
    if "benchmarks" not in data:  # torch_baseline.py's output
        for key, name in TORCH_FIGURES.items():
            if key in data:
                out[name] = data[key] * 1e6
        return
    for b in data["benchmarks"]:
        if b.get("error_occurred"):  # skipped (no device, plugin missing): no time to compare
            continue
        name = b.get("run_name", b["name"]).split("/")[0]
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        if b.get("aggregate_name") in (None, "median"):
            t = b["real_time"] * scale
            if b.get("aggregate_name") == "median" or name not in out:
                out[name] = t
                bandwidth[name] = b.get("bytes_per_second")
                for bench, counter in [c[:2] for c in COUNTERS] + LABELS:
                    if name == bench:  # this row's counter, or none (not an earlier file's)
                        counters.pop((bench, counter), None)
                        if counter in b:
                            counters[(bench, counter)] = b[counter]


def fmt(ns):
    return f"{ns / 1e6:8.3f}ms" if ns >= 1e6 else f"{ns / 1e3:8.2f}us" if ns >= 1e4 else f"{ns:8.2f}ns"


def main():
    times, bandwidth, counters = medians(sys.argv[1:] or ["build/bench/results.json"])
    print(f"{'benchmark':32} {'baseline':44} {'median':>10} {'ratio':>12}  target")
    for name, base, kind, target, ok in RATIOS:
        if name not in times or base not in times:
            continue
        t, b = times[name], times[base]
        if kind == "bandwidth":
            if not bandwidth.get(name) or not bandwidth.get(base):
                continue
            value = bandwidth[name] / bandwidth[base]
            shown = f"{value:.3f}x B/s"
        elif kind == "diff":
            value, shown = t - b, f"{t - b:+.2f} ns"
        elif kind == "speed":
            value, shown = b / t, f"{b / t:.3f}x spd"
        else:
            value, shown = t / b, f"{t / b:.2f}x time"
        verdict = "" if ok is None else ("ok" if ok(value) else "MISSED")
        print(f"{name:32} {base:44} {fmt(t)} {shown:>12}  {target} {verdict}")
    if "BM_Add_Tiny_EndToEnd" in times:
        t = times["BM_Add_Tiny_EndToEnd"]
        print(f"{'BM_Add_Tiny_EndToEnd':32} {'(absolute)':44} {fmt(t)} {'':>12}  < 187 ns {'ok' if t < 187 else 'MISSED'}")
    if "BM_LoadAllPlugins" in times:
        t = times["BM_LoadAllPlugins"]
        n = counters.get(("BM_LoadAllPlugins", "plugins"))
        what = "(absolute)" if n is None else f"(absolute; {n:.0f} plugins loaded)"
        print(f"{'BM_LoadAllPlugins':32} {what:44} {fmt(t)} {'':>12}  < 50 ms {'ok' if t < 50e6 else 'MISSED'}")
    if "BM_Cuda_EncoderLayer_f32" in times:
        t = times["BM_Cuda_EncoderLayer_f32"]
        print(f"{'BM_Cuda_EncoderLayer_f32':32} {'(absolute; PyTorch eager: torch_baseline)':44} {fmt(t)} {'':>12}  "
              f"<= 0.55 ms on an H100 {'ok' if t <= 0.55e6 else 'MISSED'}")
    if ("BM_Cuda_EncoderLayer_ForwardBackward_f32", "fallback_calls") in counters:
        n = counters[("BM_Cuda_EncoderLayer_ForwardBackward_f32", "fallback_calls")]
        print(f"{'BM_Cuda_EncoderLayer_ForwardBackward_f32':32} {'fallback_calls: calls that fell back to the CPU':44} "
              f"{fmt(times['BM_Cuda_EncoderLayer_ForwardBackward_f32'])} {n:12.0f}  == 0 {'ok' if n == 0 else 'MISSED'}")
    for name, target_ns, target in (("BM_LidarBackbone_Cpu", 40e6, "<= 40 ms on an idle 2-core machine"),
                                    ("BM_Cuda_RulebookSubm_40k", 0.5e6, "<= 0.5 ms on an H100"),
                                    ("BM_Cuda_LidarBackbone", 8e6, "<= 8 ms on an H100")):
        if name in times:
            t = times[name]
            print(f"{name:32} {'(absolute)':44} {fmt(t)} {'':>12}  {target} {'ok' if t <= target_ns else 'MISSED'}")
    for bench, counter, what, target, ok in COUNTERS:
        if (bench, counter) in counters:
            v = counters[(bench, counter)]
            print(f"{bench:32} {counter + ': ' + what:44} {fmt(times[bench])} {v:11.2f}%  {target} "
                  f"{'ok' if ok(v) else 'MISSED'}")
    if "BM_RulebookSubm_40k" in times:
        t = times["BM_RulebookSubm_40k"]
        print(f"{'BM_RulebookSubm_40k':32} {'(absolute)':44} {fmt(t)} {'':>12}  (report)")


if __name__ == "__main__":
    main()
