#!/usr/bin/env python3
"""Tests of scripts/check_layers.py on small trees it writes: a clean tree
passes; an angle include that runs up the layers, a quoted one, a `..`
include and a source in an unknown folder each fail, naming the file."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")

HEADERS = {
    "plugin_sdk/include/backplane/plugin.hpp": "",
    "core/include/backplane/core/error.h": "",
    "dispatcher/dispatch/include/backplane/dispatch/dispatcher.h": '#include "backplane/core/error.h"\n',
    "dispatcher/runtime/include/backplane/runtime/runtime.h": "#include <backplane/dispatch/dispatcher.h>\n",
    "plugins/cpu/kernels.h": "",
    "plugins/cpu/cpu_plugin.cc": '#include <backplane/plugin.hpp>\n#include "kernels.h"\n',
    "plugins/cpu/tests/cpu_plugin_test.cc": '#include "backplane/runtime/runtime.h"\n',
}


def run(extra):
    with tempfile.TemporaryDirectory() as root:
        for path, text in {**HEADERS, **extra}.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        r = subprocess.run([sys.executable, CHECK, "--root", root], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


def main():
    failures = []

    def expect(name, extra, code, *parts):
        rc, out = run(extra)
        if rc != code or any(p not in out for p in parts):
            failures.append(f"{name}: expected exit {code} and {parts}, got exit {rc}:\n{out}")
        else:
            print(f"ok: {name}")

    expect("a clean tree passes", {}, 0, "every include and target link points down the layers")
    expect("an angle include up the layers fails", {"core/src/tensor.cc": "#include <backplane/runtime/runtime.h>\n"},
           1, "core/src/tensor.cc: includes <backplane/runtime/runtime.h> of layer 'runtime', above 'core'")
    expect("a quoted include up the layers fails",
           {"dispatcher/dispatch/src/x.cc": '#include "backplane/runtime/runtime.h"\n'}, 1,
           "dispatcher/dispatch/src/x.cc: includes \"backplane/runtime/runtime.h\" of layer 'runtime', above 'dispatch'")
    expect("a plugin including the host fails", {"plugins/gpu/a.cu": "#include <backplane/core/error.h>\n"}, 1,
           "plugins/gpu/a.cu: includes <backplane/core/error.h> of layer 'core', above a plugin")
    expect("a '..' include fails", {"plugins/spconv/gpu/b.cu": '#include "../../cpu/kernels.h"\n'}, 1,
           "plugins/spconv/gpu/b.cu: includes \"../../cpu/kernels.h\" through '..'")
    expect("a fuzz target is checked too", {"dispatcher/fuzz/f.cc": '#include "../runtime/src/x.h"\n'}, 1,
           "dispatcher/fuzz/f.cc: includes \"../runtime/src/x.h\" through '..'")
    expect("a source in an unknown folder fails", {"elsewhere/x.cc": ""}, 1, "elsewhere/x.cc: in no folder")
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
