"""load_plugin() on files that are no plugin, or on a plugin that ends the
process (Note [Plugin file checks] and Note [Plugin load breadcrumb] in
dispatcher/runtime/src/). Each case runs in a fresh interpreter under a
timeout: a FIFO once blocked open() forever, a truncated copy of a plugin
killed the interpreter with SIGBUS, and a plugin whose init called exit(0)
ended it with status 0, as if all had gone well."""
import os
import subprocess
import sys

import pytest

import backplane

TIMEOUT = 60
# Loads sys.argv[1]; prints the error's class and message, or "loaded".
LOAD = """
import sys, backplane
try:
    backplane.load_plugin(sys.argv[1])
    print("loaded")
except backplane.Error as e:
    print(type(e).__name__ + ": " + str(e))
"""


def load_in_child(path):
    env = {k: v for k, v in os.environ.items() if k != "BACKPLANE_PLUGIN_PATH"}
    return subprocess.run([sys.executable, "-c", LOAD, path], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT)


def runtime_test_plugin(name):
    """A test plugin of dispatcher/runtime/tests/plugins/ (ctest's
    python_tests names their folder in BACKPLANE_RUNTIME_TEST_PLUGIN_DIR)."""
    directory = os.environ.get("BACKPLANE_RUNTIME_TEST_PLUGIN_DIR")
    if not directory:
        pytest.skip("BACKPLANE_RUNTIME_TEST_PLUGIN_DIR is not set (ctest's python_tests sets it: "
                    "<build>/test_plugins)")
    path = os.path.join(directory, f"{name}.so")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not built (cmake --build <build> --target {name})")
    return path


def test_a_truncated_plugin_raises(tmp_path):
    plugin = os.environ.get("BACKPLANE_PY_TEST_PLUGIN")  # any plugin will do: conftest.py says which this is
    if not plugin:
        pytest.skip("BACKPLANE_PY_TEST_PLUGIN is not set (conftest.py says what it names)")
    with open(plugin, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[:min(len(data) // 2, 20000)])
    r = load_in_child(str(cut))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("InvalidArgumentError: cannot load plugin '"), r.stdout
    assert "': truncated ELF file (" in r.stdout


def test_a_fifo_raises_instead_of_blocking(tmp_path):
    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)
    r = load_in_child(str(fifo))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (f"InvalidArgumentError: cannot load plugin '{os.path.realpath(fifo)}': "
                                "it is a FIFO, not a regular file")


def test_a_plugin_that_exits_while_loading_does_not_end_python_with_success():
    path = os.path.realpath(runtime_test_plugin("tp_init_exit"))
    r = load_in_child(path)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert (f"backplane: error: plugin 'tp_init_exit' ({path}) ended the process (exit) while loading; "
            "exit status 3") in r.stderr


def test_a_path_with_a_nul_character_raises_value_error(tmp_path):
    # "a\0b" would have loaded "a": name a real file there.
    (tmp_path / "a").write_bytes(b"")
    with pytest.raises(ValueError, match="contains a NUL character") as info:
        backplane.load_plugin(str(tmp_path / "a") + "\0b")
    assert not isinstance(info.value, backplane.Error)
