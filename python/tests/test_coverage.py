"""docs/python-coverage.md, the page of which PyTorch names the package has
(python/generate_coverage.py, from python/torch_coverage.txt): in step with
the package, and complete against PyTorch's own namespaces."""
import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("generate_coverage", os.path.join(HERE, "..", "generate_coverage.py"))
coverage = importlib.util.module_from_spec(spec)
spec.loader.exec_module(coverage)


def test_the_list_parses_and_matches_the_package():
    entries, errors = coverage.read_list()
    assert not errors, "\n".join(errors)
    errors = coverage.check_entries(entries)
    assert not errors, "\n".join(errors)


def test_the_page_is_what_the_generator_writes():
    entries, _ = coverage.read_list()
    with open(coverage.PAGE, encoding="utf-8") as f:
        page = f.read()
    assert page == coverage.render(entries), \
        "docs/python-coverage.md is stale: run `python python/generate_coverage.py` with the built package importable"


def test_every_name_shared_with_pytorch_is_listed():
    torch = pytest.importorskip("torch")
    entries, _ = coverage.read_list()
    missing = coverage.unlisted(entries, torch)
    assert not missing, ("public names the package shares with PyTorch that python/torch_coverage.txt does not "
                         "list (add them, with a note where they differ): " + ", ".join(missing))


def test_every_listed_name_is_pytorchs():
    torch = pytest.importorskip("torch")
    entries, _ = coverage.read_list()
    foreign = [e.key for e in entries if not hasattr(torch if e.namespace == "torch" else torch.Tensor, e.name)]
    assert not foreign, "listed names PyTorch does not have: " + ", ".join(foreign)


def test_the_checks_catch_a_wrong_list(tmp_path):
    lst = tmp_path / "list.txt"
    lst.write_text("torch.add\ntorch.add\nTensor.no_such_method\ntorch.zeros: planned\nnumpy.ones\n")
    entries, errors = coverage.read_list(str(lst))
    assert any("listed twice" in e for e in errors)
    assert any("'numpy.ones' is not" in e for e in errors)
    checked = coverage.check_entries(entries)
    assert any("Tensor.no_such_method is listed as present" in e for e in checked)
    assert any("torch.zeros is marked planned, but bp.zeros exists" in e for e in checked)
