#!/usr/bin/env python3
"""Runs `backplane ops --format json` and checks the output parses and has the
documented shape. Usage:

  check_ops_json.py [--expect OP@BACKEND=KIND]... [--expect-dtypes OP@BACKEND=DTYPE,...]...
                    [--no-cpu-fallback NAMESPACE@BACKEND]... -- BACKPLANE [ARGS...]

Each op row is {"name", "schema", "kernels": {backend: kind}, "dtypes":
{backend: [dtype, ...]}, "declined": {backend: kind}}: "dtypes" lists the
backends whose native kernel declares the dtypes it serves (the others serve
every dtype), and "declined" says what serves the calls those kernels refuse. --no-cpu-fallback
fails if any op of NAMESPACE (e.g. bp, the standard ops) reaches the CPU
fallback on BACKEND, for every dtype or for those its native kernel declines.
"""
import json
import subprocess
import sys

KINDS = {"native", "composite", "backend_fallback", "cpu_fallback", "missing", "host"}
DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def fail(msg):
    print("check_ops_json: " + msg, file=sys.stderr)
    sys.exit(1)


def main(argv):
    if "--" not in argv:
        fail("usage: check_ops_json.py [--expect OP@BACKEND=KIND]... [--expect-dtypes OP@BACKEND=DTYPE,...]... "
             "[--no-cpu-fallback NAMESPACE@BACKEND]... -- BACKPLANE [ARGS...]")
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1:]
    expects = []
    expect_dtypes = []
    no_fallback = []
    while opts:
        if opts[0] not in ("--expect", "--expect-dtypes", "--no-cpu-fallback") or len(opts) < 2:
            fail("unknown argument " + opts[0])
        if opts[0] == "--no-cpu-fallback":
            no_fallback.append(tuple(opts[1].rsplit("@", 1)))
            opts = opts[2:]
            continue
        op_backend, value = opts[1].rsplit("=", 1)
        op, backend = op_backend.rsplit("@", 1)
        if opts[0] == "--expect":
            expects.append((op, backend, value))
        else:
            expect_dtypes.append((op, backend, value.split(",")))
        opts = opts[2:]

    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        fail("%s exited with %d: %s" % (cmd, proc.returncode, proc.stderr))
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        fail("output is not JSON (%s):\n%s" % (e, proc.stdout))

    if not isinstance(doc, dict) or set(doc) != {"backends", "ops"}:
        fail("expected an object with keys backends and ops, got: %r" % (doc,))
    backends = doc["backends"]
    if not isinstance(backends, list) or not all(isinstance(b, str) for b in backends):
        fail("backends is not a list of strings: %r" % (backends,))
    for required in ("cpu", "cuda", "hip"):
        if required not in backends:
            fail("backend %s missing from %r" % (required, backends))
    ops = doc["ops"]
    if not isinstance(ops, list):
        fail("ops is not a list")
    by_name = {}
    for op in ops:
        if set(op) != {"name", "schema", "kernels", "dtypes", "declined"}:
            fail("bad op row %r" % (op,))
        if not op["schema"].startswith(op["name"].split(".")[0]):
            fail("schema %r does not start with the op name %r" % (op["schema"], op["name"]))
        if list(op["kernels"]) != backends:
            fail("op %s: kernels %r do not cover the backends %r in order" % (op["name"], op["kernels"], backends))
        for backend, kind in op["kernels"].items():
            if kind not in KINDS:
                fail("op %s: unknown kernel kind %r on %s" % (op["name"], kind, backend))
        if not isinstance(op["dtypes"], dict) or list(op["dtypes"]) != list(op["declined"]):
            fail("op %s: dtypes %r and declined %r name different backends" % (op["name"], op["dtypes"],
                                                                              op["declined"]))
        for backend, dtypes in op["dtypes"].items():
            if op["kernels"].get(backend) != "native":
                fail("op %s: dtypes declared on %s, whose kernel is not native" % (op["name"], backend))
            if not isinstance(dtypes, list) or not dtypes or any(d not in DTYPES for d in dtypes):
                fail("op %s on %s: dtypes %r is not a non-empty list of %s" % (op["name"], backend, dtypes, DTYPES))
            if dtypes != sorted(dtypes, key=DTYPES.index) or len(set(dtypes)) != len(dtypes):
                fail("op %s on %s: dtypes %r are not unique and in ScalarType order" % (op["name"], backend, dtypes))
            if op["declined"][backend] not in KINDS:
                fail("op %s: unknown kernel kind %r for the dtypes %s declines" % (op["name"], op["declined"][backend],
                                                                                   backend))
        by_name[op["name"]] = op
    if len(by_name) != len(ops):
        fail("duplicate op rows")

    for op, backend, kind in expects:
        if op not in by_name:
            fail("op %s not in the matrix (have: %s)" % (op, ", ".join(sorted(by_name)) or "none"))
        got = by_name[op]["kernels"].get(backend)
        if got != kind:
            fail("op %s on %s: expected %s, got %s" % (op, backend, kind, got))
    for op, backend, dtypes in expect_dtypes:
        if op not in by_name:
            fail("op %s not in the matrix" % op)
        got = by_name[op]["dtypes"].get(backend)
        if got != dtypes:
            fail("op %s on %s: expected declared dtypes %s, got %s" % (op, backend, dtypes, got))
    for namespace, backend in no_fallback:
        if backend not in backends:
            fail("backend %s not in the matrix (have: %s)" % (backend, ", ".join(backends)))
        falling = [op["name"] for op in ops if op["name"].startswith(namespace + "::") and
                   "cpu_fallback" in (op["kernels"][backend], op["declined"].get(backend))]
        if falling:
            fail("%d %s:: ops reach the CPU fallback on %s: %s" % (len(falling), namespace, backend,
                                                                  ", ".join(falling)))
    print("ok: %d ops x %d backends" % (len(ops), len(backends)))


if __name__ == "__main__":
    main(sys.argv[1:])
