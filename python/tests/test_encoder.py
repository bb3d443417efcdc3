"""The encoder layer written in Python (samples/python/encoder_layer.py)
against the C++ sample (samples/encoder) built in the build tree, against
itself on a device with no kernels (every op falls back to the CPU), and
against the same layer in PyTorch eager.

ctest sets BACKPLANE_ENCODER_SAMPLE (the C++ sample's binary) and
BACKPLANE_TP_GOOD_PLUGIN (tp_good, whose device tpdev has no kernels);
the tests that need one skip without it.
"""
import math
import os
import pathlib
import subprocess
import sys

import pytest

import backplane

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "python" / "encoder_layer.py"
sys.path.insert(0, str(SAMPLE.parent))
import encoder_layer  # noqa: E402

# The sample's values go in through backplane.tensor and come out through
# Tensor.numpy() (issue 22 item 3, bound in python/src/tensor_data.cc).
if not hasattr(backplane, "tensor") or not hasattr(backplane.Tensor, "numpy"):
    pytest.skip("the encoder layer needs backplane.tensor and Tensor.numpy, which this build lacks",
                allow_module_level=True)

# The C++ sample's small test config (samples/encoder/CMakeLists.txt).
SMALL = dict(batch=2, seq=16, hidden=64, heads=4, ffn=128, vocab=100)
SMALL_FLAGS = [a for k, v in SMALL.items() for a in (f"--{k}", str(v))] + ["--iters", "1"]
TOLERANCE = encoder_layer.OUTPUT_TOLERANCE  # absolute; outputs are layer-normalised, of order 1


def run(cmd, env=None, check=True):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300,
                       env=None if env is None else {**os.environ, **env})
    if check:
        assert p.returncode == 0, f"{cmd} exited with {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


def run_sample(*flags, env=None, check=True):
    return run([sys.executable, SAMPLE, *SMALL_FLAGS, *flags], env=env, check=check)


def read_values(path):
    """--output FILE: the '#' line (sizes and dtype) and the values."""
    lines = pathlib.Path(path).read_text().splitlines()
    assert lines and lines[0].startswith("# "), f"{path} has no '# <sizes> <dtype>' line"
    return lines[0], [float(v) for v in lines[1:]]


def line(stdout, prefix):
    found = [s for s in stdout.splitlines() if s.startswith(prefix)]
    assert len(found) == 1, f"expected one '{prefix}' line in:\n{stdout}"
    return found[0]


def max_abs_diff(a, b):
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b))


def python_layer_on_cpu(seed=0):
    config = encoder_layer.EncoderConfig(**SMALL)
    weights = encoder_layer.EncoderWeights.random(config, seed)
    batch = encoder_layer.EncoderBatch.random(config, seed)
    return weights, batch, encoder_layer.encoder_layer(weights, batch)


@pytest.fixture(scope="module")
def cpp_sample():
    path = os.environ.get("BACKPLANE_ENCODER_SAMPLE")
    if not path:
        pytest.skip("BACKPLANE_ENCODER_SAMPLE is not set: ctest sets it to the C++ encoder sample "
                    "(build target `encoder`)")
    assert os.access(path, os.X_OK), f"BACKPLANE_ENCODER_SAMPLE={path} is not an executable; build target `encoder`"
    return path


@pytest.fixture(scope="module")
def cpp_output(cpp_sample, tmp_path_factory):
    """The C++ sample's run on the CPU: its stdout and its --output values."""
    path = tmp_path_factory.mktemp("cpp") / "encoder.txt"
    p = run([cpp_sample, "--device", "cpu", *SMALL_FLAGS, "--output", path])
    return p.stdout, read_values(path)


def test_python_layer_matches_cpp_sample(cpp_output, tmp_path):
    cpp_stdout, (cpp_header, cpp_values) = cpp_output
    path = tmp_path / "encoder.txt"
    p = run_sample("--device", "cpu", "--output", path)
    header, values = read_values(path)
    assert header == cpp_header == "# [2, 16, 64] float32"
    assert len(values) == 2 * 16 * 64
    diff = max_abs_diff(values, cpp_values)
    assert diff <= TOLERANCE, f"the Python layer differs from the C++ sample by up to {diff:.2e}"
    # The same weights, batch and config, described alike.
    assert line(p.stdout, "encoder layer:") == line(cpp_stdout, "encoder layer:")
    assert line(p.stdout, "device:") == line(cpp_stdout, "device:")
    # Both sum the values the same way; same values give the same line.
    if diff == 0:
        assert line(p.stdout, "output:").split("; written")[0] == line(cpp_stdout, "output:").split("; written")[0]


