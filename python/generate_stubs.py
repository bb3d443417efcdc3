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

# The package exports a dtype named `bool`, which would shadow the builtin
# in annotations: the stubs say builtins.bool.
NUMBER = "int | float | builtins.bool"
SCALAR_TYPES = {
    "Tensor": "Tensor",
    "int": "int",
    "float": "float",
    "bool": "builtins.bool",
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
    "__mod__", "__rmod__", "__imod__", "__pow__", "__rpow__", "__ipow__", "__matmul__", "__rmatmul__",
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


def varargs_signature(sig, method):
    """zeros(2, 3), x.flip(0, 1): the extra form of an overload whose only
    positional parameter besides self is int[] (op_call.cc accepts it), or None."""
    args = sig["arguments"]
    positional = [a for a in args if not a["kwarg_only"] and not (method and a["name"] == "self")]
    if len(positional) != 1 or positional[0]["type"]["base"] != "int" or not positional[0]["type"]["is_list"]:
        return None
    params = ["self"] if method else []
    params += [f"{a['name']}: Tensor" for a in args if not method and a["name"] == "self" and not a["kwarg_only"]]
    params.append(f"*{python_name(positional[0]['name'])}: int")
    for a in args:
        if a["kwarg_only"]:
            text = f"{python_name(a['name'])}: {annotation(a['type'])}"
            params.append(text + " = ..." if a["has_default"] else text)
    return ", ".join(params)


def overloads_of(packet, name, method, indent, static=False):
    sigs = _backplane._signatures(packet)
    if method:
        # A method is called on a tensor: overloads whose `self` is a number
        # (where.ScalarSelf) are functions only.
        sigs = [sig for sig in sigs if any(a["name"] == "self" and a["type"]["base"] == "Tensor"
                                           for a in sig["arguments"])]
    forms = []
    for sig in sigs:
        forms.append((signature(sig, method), sig))
        extra = varargs_signature(sig, method)
        if extra is not None:
            forms.append((extra, sig))
    lines = []
    for params, sig in forms:
        if len(forms) > 1:
            lines.append(f"{indent}@overload")
        if static:
            lines.append(f"{indent}@staticmethod")
        lines.append(f"{indent}def {name}({params}) -> {return_annotation(sig['returns'])}:")
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
                     "device: Device | str | None = None, non_blocking: builtins.bool = False, copy: builtins.bool = False) "
                     "-> Tensor:")
        lines.append(f'        """{inspect.getdoc(to).splitlines()[0]}"""')
    # Note [Tensor conveniences] (python/backplane/_ops.py): each Python
    # function installed on Tensor, typed here.
    for name, signature_text in CONVENIENCES.items():
        function = vars(tensor).get(name)
        if function is not None and inspect.isfunction(function):
            lines.append(f"    def {name}{signature_text}:")
            lines.append(f'        """{inspect.getdoc(function).splitlines()[0]}"""')
    lines.append("    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any: ...")
    lines.append("    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any: ...")
    return lines


# The Python functions on Tensor, by name: their parameters and return.
CONVENIENCES = {
    **{name: "(self) -> Tensor" for name in
       ("float", "double", "half", "bfloat16", "long", "int", "short", "char", "byte", "bool")},
    "expand_as": "(self, other: Tensor) -> Tensor",
    "view_as": "(self, other: Tensor) -> Tensor",
    "type_as": "(self, other: Tensor) -> Tensor",
    "cuda": "(self, device: builtins.int | str | Device | None = None, non_blocking: builtins.bool = False) -> Tensor",
    "split": "(self, split_size_or_sections: builtins.int | Sequence[builtins.int], dim: builtins.int = 0) "
             "-> tuple[Tensor, ...]",
    "chunk": "(self, chunks: builtins.int, dim: builtins.int = 0) -> tuple[Tensor, ...]",
    "unique": "(self, sorted: builtins.bool = True, return_inverse: builtins.bool = False, "
              "return_counts: builtins.bool = False, dim: builtins.int | None = None) -> Any",
    "allclose": "(self, other: Tensor, rtol: builtins.float = 1e-05, atol: builtins.float = 1e-08, "
                "equal_nan: builtins.bool = False) -> builtins.bool",
}


def error_classes():
    lines = []
    for name in sorted(dir(_backplane)):
        cls = getattr(_backplane, name)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            bases = ", ".join(b.__name__ for b in cls.__bases__)
            lines.append(f"class {name}({bases}):")
            if name == "Error":
                lines.append('    """' + cls.__doc__ + '"""')
                lines.append("    code: str")
            else:
                lines.append("    ...")
            lines.append("")
    return "\n".join(lines) + "\n"


def packet_class():
    return """class OpOverloadPacket:
    \"\"\"An operator of the table with its overloads; `.<overload>` picks one.\"\"\"
    schemas: list[str]
    takes_self: builtins.bool
    __name__: str
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __getattr__(self, overload: str) -> OpOverloadPacket: ...

"""


