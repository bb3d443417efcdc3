"""The generated type stubs (python/generate_stubs.py): complete, and valid
for a type checker (mypy, where installed: scripts/setup.sh --tests does)."""
import ast
import os
import subprocess
import sys
import textwrap

import pytest

import backplane as bp
from backplane import _backplane

PACKAGE = os.path.dirname(bp.__file__)


def read(name):
    with open(os.path.join(PACKAGE, name)) as f:
        return f.read()


def test_stub_files_are_installed_with_the_package():
    for name in ["__init__.pyi", "_backplane.pyi", "py.typed"]:
        assert os.path.exists(os.path.join(PACKAGE, name)), name


def test_stubs_parse():
    ast.parse(read("__init__.pyi"))
    ast.parse(read("_backplane.pyi"))


def functions_in(tree_body):
    return {node.name for node in tree_body if isinstance(node, ast.FunctionDef)}


def test_every_operator_of_every_namespace_has_a_stub():
    tree = ast.parse(read("__init__.pyi"))
    module_functions = functions_in(tree.body)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    names = {}
    for ns, name, _ in _backplane._operator_names():
        names.setdefault(ns, set()).add(name)
    for ns, ops in names.items():
        assert f"_ops_{ns}" in classes, f"no stub class for namespace {ns}"
        declared = {n.target.id for n in classes[f"_ops_{ns}"].body if isinstance(n, ast.AnnAssign)}
        assert ops <= declared, ops - declared
        for op in ops:
            assert "__call__" in functions_in(classes[f"_op_{ns}_{op}"].body), op
    public_bp = {n for n in names["bp"] if not n.startswith("_")}
    assert public_bp <= module_functions, public_bp - module_functions


def test_every_overload_schema_is_in_the_stubs():
    text = read("__init__.pyi")
    for schema in _backplane._schemas():
        if schema.startswith("bp::_"):
            continue
        assert schema in text, schema


def test_tensor_methods_are_typed_from_their_schemas():
    tree = ast.parse(read("_backplane.pyi"))
    tensor = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    methods = functions_in(tensor.body)
    for name, value in vars(bp.Tensor).items():
        if isinstance(value, bp.OpOverloadPacket) or name in ("to", "shape", "view", "numel"):
            assert name in methods, name
    softmax = [n for n in tensor.body if isinstance(n, ast.FunctionDef) and n.name == "softmax"]
    assert [a.arg for a in softmax[0].args.args] == ["self", "dim", "dtype"]


def test_python_methods_on_tensor_have_stubs():
    # Note [Tensor conveniences]: x.float(), x.split(...) are Python functions installed on Tensor.
    import inspect
    tree = ast.parse(read("_backplane.pyi"))
    tensor = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    methods = functions_in(tensor.body)
    python_methods = {name for name, value in vars(bp.Tensor).items() if inspect.isfunction(value)}
    assert {"float", "int", "bool", "split", "chunk", "expand_as"} <= python_methods
    assert python_methods <= methods, python_methods - methods


def mypy(tmp_path, source):
    pytest.importorskip("mypy", reason="mypy is not installed (scripts/setup.sh --tests installs python3-mypy)")
    path = tmp_path / "user.py"
    path.write_text(textwrap.dedent(source))
    env = dict(os.environ, MYPYPATH=os.path.dirname(PACKAGE))
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                        str(path)], capture_output=True, text=True, env=env, cwd=tmp_path)
    return r.returncode, r.stdout + r.stderr


def test_mypy_accepts_correct_code(tmp_path):
    rc, out = mypy(tmp_path, """
        import backplane as bp
        x = bp.ones(2, 3)
        y: bp.Tensor = bp.add(x, x, alpha=2)
        z = x.softmax(-1) @ x.t()
        values, indices = bp.sort(x)
        v = bp.ops.bp.add(x, 1.5)
        d: bp.dtype = x.dtype
        n: int = x.numel()
        q = x.to("cpu", bp.float16)
        e = bp.zeros((2, 2), dtype=bp.int32, device="cpu")
        f: bp.Tensor = bp.ops.bp.sum.dim_IntList(x, [0], keepdim=True)
        g: bp.Tensor = bp.ops.bp.add.default if False else bp.ops.bp.mul.Tensor(x, x)
        try:
            bp.add(x, y, out=e)
        except bp.InvalidArgumentError as err:
            print(err.code)
    """)
    assert rc == 0, out


def test_mypy_catches_wrong_calls(tmp_path):
    rc, out = mypy(tmp_path, """
        import backplane as bp
        x = bp.ones(2, 3)
        bp.add(x, "a")
        x.softmax(dim="x")
        bp.ops.bp.nosuchop(x)
        bp.ops.bp.add.Tensor(x, 2.5)
    """)
    assert rc == 1
    assert 'No overload variant of "add" matches argument types "Tensor", "str"' in out
    assert 'No overload variant of "softmax" of "Tensor"' in out
    assert '"_ops_bp" has no attribute "nosuchop"' in out
    assert 'Argument 2 to "__call__" of "_op_bp_add_Tensor" has incompatible type "float"' in out
