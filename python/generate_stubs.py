#!/usr/bin/env python3
"""Writes the type stubs of the package `backplane` from the built package
itself, so editors and type checkers complete every operator and argument.

  generate_stubs.py OUT_DIR      (backplane must be importable: PYTHONPATH)

Writes OUT_DIR/_backplane.pyi (the extension: nanobind's stub generator,
with Tensor's operator methods typed from their schemas), OUT_DIR/__init__.pyi
(every bp:: operator as overloaded functions, the package's other names, and
`ops.<namespace>.<op>` for each namespace in the table when the stubs were
made, the plugins loaded by default included) and OUT_DIR/py.typed. The
build runs it after the extension and the plugins are built (python/
CMakeLists.txt); python/tests/test_stubs.py checks the result.
"""
import inspect
import keyword
import os
import re
import sys

# This file's folder holds the package's sources, which have no extension:
# import the built package (PYTHONPATH) instead.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import backplane  # noqa: E402
from backplane import _backplane  # noqa: E402

NUMBER = "int | float | bool"
SCALAR_TYPES = {
    "Tensor": "Tensor",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "Scalar": NUMBER,
    "ScalarType": "_DType",  # Tensor's own `dtype` property would shadow the class
    "Device": "Device | str",
    "Layout": "str",
    "MemoryFormat": "str",
}
BINARY_DUNDERS = [
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__",
    "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__", "__rfloordiv__", "__ifloordiv__",
    "__mod__", "__rmod__", "__imod__", "__pow__", "__rpow__", "__ipow__", "__matmul__",
    "__and__", "__rand__", "__iand__", "__or__", "__ror__", "__ior__", "__xor__", "__rxor__", "__ixor__",
]
COMPARISON_DUNDERS = ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"]
UNARY_DUNDERS = ["__neg__", "__abs__", "__invert__"]


def annotation(t):
    base = SCALAR_TYPES[t["base"]]
    if t["is_list"]:
        element = f"{base} | None" if t["element_optional"] else base
        text = f"Sequence[{element}]"
        if t["list_size"] is not None and t["base"] != "Tensor":
            text = f"{base} | {text}"  # int[2] takes one int for both
    else:
        text = base
    if t["is_optional"]:
        text = f"{text} | None"
    return text


def return_annotation(returns):
    if not returns:
        return "None"
    types = []
    for r in returns:
        t = r["type"]
        if t["base"] == "Tensor" and t["is_list"]:
            types.append("list[Tensor]")
        elif t["is_list"]:
            types.append(f"list[{SCALAR_TYPES[t['base']]}]")
        else:
            types.append(annotation(t))
    if len(types) == 1:
        return types[0]
    return "tuple[" + ", ".join(types) + "]"


def python_name(name):
    return name + "_" if keyword.iskeyword(name) else name


def signature(sig, method):
    """The stub parameter list of one overload: as a function, or as a
    Tensor method (self first, untyped, as Python methods write it)."""
    args = sig["arguments"]
    self_index = next((i for i, a in enumerate(args) if a["name"] == "self"), None)
    params = ["self"] if method else []
    positional = [a for i, a in enumerate(args) if not a["kwarg_only"] and not (method and i == self_index)]
    keyword_only = [a for a in args if a["kwarg_only"]]

    def param(a):
        text = f"{python_name(a['name'])}: {annotation(a['type'])}"
        return text + " = ..." if a["has_default"] else text

    # Parameters without defaults cannot follow ones with defaults in a
    # Python signature; a schema may (out= after alpha=1): those go after '*'.
    seen_default = False
    for a in positional:
        if a["has_default"]:
            seen_default = True
        elif seen_default:
            keyword_only.insert(0, a)
            continue
        params.append(param(a))
    if keyword_only:
        params.append("*")
        params.extend(param(a) for a in keyword_only)
    return ", ".join(params)


def overloads_of(packet, name, method, indent, static=False):
    sigs = _backplane._signatures(packet)
    lines = []
    for sig in sigs:
        if len(sigs) > 1:
            lines.append(f"{indent}@overload")
        if static:
            lines.append(f"{indent}@staticmethod")
        lines.append(f"{indent}def {name}({signature(sig, method)}) -> {return_annotation(sig['returns'])}:")
        lines.append(f'{indent}    """{sig["schema"]}"""')
    return lines


