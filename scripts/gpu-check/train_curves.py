# samples/train on cuda:0 against the same run on the CPU: the same model,
# weights and batches (--seed), so the loss curves must agree. Each step's
# loss is compared to rtol 1e-3 (float32 products on different hardware, 20
# optimizer steps), for AdamW and for SGD with momentum: the CUDA forward,
# backward kernels and fused optimizer kernels against the CPU's. Exit 0 when
# both curves agree and nothing fell back, 1 otherwise. Each run may take 25 s
# (check.sh gives the step 120 s); output is flushed as each run ends.
#   python3 train_curves.py TRAIN_BINARY
import re
import subprocess
import sys


def losses(train, device, optimizer):
    try:
        out = subprocess.run([train, "--device", device, "--steps", "20", "--optimizer", optimizer],
                             capture_output=True, text=True, timeout=25)
    except subprocess.TimeoutExpired as e:
        print(f"--- {device} {optimizer}: still running after {e.timeout} s, stopped", flush=True)
        return None, False
    print(f"--- {device} {optimizer} (exit {out.returncode})\n{out.stdout}{out.stderr}", end="", flush=True)
    if out.returncode != 0:
        return None, False
    curve = [float(m.group(1)) for m in re.finditer(r"^step +\d+ +loss ([-+0-9.eE]+)$", out.stdout, re.M)]
    return curve, "fallback: nothing fell back" in out.stdout


def main():
    train = sys.argv[1]
    ok = True
    for optimizer in ("adamw", "sgd"):
        cpu, _ = losses(train, "cpu", optimizer)
        cuda, no_fallback = losses(train, "cuda:0", optimizer)
        if not cpu or not cuda or len(cpu) != len(cuda):
            print(f"{optimizer}: no curve to compare (cpu {cpu}, cuda {cuda})", flush=True)
            ok = False
            continue
        worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(cuda, cpu))
        agree = worst <= 1e-3
        print(f"{optimizer}: {len(cpu)} steps, largest relative difference {worst:.2e} (rtol 1e-3): "
              f"{'agree' if agree else 'DIFFER'}; cuda {'fell back to the CPU' if not no_fallback else 'ran without fallback'}",
              flush=True)
        ok = ok and agree and no_fallback
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
