"""Devices and plugins from Python: devices(), device(spec) with the `auto`
rules (BACKPLANE_DEVICE included), unavailable() with reasons, plugins()
from the package's own plugin directory, load_plugin() and its errors; and
operators on a device with no kernels, which the CPU fallback serves with
the CPU's results (the `device` fixture, conftest.py)."""
import os
import subprocess
import sys

import pytest

import backplane

FIRST_PARTY = {"cpu", "spconv", "cuda", "hip"}


def package_plugin_dir():
    """Where the host library looks for its plugins: beside libbackplane.so,
    which is the build tree's lib/ in a build tree and the package's lib/
    once installed (Note [The Python package's layout])."""
    try:
        from backplane import _build_paths
        lib_dir = _build_paths.lib_dir
    except ImportError:
        lib_dir = os.path.join(os.path.dirname(backplane.__file__), "lib")
    return os.path.realpath(os.path.join(lib_dir, "backplane", "plugins"))


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (loading a plugin or reading
    BACKPLANE_DEVICE is per process), with `env` added; returns its stdout."""
    full = {k: v for k, v in os.environ.items() if k not in ("BACKPLANE_DEVICE", "BACKPLANE_PLUGIN_PATH")}
    full.update(env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def present_specs():
    return [str(d.device) for d in backplane.devices()]


# --------------------------------------------------------------- devices

def test_devices_lists_the_cpu_last_with_its_provider():
    devices = backplane.devices()
    assert devices, "no device at all"
    cpu = devices[-1]
    assert str(cpu.device) == "cpu" and cpu.device == backplane.device("cpu")
    assert cpu.provider == "built-in"
    assert cpu.properties.name  # the CPU names itself
    assert all(isinstance(d.device, backplane.Device) for d in devices)


def test_capabilities_say_what_a_device_can_do_before_the_stream_api_is_used():
    cpu = backplane.capabilities("cpu")
    assert cpu.host_accessible and not cpu.streams and not cpu.events
    assert repr(cpu) == "backplane.DeviceCapabilities(host_accessible)"
    for d in backplane.devices():
        assert repr(d.capabilities) == repr(backplane.capabilities(str(d.device)))
    with pytest.raises(backplane.NotFoundError):
        backplane.capabilities("cuda:7")


def test_auto_is_the_first_device_present():
    assert backplane.device("auto") == backplane.devices()[0].device
    assert backplane.device() == backplane.device("auto")  # "auto" is the default


def test_auto_follows_BACKPLANE_DEVICE(nokernels_plugin_path):
    code = "import backplane; print(backplane.device('auto'), backplane.device())"
    assert run_python(code, BACKPLANE_DEVICE="cpu") == "cpu cpu"
    # A plugin's device type comes before cpu in `auto` (after cuda and hip).
    with_plugin = run_python("import backplane; print(backplane.devices()[0].device, backplane.device('auto'))",
                             BACKPLANE_PLUGIN_PATH=nokernels_plugin_path)
    first, auto = with_plugin.split()
    assert auto == first and first in ("cuda:0", "hip:0", "nokernels:0"), with_plugin
    assert run_python(code, BACKPLANE_PLUGIN_PATH=nokernels_plugin_path, BACKPLANE_DEVICE="cpu") == "cpu cpu"
    assert run_python(code, BACKPLANE_PLUGIN_PATH=nokernels_plugin_path,
                      BACKPLANE_DEVICE="nokernels:0") == "nokernels:0 nokernels:0"
    assert run_python(code, BACKPLANE_DEVICE="auto") == run_python(code)


def test_BACKPLANE_DEVICE_naming_an_absent_device_raises_naming_the_variable():
    out = run_python(
        "import backplane\n"
        "try:\n"
        "    backplane.device('auto')\n"
        "except backplane.NotFoundError as e:\n"
        "    print(e)\n"
        "print(backplane.device('cpu'))\n",
        BACKPLANE_DEVICE="cpu:7")
    message, cpu = out.splitlines()
    assert message.startswith("BACKPLANE_DEVICE 'cpu:7' does not exist"), message
    assert "devices present: cpu" in message
    assert cpu == "cpu"  # an explicit spec does not read the variable


def test_an_absent_device_raises_NotFoundError_naming_what_is_present():
    if any(s.startswith("cuda:") for s in present_specs()):
        pytest.skip("a CUDA device is present")
    with pytest.raises(backplane.NotFoundError) as e:
        backplane.device("cuda:0")
    message = str(e.value)
    assert "'cuda:0' is not available" in message
    reason = next(u.reason for u in backplane.unavailable() if u.name == "cuda")
    assert reason in message  # why there is no CUDA device
    listed = message.split("devices present: ")[1]
    assert all(s in listed for s in present_specs()), message


def test_a_device_index_past_the_count_raises_NotFoundError():
    with pytest.raises(backplane.NotFoundError, match=r"'cpu:1' does not exist: cpu has 1 device"):
        backplane.device("cpu:1")


def test_an_unknown_device_type_raises_InvalidArgumentError_naming_the_known_ones():
    with pytest.raises(backplane.InvalidArgumentError) as e:
        backplane.device("nosuch:0")
    message = str(e.value)
    assert "unknown device type 'nosuch'" in message
    assert "known types: " in message and "cpu" in message.split("known types: ")[1]
    assert isinstance(e.value, backplane.Error)


def test_unavailable_lists_cuda_and_hip_with_their_reasons():
    unavailable = {u.name: u for u in backplane.unavailable()}
    present_types = {s.split(":")[0] for s in present_specs()}
    for name in ("cuda", "hip"):
        # Each is either present or listed with why not, never both.
        assert (name in present_types) != (name in unavailable), (name, present_types, unavailable)
        if name in unavailable:
            u = unavailable[name]
            assert u.reason, f"{name} is unavailable with no reason"
            loaded = {p.name for p in backplane.plugins() if p.loaded}
            if name in loaded:
                assert u.provider == name  # the plugin said why (no driver, no GPU)
            else:
                assert u.reason.startswith(f"no plugin provides {name}"), u.reason
    assert "cpu" not in unavailable


# --------------------------------------------------------------- plugins

def test_plugins_are_the_first_party_ones_from_the_package_plugin_dir():
    plugins = [p for p in backplane.plugins() if p.name in FIRST_PARTY]
    names = {p.name for p in plugins}
    assert {"cpu", "spconv"} <= names, names
    directory = package_plugin_dir()
    for p in plugins:
        assert p.loaded, f"{p.name} did not load: {p.error}"
        assert p.error == ""
        assert os.path.dirname(os.path.realpath(p.path)) == directory, (p.path, directory)
        assert p.kernels > 0 and p.version
        assert 0 <= p.typed_kernels <= p.kernels
        assert isinstance(p.abi, tuple) and len(p.abi) == 2
    cpu = next(p for p in plugins if p.name == "cpu")
    # Built with the SDK for this ABI: its kernels of the signatures the
    # host calls typed give typed entries.
    assert cpu.typed_kernels > 0, (cpu.kernels, cpu.typed_kernels)
    assert repr(cpu).startswith("backplane.PluginInfo(name='cpu', version='" + cpu.version + "', loaded=True")


def test_load_plugin_on_a_missing_file_raises_naming_the_path():
    with pytest.raises(backplane.NotFoundError, match=r"cannot load plugin '/nonexistent/p\.so': No such file"):
        backplane.load_plugin("/nonexistent/p.so")


def test_load_plugin_on_a_file_that_is_no_library_says_what_is_expected(tmp_path):
    path = tmp_path / "not_a_plugin.so"
    path.write_text("not an ELF file")
    with pytest.raises(backplane.Error) as e:
        backplane.load_plugin(str(path))
    message = str(e.value)
    assert isinstance(e.value, backplane.InvalidArgumentError)
    assert f"cannot load plugin '{path}'" in message
    assert "a shared library built with backplane_add_plugin() is expected" in message


def test_load_plugin_on_a_library_that_is_no_plugin_names_the_missing_entry_point():
    extension = backplane._backplane.__file__  # a shared library, not a plugin
    before = present_specs()
    with pytest.raises(backplane.InvalidArgumentError,
                       match=r"is not a Backplane plugin: it does not export backplane_plugin_query"):
        backplane.load_plugin(extension)
    assert present_specs() == before  # the process goes on as it was
    assert (backplane.ones(2) + 1).tolist() == [2.0, 2.0]


# ----------------------------------------- the kernel-less device (CPU fallback)

@pytest.fixture(scope="session")
def nokernels_plugin_path():
    path = os.environ.get("BACKPLANE_PY_TEST_PLUGIN")
    if not path:
        pytest.skip("BACKPLANE_PY_TEST_PLUGIN is not set (conftest.py says what it names)")
    return path


def test_the_nokernels_plugin_has_one_device_and_no_kernels(nokernels_plugin):
    assert nokernels_plugin.loaded and nokernels_plugin.name == "nokernels"
    assert nokernels_plugin.kernels == 0
    assert [(t.name, t.device_count) for t in nokernels_plugin.device_types] == [("nokernels", 1)]
    assert "nokernels:0" in present_specs()
    assert nokernels_plugin.path in [p.path for p in backplane.plugins()]


def how_ops_ran(fn):
    """Runs fn() under the profiler; returns its result and the set of
    (op, how) pairs of the calls that ran."""
    with backplane.profile() as p:
        result = fn()
    return result, {(r.op, r.how) for r in p.rows()}


def check_ran_on(device, hows):
    kinds = {how for _, how in hows}
    if str(device) == "cpu":
        assert "cpu_fallback" not in kinds, hows
    else:
        # No kernel of the device's own ran: every leaf op fell back to the CPU.
        assert "native" not in kinds and "cpu_fallback" in kinds, hows


def test_elementwise_ops_and_python_numbers(device):
    x = backplane.tensor([[1.0, -2.0], [3.0, 4.0]], device=device)
    y = backplane.tensor([10.0, 20.0], device=device)
    r, hows = how_ops_ran(lambda: (x + y * 2 - 1) / 2)
    assert r.device == device and r.dtype == backplane.float32
    assert r.tolist() == [[10.0, 18.5], [11.0, 21.5]]
    check_ran_on(device, hows)
    assert x.relu().tolist() == [[1.0, 0.0], [3.0, 4.0]]
    assert (x > 0).tolist() == [[True, False], [True, True]]
    assert backplane.where(x > 0, x, y).tolist() == [[1.0, 20.0], [3.0, 4.0]]


def test_matmul_softmax_and_reductions(device):
    x = backplane.arange(6, dtype=backplane.float32, device=device).reshape(2, 3)
    assert x.device == device
    m, hows = how_ops_ran(lambda: x @ x.t())
    assert m.device == device and m.tolist() == [[5.0, 14.0], [14.0, 50.0]]
    check_ran_on(device, hows)
    s = x.softmax(-1)
    on_cpu = x.cpu().softmax(-1)
    assert s.device == device and s.tolist() == on_cpu.tolist()  # the same CPU kernel, bit for bit
    assert x.sum(1).tolist() == [3.0, 12.0]
    assert x.mean().item() == 2.5
    assert x.cumsum(1).tolist() == [[0.0, 1.0, 3.0], [3.0, 7.0, 12.0]]


def test_views_in_place_and_out_write_back_to_the_device(device):
    x = backplane.arange(6, dtype=backplane.float32, device=device).reshape(2, 3)
    t = x.t()  # a strided view: staged as it is
    assert (t * 1).tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    r = x.add_(1)
    assert r is x and x.device == device and x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    x[0].mul_(10)  # in place through a view: the base sees it
    assert x.tolist() == [[10.0, 20.0, 30.0], [4.0, 5.0, 6.0]]
    out = backplane.empty([2, 3], device=device)
    r = backplane.add(x, 1, out=out)
    assert r is out and out.device == device and out.tolist() == [[11.0, 21.0, 31.0], [5.0, 6.0, 7.0]]


def test_list_arguments_and_tuple_returns(device):
    a = backplane.tensor([3, 1, 2], device=device)
    b = backplane.tensor([9, 7], device=device)
    c = backplane.cat([a, b])
    assert c.device == device and c.dtype == backplane.int64 and c.tolist() == [3, 1, 2, 9, 7]
    values, indices = backplane.sort(c)
    assert values.device == device and indices.device == device
    assert values.tolist() == [1, 2, 3, 7, 9] and indices.tolist() == [1, 2, 0, 4, 3]
    assert backplane.index_select(c, 0, indices).tolist() == [1, 2, 3, 7, 9]
    assert backplane.stack([a, a]).tolist() == [[3, 1, 2], [3, 1, 2]]


def test_an_op_error_is_the_same_exception_on_every_device(device):
    x = backplane.ones(2, 2, device=device)
    with pytest.raises(backplane.InvalidArgumentError,
                       match=r"bp::mm: self is \[2, 2\] and mat2 is \[3, 3\]; self.size\(1\) must equal"):
        backplane.mm(x, backplane.ones(3, 3, device=device))


def test_tensors_move_between_the_device_and_the_cpu(device):
    x = backplane.tensor([1.5, 2.5], device="cpu")
    d = x.to(device)
    assert d.device == device and d.tolist() == [1.5, 2.5]
    back = (d * 2).cpu()
    assert back.device == backplane.device("cpu") and back.tolist() == [3.0, 5.0]
    assert d.to(backplane.int32).tolist() == [1, 2]