def tensor_methods():
    """Stub lines for the methods installed on Tensor from the table."""
    lines = []
    tensor = _backplane.Tensor
    for name in sorted(vars(tensor)):
        value = vars(tensor)[name]
        if isinstance(value, _backplane.OpOverloadPacket) and not name.startswith("__"):
            lines.extend(overloads_of(value, name, True, "    "))
    for name in BINARY_DUNDERS:
        lines.append(f"    def {name}(self, other: Tensor | {NUMBER}) -> Tensor: ...")
    for name in COMPARISON_DUNDERS:
        lines.append(f"    def {name}(self, other: object) -> Tensor: ...  # type: ignore[override]")
    for name in UNARY_DUNDERS:
        lines.append(f"    def {name}(self) -> Tensor: ...")
    to = vars(tensor).get("to")
    if to is not None and inspect.isfunction(to):
        lines.append("    def to(self, *args: Device | str | _DType | Tensor, dtype: _DType | None = None, "
                     "device: Device | str | None = None, non_blocking: bool = False, copy: bool = False) -> Tensor:")
        lines.append(f'        """{inspect.getdoc(to).splitlines()[0]}"""')
    return lines


def extension_stub(out_dir):
    """nanobind's stub of _backplane, with the table's methods typed."""
    from nanobind.stubgen import StubGen

    gen = StubGen(_backplane, include_docstrings=True, include_private=True, quiet=True)
    gen.put(_backplane)
    text = gen.get()
    # nanobind lists the packets installed on Tensor as attributes; type them
    # as methods from their schemas instead.
    text = re.sub(r"\n    \w+: (backplane\.)?OpOverloadPacket = \.\.\.\n", "\n", text)
    text = re.sub(r"\n    (__\w+__|to): [\w.]+ = [^\n]*\n", "\n", text)
    marker = "\nclass Tensor:"
    start = text.index(marker)
    end = text.find("\nclass ", start + len(marker))
    end = len(text) if end < 0 else end
    body = text[start:end].rstrip("\n") + "\n\n" + "\n".join(tensor_methods()) + "\n\n"
    text = text[:start] + body + text[end:]
    if "from collections.abc import" not in text or "Sequence" not in text.split("\nclass ", 1)[0]:
        text = "from collections.abc import Sequence\n" + text
    if "overload" not in text.split("\nclass ", 1)[0]:
        text = "from typing import overload\n" + text
    text += "\n_DType = dtype\n"
    with open(os.path.join(out_dir, "_backplane.pyi"), "w") as f:
        f.write(text)


def package_stub(out_dir):
    lines = [
        '"""Type stubs of the package backplane (python/generate_stubs.py writes them)."""',
        "from collections.abc import Sequence",
        "from typing import overload",
        "",
    ]
    functions = []
    for name in sorted(dir(backplane)):
        if name.startswith("_") or name == "ops":
            continue
        value = getattr(backplane, name)
        if isinstance(value, _backplane.OpOverloadPacket):
            functions.extend(overloads_of(value, name, False, ""))
        elif inspect.ismodule(value):
            lines.append(f"from . import {name} as {name}")
        elif getattr(_backplane, name, None) is value:
            lines.append(f"from ._backplane import {name} as {name}")
        elif name == "bool":
            lines.append("from ._backplane import bool as bool")
        else:
            module = getattr(value, "__module__", "") or ""
            if module.startswith("backplane.") and module != "backplane._backplane":
                lines.append(f"from .{module.split('.', 1)[1]} import {name} as {name}")
            else:
                lines.append(f"{name}: object")
    lines.append("from ._backplane import Tensor as Tensor, Device as Device, dtype as dtype")
    lines.append("from ._backplane import dtype as _DType")
    lines.append("")
    lines.extend(functions)
    lines.append("")
    namespaces = backplane.ops.namespaces()
    for ns in namespaces:
        lines.append(f"class _ops_{ns}:")
        names = sorted({n for s, n, _ in _backplane._operator_names() if s == ns})
        for op in names:
            lines.extend(overloads_of(_backplane._packet(ns, op), op, False, "    ", static=True))
        lines.append("")
    lines.append("class _Ops:")
    for ns in namespaces:
        lines.append(f"    {ns}: _ops_{ns}")
    lines.append("    @staticmethod")
    lines.append("    def namespaces() -> list[str]: ...")
    lines.append("")
    lines.append("ops: _Ops")
    with open(os.path.join(out_dir, "__init__.pyi"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    extension_stub(out_dir)
    package_stub(out_dir)
    with open(os.path.join(out_dir, "py.typed"), "w"):
        pass


if __name__ == "__main__":
    main()
