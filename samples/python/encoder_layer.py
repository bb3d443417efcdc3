#!/usr/bin/env python3
"""One BERT-style encoder layer written in Python with Backplane's operators,
on the device picked at run time: the Python twin of samples/encoder.

    python samples/python/encoder_layer.py [--device auto|cpu|cuda:0|...]
        [--batch N] [--seq N] [--hidden N] [--heads N] [--ffn N] [--vocab N]
        [--iters N] [--seed N] [--output FILE]

(With a build tree instead of an installed package: PYTHONPATH=build/python.)

The weights and the batch are the C++ sample's, bit for bit: the weights are
drawn with backplane.randn after backplane.manual_seed(seed), in the same
order and with the same scaling as EncoderWeights::random
(samples/encoder/encoder.cc), and the batch comes from the same
std::mt19937_64 stream as EncoderBatch::random (implemented below). The
layer calls the same operators in the same order as encoderLayer, so on the
same device its output matches `encoder`'s; the `output:` line (sum and sum
of squares of every value) and --output FILE (every value, %.9g) are written
exactly as `encoder` writes them, for comparing the two:

    build/samples/encoder/encoder --device cpu --batch 2 --seq 16 --hidden 64 \\
        --heads 4 --ffn 128 --vocab 100 --output cpp.txt
    python samples/python/encoder_layer.py --device cpu --batch 2 --seq 16 \\
        --hidden 64 --heads 4 --ffn 128 --vocab 100 --output py.txt

On a device other than the CPU the output is checked against the same layer
run on the CPU (exit status 1 if it differs by more than 1e-4, or 1e-2 where
the plugin runs float32 matrix products in TF32, as the C++ sample allows). Exit codes:
0 done (and the check passed), 1 an error or a failed check, 2 a usage error.
python/tests/test_encoder.py compares this layer with the C++ sample and
with PyTorch. Writing the values (the `output:` line, --output) reads the
output through Tensor.numpy(), so it needs NumPy.
"""
import argparse
import dataclasses
import math
import os
import sys
import time
from typing import NamedTuple

import backplane

# The value a masked attention score is set to before the softmax (the C++
# sample's kMaskedScore): exp() of it is exactly 0 in float32 next to any
# real score, and it is finite, so a row's maximum stays a real number.
MASKED_SCORE = -1e9
# Outputs are layer-normalised, of order 1 (samples/encoder/reference.h,
# Note [Encoder tolerance]).
OUTPUT_TOLERANCE = 1e-4
# With TF32 matrix products (float32 GEMM inputs rounded to 10 mantissa bits).
TF32_OUTPUT_TOLERANCE = 1e-2
PAD_TOKEN_ID = 0


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """The sizes of one layer and its input; the defaults are BERT-base's."""
    batch: int = 8
    seq: int = 128  # also the number of position embeddings
    hidden: int = 768
    heads: int = 12  # must divide hidden
    ffn: int = 3072  # the feed-forward block's inner width
    vocab: int = 30522
    layer_norm_eps: float = 1e-12  # BERT's

    @property
    def head_dim(self):
        return self.hidden // self.heads

    def validate(self):
        """Raises ValueError naming the first size that cannot work."""
        for name in ("batch", "seq", "hidden", "heads", "ffn"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads}): "
                             "each head takes hidden / heads features")
        if self.vocab < 2:
            raise ValueError(f"vocab must be at least 2 (token {PAD_TOKEN_ID} is padding), got {self.vocab}")

    def __str__(self):
        return (f"batch {self.batch}, seq {self.seq}, hidden {self.hidden}, {self.heads} heads, "
                f"ffn {self.ffn}, vocab {self.vocab}")


class Linear(NamedTuple):
    weight: backplane.Tensor  # [out_features, in_features]
    bias: backplane.Tensor  # [out_features]


class Norm(NamedTuple):
    weight: backplane.Tensor  # gamma, [hidden]
    bias: backplane.Tensor  # beta, [hidden]