def test_python_layer_on_other_seed_differs_from_cpp_seed_0(cpp_output, tmp_path):
    # The comparison above would pass for any layer that ignored the seed.
    _, (_, cpp_values) = cpp_output
    path = tmp_path / "encoder.txt"
    run_sample("--device", "cpu", "--seed", "1", "--output", path)
    assert max_abs_diff(read_values(path)[1], cpp_values) > 0.1


def test_python_layer_on_a_device_without_kernels_matches_the_cpu(tmp_path):
    # tpdev has no kernel for any standard op: each call falls back to the
    # CPU. The plugin is loaded in the sample's own process, so that it does
    # not become `auto` for the other tests.
    plugin = os.environ.get("BACKPLANE_TP_GOOD_PLUGIN")
    if not plugin:
        pytest.skip("BACKPLANE_TP_GOOD_PLUGIN is not set: ctest sets it to the test plugin tp_good")
    path = tmp_path / "encoder.txt"
    p = run_sample("--device", "tpdev", "--output", path,
                   env={"BACKPLANE_PLUGIN_PATH": plugin, "BACKPLANE_FALLBACK": "silent"})
    assert line(p.stdout, "device:").startswith("device:   tpdev:0 ")
    assert "matches the CPU run" in line(p.stdout, "check:")
    _, _, expected = python_layer_on_cpu()
    assert max_abs_diff(read_values(path)[1], encoder_layer.output_values(expected)) <= TOLERANCE


def test_sample_refuses_a_config_that_cannot_work():
    p = run_sample("--heads", "5", check=False)
    assert p.returncode == 2
    assert "hidden (64) must be a multiple of heads (5)" in p.stderr


def test_sample_names_the_devices_present_for_a_missing_device():
    p = run_sample("--device", "cuda:7", check=False)
    assert p.returncode == 1
    assert "cuda:7" in p.stderr and "cpu" in p.stderr


def test_sample_reports_an_output_file_it_cannot_write(tmp_path):
    path = tmp_path / "missing" / "encoder.txt"
    p = run_sample("--device", "cpu", "--output", path, check=False)
    assert p.returncode == 1
    assert "encoder_layer.py: error:" in p.stderr and str(path) in p.stderr


def torch_encoder_layer(torch, w, batch, mask=True):
    """The same layer in PyTorch eager, in float64, from the same weights
    (mask=False: attending to the padding as well)."""
    F = torch.nn.functional

    def t(x):
        return torch.from_numpy(x.cpu().contiguous().numpy().copy())

    def f64(x):
        return t(x).double()

    c = w.config
    ids, lengths = t(batch.token_ids), t(batch.lengths)
    B, S = ids.shape
    H, heads, d = c.hidden, c.heads, c.head_dim

    def dense(x, lin):
        return F.linear(x, f64(lin.weight), f64(lin.bias))

    def norm(x, n):
        return F.layer_norm(x, (H,), f64(n.weight), f64(n.bias), c.layer_norm_eps)

    def split_heads(x):
        return x.view(B, S, heads, d).transpose(1, 2)

    x = norm(F.embedding(ids, f64(w.word_embeddings)) + f64(w.position_embeddings)[:S], w.embedding_norm)
    q, k, v = (split_heads(dense(x, lin)) for lin in (w.query, w.key, w.value))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    padding = torch.arange(S)[None, :] >= lengths[:, None]
    if not mask:
        padding = torch.zeros_like(padding)
    probs = scores.masked_fill(padding.view(B, 1, 1, S), encoder_layer.MASKED_SCORE).softmax(-1)
    context = (probs @ v).transpose(1, 2).reshape(B, S, H)
    x = norm(dense(context, w.attention_output) + x, w.attention_norm)
    return norm(dense(F.gelu(dense(x, w.intermediate)), w.output) + x, w.output_norm)


def test_python_layer_matches_pytorch_eager():
    torch = pytest.importorskip("torch")
    weights, batch, out = python_layer_on_cpu()
    assert out.shape == (2, 16, 64) and out.dtype == backplane.float32
    expected = torch_encoder_layer(torch, weights, batch)
    actual = torch.from_numpy(out.numpy().copy()).double()
    diff = (actual - expected).abs().max().item()
    assert diff <= TOLERANCE, f"the Python layer differs from PyTorch (float64) by up to {diff:.2e}"
    # The mask matters: sequence 1 is padded, and attending to its padding
    # changes its output (a layer that ignored the mask would fail above).
    assert batch.lengths.numpy().tolist()[0] == 16 and batch.lengths.numpy().tolist()[1] < 16
    unmasked = torch_encoder_layer(torch, weights, batch, mask=False)
    assert (actual[1] - unmasked[1]).abs().max().item() > 100 * TOLERANCE
