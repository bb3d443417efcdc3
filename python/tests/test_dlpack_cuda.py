"""DLPack between Backplane's and PyTorch's CUDA tensors (python/src/dlpack.cc),
on a machine with an NVIDIA GPU, the CUDA plugin and torch with CUDA; skipped
anywhere else. The GPU check (scripts/gpu-check/check.sh) runs it there.

Each direction shares memory (no copy), keeps the dtype, shape and strides,
and orders the streams: the consumer's stream waits for the work the
producer queued before the exchange (DLPack's stream argument), so a large
kernel still running on one side is seen finished by the other."""
import pytest

import backplane as bp

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not any(d.device.type == "cuda" for d in bp.devices()),
    reason="needs a CUDA device that both torch and backplane's CUDA plugin see")

DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool"]
BIG = 1 << 24  # 64 MiB of float32: long enough for a missing wait to show


@pytest.mark.parametrize("name", DTYPES)
def test_torch_imports_a_backplane_cuda_tensor_without_a_copy(name):
    t = bp.arange(6, device="cuda:0").to(getattr(bp, name)).view(2, 3)
    x = torch.from_dlpack(t)
    assert x.device.type == "cuda" and x.dtype == getattr(torch, name) and tuple(x.shape) == (2, 3)
    assert x.cpu().tolist() == t.cpu().tolist()
    x[0, 1] = 1
    torch.cuda.synchronize()
    assert t.cpu()[0, 1].item() == x.cpu()[0, 1].item()
    assert torch.from_dlpack(bp.from_dlpack(x)).data_ptr() == x.data_ptr()  # round trip, still no copy


@pytest.mark.parametrize("name", DTYPES)
def test_backplane_imports_a_torch_cuda_tensor_without_a_copy(name):
    x = torch.arange(6, device="cuda").to(getattr(torch, name)).reshape(2, 3)
    t = bp.from_dlpack(x)
    assert str(t.device) == "cuda:0" and t.dtype is getattr(bp, name) and t.shape == (2, 3)
    assert t.cpu().tolist() == x.cpu().tolist()
    t[1, 2] = 0
    bp.synchronize("cuda:0")
    assert x.cpu()[1, 2].item() == 0


def test_views_keep_their_strides():
    t = bp.arange(20, dtype=bp.float32, device="cuda:0").view(4, 5)
    for v in (t.T, t[1:, ::2], t[2]):
        x = torch.from_dlpack(v)
        assert tuple(x.shape) == v.shape and x.cpu().tolist() == v.cpu().tolist()
    y = torch.arange(20.0, device="cuda").reshape(4, 5)
    for xv in (y.t(), y[1:, ::2]):
        u = bp.from_dlpack(xv)
        assert u.shape == tuple(xv.shape) and u.cpu().tolist() == xv.cpu().tolist()


def test_the_consumer_waits_for_the_producers_queued_work():
    # A new value each round: memory the caching allocators reuse holds the
    # last round's, so a read that did not wait sums the wrong value.
    for i in range(4):
        value = 3.0 + i
        t = bp.ones(BIG, device="cuda:0") * value  # queued on backplane's stream, maybe still running
        assert torch.from_dlpack(t).sum().item() == pytest.approx(value * BIG, rel=1e-4)
        x = torch.ones(BIG, device="cuda") * (value + 10)  # queued on torch's current stream
        assert bp.from_dlpack(x).sum().item() == pytest.approx((value + 10) * BIG, rel=1e-4)


def test_the_python_encoder_sample_runs_on_cuda_and_agrees_with_the_cpu():
    import os
    import subprocess
    import sys
    sample = os.environ.get("BACKPLANE_PYTHON_ENCODER_SAMPLE")
    if not sample:
        pytest.skip("BACKPLANE_PYTHON_ENCODER_SAMPLE names samples/python/encoder_layer.py")
    r = subprocess.run([sys.executable, sample, "--device", "cuda:0"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
