"""scripts/module_index.py writes docs/modules.md from the modules' docstrings, and its
`--check` (run by `make lint`) fails when the index is stale or a module has no docstring."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location(
        "module_index", REPO_ROOT / "scripts" / "module_index.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


index = load_script()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "catalog" / "core").mkdir(parents=True)
    (tmp_path / "catalog" / "__init__.py").write_text('"""The catalog."""\n')
    (tmp_path / "catalog" / "kernel.py").write_text('"""The one commit path. More here."""\n')
    (tmp_path / "catalog" / "core" / "__init__.py").write_text('"""Django-free cores."""\n')
    (tmp_path / "catalog" / "core" / "purge.py").write_text('"""Deletes a table\'s files."""\n')
    (tmp_path / "catalog" / "migrations").mkdir()
    (tmp_path / "catalog" / "migrations" / "0001_initial.py").write_text("x = 1\n")
    return tmp_path


def test_the_gist_is_the_first_sentence_and_a_long_one_is_cut_at_its_first_clause():
    assert index.gist("The one commit path. Then more.") == "The one commit path"
    assert index.gist("Reads refresh.runs rows, e.g. a run.\n\nDetails.") == (
        "Reads refresh.runs rows, e.g. a run"
    )
    long = "A refresh run's lifecycle, as NetBox's Job rows have one: " + "claimed, " * 20
    assert index.gist(long) == "A refresh run's lifecycle, as NetBox's Job rows have one"
    assert len(index.gist("word " * 60)) <= index.LONG + 2


def test_the_index_lists_each_module_under_its_package_and_skips_migrations(tree: Path):
    text, missing = index.render(tree)
    assert missing == []
    assert "## catalog/\n\nThe catalog.\n\n- `kernel.py`: The one commit path\n" in text
    assert "## catalog/core/\n\nDjango-free cores.\n\n- `purge.py`: Deletes a table's files" in text
    assert "0001_initial" not in text


def test_the_check_fails_naming_a_stale_line_and_passes_once_regenerated(tree: Path, capsys):
    assert index.main(["--check"], root=tree) == 1
    assert index.main([], root=tree) == 0
    assert index.main(["--check"], root=tree) == 0
    (tree / "catalog" / "kernel.py").write_text('"""The commit path of every change."""\n')
    capsys.readouterr()
    assert index.main(["--check"], root=tree) == 1
    out = capsys.readouterr().out
    assert "docs/modules.md is stale" in out
    assert "no longer true: catalog/ - `kernel.py`: The one commit path" in out
    assert "missing: catalog/ - `kernel.py`: The commit path of every change" in out


def test_a_module_without_a_docstring_fails_naming_it(tree: Path, capsys):
    (tree / "catalog" / "jobs.py").write_text("import os\n")
    index.main([], root=tree)
    assert index.main(["--check"], root=tree) == 1
    assert "catalog/jobs.py: no module docstring" in capsys.readouterr().out


def test_the_packages_it_walks_are_the_apps():
    assert {"webapp", "alerts", "refresh", "maintenance", "catalog"} <= set(index.PACKAGES)
    assert {"runtime", "infra"} <= set(index.PACKAGES)
