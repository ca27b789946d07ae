"""ARCHITECTURE.md's map names every module of the app's packages, so that a newcomer finds
each one on the map and a new module is not left off it. A module is named by its file name
(`purge.py`), a path ending in it (`services/tables.py`), braces (`settings/{dev,prod}.py`)
or a wildcard (`*_endpoints.py`); a management command by its name."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("webapp", "catalog", "refresh", "maintenance")


def map_block() -> str:
    text = (REPO_ROOT / "ARCHITECTURE.md").read_text()
    start = text.index("## Map of the modules")
    opening = text.index("```", start)
    return text[opening : text.index("```", opening + 3)]


def named_files(block: str) -> set[str]:
    names = set()
    for written in re.findall(r"[\w*{},./-]+\.py\b", block):
        braces = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", written)
        if braces:
            head, choices, tail = braces.groups()
            names.update(f"{head}{choice.strip()}{tail}" for choice in choices.split(","))
        else:
            names.add(written)
    return names


def modules() -> list[Path]:
    return [
        path.relative_to(REPO_ROOT)
        for package in PACKAGES
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts and path.name != "__init__.py"
    ]


def on_the_map(module: Path, names: set[str], block: str) -> bool:
    if "commands" in module.parts:
        return re.search(rf"\b{re.escape(module.stem)}\b", block) is not None
    path = module.as_posix()
    return any(
        path == name or path.endswith("/" + name) or fnmatch.fnmatch(module.name, name)
        for name in names
    )


def test_the_map_reads_names_braces_and_wildcards():
    names = named_files("settings/{dev,test}.py and *_endpoints.py, purge.py")
    assert names == {"settings/dev.py", "settings/test.py", "*_endpoints.py", "purge.py"}
    assert on_the_map(Path("catalog/iceberg_rest/view_endpoints.py"), names, "")
    assert not on_the_map(Path("catalog/iceberg_rest/urls.py"), names, "")


def test_every_module_is_on_the_map():
    block = map_block()
    names = named_files(block)
    missing = [str(m) for m in modules() if not on_the_map(m, names, block)]
    assert missing == [], "name these in ARCHITECTURE.md's map of the modules"