def extension_stub(out_dir):
    """nanobind's stub of _backplane, with the table's methods typed."""
    from nanobind.stubgen import StubGen

    gen = StubGen(_backplane, include_docstrings=False, include_private=True, quiet=True)
    gen.put(_backplane)
    text = gen.get()
    # nanobind imports what the extension holds but did not define (the
    # exception classes, named backplane.*, and the Python functions
    # installed on Tensor) from where they were defined: a cycle for a type
    # checker. The classes are written out here; the functions typed below.
    text = re.sub(r"^from backplane(\._ops)? import \((.|\n)*?\)$", "", text, flags=re.M)
    text = re.sub(r"^\s*from backplane(\._ops)? import [^\n(]*$", "", text, flags=re.M)
    text = text.replace("def dtype(self) -> object:", "def dtype(self) -> _DType:")
    text = re.sub(r"(->|:|\[|\|) bool\b", r"\1 builtins.bool", text)
    header, rest = text.split("\nclass ", 1)
    header = header.replace("import backplane\n", "")
    text = header.rstrip("\n") + "\nimport builtins\nfrom typing import Any\n\n" + error_classes() + packet_class() + "\nclass " + rest
    text = re.sub(r"def _packet\((.*)\) -> object:", r"def _packet(\1) -> OpOverloadPacket:", text)
    # nanobind lists the packets installed on Tensor as attributes; type them
    # as methods from their schemas instead.
    text = re.sub(r"\n    \w+: (backplane\.)?OpOverloadPacket = \.\.\.\n", "\n", text)
    text = re.sub(r"\n    (__\w+__|to|" + "|".join(CONVENIENCES) + r"): [\w.]+ = [^\n]*\n", "\n", text)
    marker = "\nclass Tensor:"
    start = text.index(marker)
    # The class body ends at the first unindented line after its header.
    following = re.search(r"\n(?=[^\s])", text[start + len(marker):])
    end = len(text) if following is None else start + len(marker) + following.start()
    body = text[start:end].rstrip("\n") + "\n\n" + "\n".join(tensor_methods()) + "\n\n"
    # Tensor has methods named int, float and bool (x.int()): in its body
    # those names are the methods, so its signatures name the builtins.
    body = "\n".join(re.sub(r"(?<![\w.])(int|float)(?![\w(])", r"builtins.\1", line) if line.lstrip().startswith("def ")
                     else line for line in body.split("\n"))
    text = text[:start] + body + text[end:]
    if "from collections.abc import" not in text or "Sequence" not in text.split("\nclass ", 1)[0]:
        text = "from collections.abc import Sequence\n" + text
    if "overload" not in text.split("\nclass ", 1)[0]:
        text = "from typing import overload\n" + text
    text += "\n_DType = dtype\n"
    with open(os.path.join(out_dir, "_backplane.pyi"), "w") as f:
        f.write(text)


def op_classes(ns, op):
    """`ops.<ns>.<op>` as a class: its overloads as __call__, each overload
    (`.Tensor`, `.default`) as an attribute of its own class."""
    packet = _backplane._packet(ns, op)
    lines = []
    attributes = []
    for sig in _backplane._signatures(packet):
        overload = sig["overload"] or "default"
        cls = f"_op_{ns}_{op}_{overload}"
        attributes.append(f"    {overload}: {cls}")
        lines.append(f"class {cls}(OpOverloadPacket):")
        lines.extend(call_lines(packet, [sig]))
        lines.append("")
    lines.append(f"class _op_{ns}_{op}(OpOverloadPacket):")
    lines.extend(call_lines(packet, _backplane._signatures(packet)))
    lines.extend(attributes)
    lines.append("")
    return lines


def call_lines(packet, sigs):
    lines = []
    forms = []
    for sig in sigs:
        forms.append(signature(sig, False))
        extra = varargs_signature(sig, False)
        if extra is not None:
            forms.append(extra)
    for params, sig in zip(forms, [s for s in sigs for _ in range(1 + (varargs_signature(s, False) is not None))]):
        if len(forms) > 1:
            lines.append("    @overload")
        # `__op`: the packet itself, positional-only, so a schema argument may be called self.
        joined = "__op, " + params if params else "__op"
        lines.append(f"    def __call__({joined}) -> {return_annotation(sig['returns'])}:")
        lines.append(f'        """{sig["schema"]}"""')
    return lines


def package_stub(out_dir):
    lines = [
        '"""Type stubs of the package backplane (python/generate_stubs.py writes them)."""',
        "import builtins",
        "from collections.abc import Sequence",
        "from typing import overload",
        "from ._backplane import OpOverloadPacket",
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
        names = sorted({n for s, n, _ in _backplane._operator_names() if s == ns})
        for op in names:
            lines.extend(op_classes(ns, op))
        lines.append(f"class _ops_{ns}:")
        for op in names:
            lines.append(f"    {op}: _op_{ns}_{op}")
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