class EncoderWeights(NamedTuple):
    """Every parameter of the layer, float32, all on one device."""
    config: EncoderConfig
    word_embeddings: backplane.Tensor  # [vocab, hidden]
    position_embeddings: backplane.Tensor  # [seq, hidden]
    embedding_norm: Norm
    query: Linear  # head h owns features [h * head_dim, (h + 1) * head_dim)
    key: Linear
    value: Linear
    attention_output: Linear
    attention_norm: Norm
    intermediate: Linear  # hidden -> ffn
    output: Linear  # ffn -> hidden
    output_norm: Norm

    @staticmethod
    def random(config, seed):
        """The C++ sample's EncoderWeights::random(config, seed): drawn on the
        CPU after manual_seed(seed). Each draw takes the next numbers of the
        seeded stream, so the order below must stay the C++ order."""
        config.validate()
        backplane.manual_seed(seed)

        def linear(n_in, n_out):
            return Linear(backplane.randn((n_out, n_in)) * (1.0 / math.sqrt(n_in)), backplane.randn((n_out,)) * 0.1)

        def norm():
            return Norm(backplane.randn((config.hidden,)) * 0.1 + 1.0, backplane.randn((config.hidden,)) * 0.1)

        return EncoderWeights(
            config=config,
            word_embeddings=backplane.randn((config.vocab, config.hidden)),
            position_embeddings=backplane.randn((config.seq, config.hidden)),
            embedding_norm=norm(),
            query=linear(config.hidden, config.hidden),
            key=linear(config.hidden, config.hidden),
            value=linear(config.hidden, config.hidden),
            attention_output=linear(config.hidden, config.hidden),
            attention_norm=norm(),
            intermediate=linear(config.hidden, config.ffn),
            output=linear(config.ffn, config.hidden),
            output_norm=norm(),
        )

    def to(self, device):
        """The same weights on `device`."""
        def move(x):
            if isinstance(x, backplane.Tensor):
                return x.to(device)
            if isinstance(x, (Linear, Norm)):
                return type(x)(*(t.to(device) for t in x))
            return x
        return EncoderWeights(*(move(x) for x in self))


class _MT19937_64:
    """std::mt19937_64, whose output the C++ standard fixes, so that a seed
    gives the C++ sample's batch (its 10000th number from the default seed
    5489 is 9981545732273789042, as the standard requires)."""
    _N, _M, _MASK = 312, 156, (1 << 64) - 1

    def __init__(self, seed):
        mt = [seed & self._MASK]
        for i in range(1, self._N):
            mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & self._MASK)
        self._mt = mt
        self._index = self._N

    def _twist(self):
        mt, n, m = self._mt, self._N, self._M
        for i in range(n):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % n] & 0x7FFFFFFF)
            mt[i] = mt[(i + m) % n] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
        self._index = 0

    def __call__(self):
        if self._index >= self._N:
            self._twist()
        y = self._mt[self._index]
        self._index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & self._MASK


class EncoderBatch(NamedTuple):
    """A batch of token sequences padded to config.seq."""
    token_ids: backplane.Tensor  # [batch, seq] int64 in [1, vocab); PAD_TOKEN_ID past a sequence's length
    lengths: backplane.Tensor  # [batch] int64 in [1, seq]

    @staticmethod
    def random(config, seed):
        """The C++ sample's EncoderBatch::random(config, seed): sequence 0 is
        full length, the others padded (lengths in [ceil(seq / 2), seq - 1])."""
        config.validate()
        gen = _MT19937_64(seed)
        min_length = (config.seq + 1) // 2
        max_padded = max(min_length, config.seq - 1)
        lengths = []
        ids = [PAD_TOKEN_ID] * (config.batch * config.seq)
        for b in range(config.batch):
            length = config.seq if b == 0 else min_length + gen() % (max_padded - min_length + 1)
            lengths.append(length)
            for s in range(length):
                ids[b * config.seq + s] = 1 + gen() % (config.vocab - 1)
        return EncoderBatch(backplane.tensor(ids, dtype=backplane.int64).view(config.batch, config.seq),
                            backplane.tensor(lengths, dtype=backplane.int64))

    def to(self, device):
        return EncoderBatch(self.token_ids.to(device), self.lengths.to(device))


