#!/usr/bin/env python3
"""Writes docs/python-coverage.md: which of PyTorch's `torch` and
`torch.Tensor` names the Python package has, and how each differs.

  generate_coverage.py [--check] [--list FILE] [--out FILE]
                                        (backplane must be importable: PYTHONPATH)

The names and their notes are python/torch_coverage.txt (its header says
the format); whether each exists is read from the built package, so the page
cannot claim what the package lacks. --check writes nothing and exits 1,
saying why, when the page differs from what it would write or the list is
wrong; python/tests/test_coverage.py runs the same checks, and with PyTorch
importable also fails on a public name the package shares with it that the
list leaves out.
"""
import argparse
import os
import sys

# This file's folder holds the package's sources, which have no extension:
# import the built package (PYTHONPATH) instead.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import backplane  # noqa: E402

ROOT = os.path.dirname(_here)
LIST = os.path.join(_here, "torch_coverage.txt")
PAGE = os.path.join(ROOT, "docs", "python-coverage.md")
NAMESPACES = {"torch": "`torch`", "Tensor": "`torch.Tensor`"}


class Entry:
    def __init__(self, namespace, name, note, line):
        self.namespace, self.name, self.note, self.line = namespace, name, note, line

    @property
    def planned(self):
        return self.note.startswith("planned")

    @property
    def key(self):
        return f"{self.namespace}.{self.name}"

    def exists(self):
        owner = backplane if self.namespace == "torch" else backplane.Tensor
        return hasattr(owner, self.name)

    def ours(self):
        return f"bp.{self.name}" if self.namespace == "torch" else f"Tensor.{self.name}"


def read_list(path=LIST):
    """The entries of the list, and the errors of its syntax."""
    entries, errors, seen = [], [], set()
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, _, note = line.partition(": ")
            namespace, dot, name = key.partition(".")
            where = f"{os.path.relpath(path, ROOT)}:{number}"
            if namespace not in NAMESPACES or not dot or not name.isidentifier():
                errors.append(f"{where}: '{line}' is not 'torch.<name>' or 'Tensor.<name>', then ': <note>'")
                continue
            if key in seen:
                errors.append(f"{where}: {key} is listed twice")
                continue
            seen.add(key)
            entries.append(Entry(namespace, name, note.strip(), where))
    return entries, errors


def check_entries(entries):
    """What the list claims that the built package contradicts."""
    errors = []
    for e in entries:
        if e.planned and e.exists():
            errors.append(f"{e.line}: {e.key} is marked planned, but {e.ours()} exists: drop 'planned' "
                          f"(keep a note if it differs from PyTorch's)")
        elif not e.planned and not e.exists():
            errors.append(f"{e.line}: {e.key} is listed as present, but the package has no {e.ours()}: "
                          f"add it, or mark it 'planned'")
    return errors


def unlisted(entries, torch):
    """Public names the package shares with `torch`/`torch.Tensor` that the list leaves out."""
    listed = {e.key for e in entries}
    missing = []
    for namespace, ours, theirs in (("torch", backplane, torch), ("Tensor", backplane.Tensor, torch.Tensor)):
        for name in sorted(dir(ours)):
            if not name.startswith("_") and hasattr(theirs, name) and f"{namespace}.{name}" not in listed:
                missing.append(f"{namespace}.{name}")
    return missing


def _cell(text):
    return text.replace("|", "\\|")


def render(entries):
    present = [e for e in entries if not e.planned]
    planned = [e for e in entries if e.planned]
    differing = [e for e in present if e.note]
    out = [
        "# Python: coverage of PyTorch's API",
        "",
        "<!-- Written by python/generate_coverage.py from python/torch_coverage.txt and the built",
        "     package; python/tests/test_coverage.py fails when it is stale. Edit the list, not this page. -->",
        "",
        "Which names of PyTorch's `torch` and `torch.Tensor` namespaces the Python",
        "package `backplane` has (as `bp.<name>` and `Tensor.<name>`), which it",
        "plans, and how the ones it has differ. The differences that hold",
        "everywhere are in [python.md](python.md#differences-from-pytorch); the",
        "operators' own in [operators.md](operators.md#differences-from-pytorch).",
        "",
        f"{len(entries)} names: {len(present)} present ({len(differing)} with a note), {len(planned)} planned.",
        "",
    ]
    for namespace, title in NAMESPACES.items():
        rows = [e for e in entries if e.namespace == namespace]
        out += [f"## {title}", "", "| PyTorch | Backplane | Notes |", "| --- | --- | --- |"]
        for e in sorted(rows, key=lambda e: (e.name.lower().lstrip("_"), e.name)):
            have = "planned" if e.planned else f"`{e.ours()}`"
            note = e.note[len("planned"):].lstrip(" ;:") if e.planned else e.note
            out.append(f"| `{namespace}.{e.name}` | {have} | {_cell(note)} |")
        out.append("")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail when the page is stale")
    parser.add_argument("--list", default=LIST)
    parser.add_argument("--out", default=PAGE)
    args = parser.parse_args()
    entries, errors = read_list(args.list)
    errors += check_entries(entries)
    if errors:
        sys.exit("generate_coverage: " + "\n  ".join(["the list is wrong:"] + errors))
    page = render(entries)
    if args.check:
        with open(args.out, encoding="utf-8") as f:
            if f.read() != page:
                sys.exit(f"generate_coverage: {args.out} is stale; run python/generate_coverage.py")
        return
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(page)


if __name__ == "__main__":
    main()
