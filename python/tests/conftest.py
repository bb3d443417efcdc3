"""Fixtures shared by the Python tests.

`device`: a test that takes it runs twice, on the CPU and on "nokernels:0",
a device type with no kernels at all (python/tests/plugin/nokernels_plugin.cc,
host memory), where every operator runs through the CPU fallback: the
arguments staged to the host, the CPU kernel, the results back on the
device. The fixture's value is the backplane.Device; `str(device)` is its
spec ("cpu", "nokernels:0").

`nokernels_plugin`: the session's one load_plugin() of that plugin, from the
path in BACKPLANE_PY_TEST_PLUGIN (ctest's python_tests sets it; by hand:
BACKPLANE_PY_TEST_PLUGIN=<build>/python/test_plugins/nokernels_test_plugin.so).
Without it the tests on nokernels are skipped, saying so.

Loading a plugin changes the process: its device type comes before cpu in
devices() and in device("auto"). So every test on nokernels runs after all
the others (pytest_collection_modifyitems below): the tests that do not ask
for it see the process as the package's own plugins made it.
"""
import os

import pytest

import backplane

PLUGIN_ENV = "BACKPLANE_PY_TEST_PLUGIN"
DEVICES = ["cpu", "nokernels:0"]


@pytest.fixture(scope="session")
def test_plugin():
    """test_plugin(name): the path of a test plugin of the conformance suite
    (conformance/testing/: faulty_test_plugin, declared_dtypes_test_plugin),
    from BACKPLANE_TEST_PLUGIN_DIR or where the build tree puts them; the
    test is skipped, saying how to build it, when it is not there."""
    def find(name):
        directory = os.environ.get("BACKPLANE_TEST_PLUGIN_DIR")
        if not directory:
            try:
                from backplane import _build_paths
            except ImportError:
                pytest.skip("no build tree: the conformance test plugins are built with the tests")
            directory = os.path.join(os.path.dirname(os.path.dirname(_build_paths.tool)), "conformance",
                                     "test_plugins")
        path = os.path.join(directory, f"{name}.so")
        if not os.path.exists(path):
            pytest.skip(f"{path} is not built (cmake --build <build> --target {name})")
        return path
    return find


@pytest.fixture(scope="session")
def gpusim_plugin():
    """The path of the gpusim test plugin (BACKPLANE_GPUSIM_PLUGIN_PATH, or
    where the build tree puts it), for tests that load it in a process of
    their own (loading a plugin changes the process's `auto` device); the
    test is skipped, saying how to build it, when it is not there."""
    plugin = os.environ.get("BACKPLANE_GPUSIM_PLUGIN_PATH")
    if not plugin:
        try:
            from backplane import _build_paths
        except ImportError:
            pytest.skip("not a build tree")
        plugin = os.path.join(_build_paths.lib_dir, "backplane", "test_plugins", "backplane_gpusim.so")
    if not os.path.exists(plugin):
        pytest.skip("the gpusim test plugin is not built (cmake --build build --target backplane_gpusim)")
    return plugin


@pytest.fixture(scope="session")
def nokernels_plugin():
    """The PluginInfo of the kernel-less test plugin, loaded once."""
    path = os.environ.get(PLUGIN_ENV)
    if not path:
        pytest.skip(f"{PLUGIN_ENV} is not set; it names the kernel-less test plugin "
                    f"(ctest's python_tests sets it; by hand: "
                    f"{PLUGIN_ENV}=<build>/python/test_plugins/nokernels_test_plugin.so)")
    if not os.path.exists(path):
        pytest.fail(f"{PLUGIN_ENV}={path} does not exist: build it "
                    "(cmake --build <build> --target nokernels_test_plugin)")
    return backplane.load_plugin(path)


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param != "cpu":
        request.getfixturevalue("nokernels_plugin")
    return backplane.device(request.param)


def _loads_nokernels(item):
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("device", "cpu") != "cpu":
        return True
    return "nokernels_plugin" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(session, config, items):
    # The tests on nokernels last, each group in its collected order.
    items[:] = [i for i in items if not _loads_nokernels(i)] + [i for i in items if _loads_nokernels(i)]