def encoder_layer(w, batch):
    """One encoder layer over `batch`: [batch, seq, hidden] float32 on the
    weights' device. The same operators in the same order as the C++
    encoderLayer (samples/encoder/encoder.cc)."""
    c = w.config
    B, S = batch.token_ids.shape
    H, heads, d = c.hidden, c.heads, c.head_dim
    if S > c.seq:
        raise ValueError(f"sequences of {S} tokens are longer than the {c.seq} position embeddings")

    def dense(x, lin):
        return backplane.linear(x, lin.weight, lin.bias)

    def norm(x, n):
        return backplane.layer_norm(x, [H], n.weight, n.bias, c.layer_norm_eps)

    # Embeddings: [B, S, H]; the position table broadcasts over the batch.
    x = norm(backplane.embedding(w.word_embeddings, batch.token_ids) + w.position_embeddings.narrow(0, 0, S),
             w.embedding_norm)

    # Self-attention; the heads are views: [B, S, H] -> [B, heads, S, d].
    def split_heads(t):
        return t.view(B, S, heads, d).transpose(1, 2)

    q = split_heads(dense(x, w.query))
    k = split_heads(dense(x, w.key))
    v = split_heads(dense(x, w.value))
    scores = q.matmul(k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # [B, heads, S, S]
    # Keys past a sequence's length are padding: no query attends to them.
    padding = backplane.arange(S, device=x.device).ge(batch.lengths.unsqueeze(1))  # [B, S] bool
    probs = scores.masked_fill(padding.view(B, 1, 1, S), MASKED_SCORE).softmax(-1)
    context = probs.matmul(v).transpose(1, 2).reshape(B, S, H)
    x = norm(dense(context, w.attention_output) + x, w.attention_norm)

    # Feed-forward block.
    return norm(dense(dense(x, w.intermediate).gelu(), w.output) + x, w.output_norm)


def output_values(t):
    """Every value of `t`, row-major, as Python floats (through NumPy)."""
    return t.cpu().contiguous().numpy().reshape(-1).tolist()


def output_line(values, path=None):
    """The `output:` line, as the C++ sample prints it (summed in double, in
    row-major order)."""
    total = squares = 0.0
    for v in values:
        total += v
        squares += v * v
    written = f"; written to {path}" if path else ""
    return f"output:   sum {total:.6e}, sum of squares {squares:.6e} over {len(values)} values{written}"


def write_values(path, t, values):
    """--output FILE in the C++ sample's format."""
    with open(path, "w") as f:
        f.write(f"# [{', '.join(str(s) for s in t.shape)}] {t.dtype.name}\n")
        f.writelines(f"{v:.9g}\n" for v in values)


def device_line(flag, dev):
    """Which device ran and why, as the C++ samples say it."""
    present = [str(d.device) for d in backplane.devices()]
    name = next((f" ({d.properties.name})" for d in backplane.devices()
                 if d.device == dev and d.properties.name != str(d.device)), "")
    origin = f"--device {flag}"
    env = os.environ.get("BACKPLANE_DEVICE", "")
    if flag == "auto" and env and env != "auto":
        origin = f"BACKPLANE_DEVICE={env} (over --device auto)"
    return f"{dev}{name}, from {origin}; devices present: {', '.join(present)}"


def tf32_matrix_products(dev):
    """Whether dev's plugin runs float32 matrix products in TF32 (its
    <type>::allow_tf32 op, Note [TF32 matrix products]); False for devices
    without the op."""
    if dev.type == "cpu":
        return False
    allow_tf32 = getattr(getattr(backplane.ops, dev.type, None), "allow_tf32", None)
    return allow_tf32 is not None and allow_tf32()


def _sync(t):
    """Waits for the work that produced `t` (reads one element back)."""
    t.reshape(-1).narrow(0, 0, 1).cpu()


def run(args):
    config = EncoderConfig(batch=args.batch, seq=args.seq, hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                           vocab=args.vocab)
    dev = backplane.device(args.device)
    # Made on the CPU, then moved, as in the C++ sample.
    cpu_weights = EncoderWeights.random(config, args.seed)
    cpu_batch = EncoderBatch.random(config, args.seed)
    weights, batch = cpu_weights.to(dev), cpu_batch.to(dev)

    output = encoder_layer(weights, batch)  # the warm-up, and the run that is checked
    values = output_values(output)
    passed = True
    check = None
    if dev.type != "cpu":
        expected = output_values(encoder_layer(cpu_weights, cpu_batch))
        diff = max((abs(a - b) for a, b in zip(values, expected)), default=0.0)
        diff = diff if all(map(math.isfinite, values)) else math.inf
        tf32 = tf32_matrix_products(dev)
        tolerance = TF32_OUTPUT_TOLERANCE if tf32 else OUTPUT_TOLERANCE
        passed = diff <= tolerance
        check = (f"check:    output [{', '.join(map(str, output.shape))}] "
                 f"{'matches' if passed else 'DOES NOT MATCH'} the CPU run: max abs diff {diff:.1e} "
                 f"{'<=' if passed else '>'} tolerance {tolerance:.0e}"
                 + (" (TF32 matrix products are on: float32 GEMM inputs are rounded to 10 mantissa bits)"
                    if tf32 else ""))

    _sync(output)
    start = time.perf_counter()
    for _ in range(args.iters):
        timed = encoder_layer(weights, batch)
    _sync(timed)
    elapsed_ms = (time.perf_counter() - start) * 1e3

    print(f"encoder layer: {config}, seed {args.seed}")
    print(f"device:   {device_line(args.device, dev)}")
    if check:
        print(check)
    if args.output:
        write_values(args.output, output, values)
    print(output_line(values, args.output))
    print(f"time:     {elapsed_ms / args.iters:.2f} ms per layer (mean of {args.iters} runs after a warm-up)")
    return 0 if passed else 1


def parse_args(argv):
    p = argparse.ArgumentParser(prog="encoder_layer.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto",
                   help="auto (default: the first present of cuda, hip, a vendor's device, cpu; "
                        "BACKPLANE_DEVICE overrides it), cpu, cuda, cuda:1, or a vendor's device type")
    d = EncoderConfig()
    p.add_argument("--batch", type=int, default=d.batch, help="sequences per batch (%(default)s)")
    p.add_argument("--seq", type=int, default=d.seq, help="tokens per sequence (%(default)s)")
    p.add_argument("--hidden", type=int, default=d.hidden, help="hidden size (%(default)s)")
    p.add_argument("--heads", type=int, default=d.heads, help="attention heads; must divide --hidden (%(default)s)")
    p.add_argument("--ffn", type=int, default=d.ffn, help="feed-forward inner size (%(default)s)")
    p.add_argument("--vocab", type=int, default=d.vocab, help="vocabulary size (%(default)s)")
    p.add_argument("--iters", type=int, default=5, help="timed runs after the warm-up (%(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the batch (%(default)s)")
    p.add_argument("--output", metavar="FILE",
                   help="also write the output's values to FILE, as the C++ sample's --output does")
    args = p.parse_args(argv)
    if args.iters < 1:
        p.error(f"--iters must be at least 1, got {args.iters}")
    if not 0 <= args.seed < 2**64:
        p.error(f"--seed must be in [0, 2**64), got {args.seed}")
    try:
        EncoderConfig(batch=args.batch, seq=args.seq, hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                      vocab=args.vocab).validate()
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        return run(args)
    except (backplane.Error, OSError) as e:
        print(f"encoder_layer.py: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
