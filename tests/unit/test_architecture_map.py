"""ARCHITECTURE.md is a map a newcomer reads in one sitting: at most 16,000 bytes, with the
sections it promises (what the product is, the apps and their directions, the layers inside
an app, four flows, the guarantees, the processes, what is written by hand, a glossary).
Its diagram names every top-level package of the app, and every package and module it or
docs/design.md names exists. The module list itself is docs/modules.md, generated from the
docstrings (scripts/module_index.py, checked by `make lint`)."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MAP = REPO_ROOT / "ARCHITECTURE.md"
DESIGN = REPO_ROOT / "docs" / "design.md"
LIMIT = 16_000

#: The diagram's packages, top first: each may import those below it.
DIAGRAM = ("webapp", "alerts", "refresh", "maintenance", "runtime", "catalog", "infra")
#: Paths the map names before they are made (a layout being built); each must not exist:
#: once it does, the test below fails until it is taken out of this set.
NOT_YET_MADE: set[str] = set()
#: Top-level packages that are not the app's: the tests and the benchmarks.
NOT_THE_APP = {"tests", "bench"}

SECTIONS = (
    "## What Lakeview is",
    "## The apps, and which way they import",
    "## Inside an app",
    "## Four flows",
    "### A commit",
    "### A table load",
    "### A refresh run",
    "### A console query",
    "## Guarantees",
    "## The processes",
    "## Written by hand, and why",
    "## Glossary",
)
PACKAGE_PATH = re.compile(rf"\b((?:{'|'.join(DIAGRAM)})/[\w/]*\.(?:py|java))\b")


def the_map() -> str:
    return MAP.read_text()


def diagram_packages(text: str) -> list[str]:
    """The packages the diagram names, top first: its lines that start with `name/`."""
    start = text.index("## The apps, and which way they import")
    opening = text.index("```", start)
    block = text[opening + 3 : text.index("```", opening + 3)]
    return re.findall(r"^\s*(\w+)/\s", block, re.MULTILINE)


def test_the_map_is_at_most_16000_bytes():
    size = len(the_map().encode())
    assert size <= LIMIT, f"ARCHITECTURE.md is {size} bytes; move detail to docs/design.md"


def test_the_map_has_every_section_it_promises_in_order():
    text = the_map()
    missing = [section for section in SECTIONS if f"\n{section}\n" not in text]
    assert missing == []
    positions = [text.index(f"\n{section}\n") for section in SECTIONS]
    assert positions == sorted(positions)


def test_the_diagram_names_the_packages_top_first():
    assert diagram_packages(the_map()) == list(DIAGRAM)


def test_every_top_level_package_of_the_app_is_on_the_diagram():
    packages = {path.parent.name for path in REPO_ROOT.glob("*/__init__.py")} - NOT_THE_APP
    assert packages - set(DIAGRAM) == set(), "add these to ARCHITECTURE.md's diagram"


def test_every_package_on_the_diagram_exists_or_is_named_as_not_made_yet():
    absent = {name for name in DIAGRAM if not (REPO_ROOT / name / "__init__.py").is_file()}
    assert absent <= NOT_YET_MADE, "the diagram names packages that do not exist"


def test_what_is_named_as_not_made_yet_is_indeed_not_there():
    made = {name for name in NOT_YET_MADE if (REPO_ROOT / name).exists()}
    assert made == set(), "these exist now: take them out of NOT_YET_MADE"


def test_every_module_the_map_and_the_design_page_name_exists():
    for page in (MAP, DESIGN):
        named = set(PACKAGE_PATH.findall(page.read_text()))
        assert named, f"{page.name} names no module: is the pattern still right?"
        missing = {path for path in named if not (REPO_ROOT / path).exists()} - NOT_YET_MADE
        assert missing == set(), f"{page.name} names modules that are not there"


def test_the_finder_reads_a_diagram_and_module_paths():
    text = "## The apps, and which way they import\n\n```\n  webapp/   shell\n     |\n"
    text += "  catalog/  (catalog/core/sql.py)\n```\n"
    assert diagram_packages(text) == ["webapp", "catalog"]
    assert PACKAGE_PATH.findall("see `refresh/spark/jvm/PlanFacts.java` and infra/x.py.") == [
        "refresh/spark/jvm/PlanFacts.java",
        "infra/x.py",
    ]
