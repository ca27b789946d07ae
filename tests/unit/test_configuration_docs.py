"""docs/configuration.md names every environment variable the app, its scripts and
docker-compose.yml read, and nothing they no longer read. The variables are found in the
source, so a new one fails this test until it is documented."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Python reads: the settings' env()/env_list() helpers and os.environ in every form.
PYTHON_READ = re.compile(
    r"""(?:\benv(?:_list)?|os\.environ\.get|os\.environ\.setdefault|os\.getenv)\(\s*"([A-Z][A-Z0-9_]*)"
       |os\.environ\[\s*"([A-Z][A-Z0-9_]*)"\s*\]""",
    re.VERBOSE,
)
#: Shell reads that fall back on a default or insist: ${NAME:-...}, ${NAME-...}, ${NAME:?...}.
SHELL_READ = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?::?[-?])")
#: Compose interpolates ${NAME}, ${NAME:-default} and ${NAME:?message} from the host.
COMPOSE_READ = re.compile(r"\$\{([A-Z][A-Z0-9_]*)")
DOCUMENTED = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \|", re.MULTILINE)

PYTHON_SOURCES = ("webapp", "catalog", "refresh", "maintenance", "alerts", "scripts")


def python_files() -> list[Path]:
    files = [REPO_ROOT / "manage.py"]
    for folder in PYTHON_SOURCES:
        files += [p for p in (REPO_ROOT / folder).rglob("*.py") if "migrations" not in p.parts]
    return files


def read_by_the_code() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}

    def note(name: str, where: Path) -> None:
        found.setdefault(name, set()).add(str(where.relative_to(REPO_ROOT)))

    for path in python_files():
        for match in PYTHON_READ.finditer(path.read_text()):
            note(match.group(1) or match.group(2), path)
    for path in [*(REPO_ROOT / "scripts").glob("*.sh"), REPO_ROOT / "Makefile"]:
        for match in SHELL_READ.finditer(path.read_text()):
            note(match.group(1), path)
    compose = REPO_ROOT / "docker-compose.yml"
    for match in COMPOSE_READ.finditer(compose.read_text()):
        note(match.group(1), compose)
    return found


def documented() -> set[str]:
    return set(DOCUMENTED.findall((REPO_ROOT / "docs" / "configuration.md").read_text()))


def test_the_finder_sees_the_variables_it_must():
    read = read_by_the_code()
    # One of each kind of read, so that a broken pattern cannot pass the tests below.
    assert "webapp/settings/base.py" in read["DATABASE_URL"]
    assert "webapp/gunicorn.conf.py" in read["WEB_BIND"]
    assert "scripts/run.sh" in read["PORT"]
    assert "docker-compose.yml" in read["POSTGRES_PASSWORD"]
    assert "webapp/settings/prod.py" in read["SECURE_COOKIES"]


def test_every_variable_the_code_reads_is_documented():
    known = documented()
    missing = {
        name: sorted(where) for name, where in read_by_the_code().items() if name not in known
    }
    assert missing == {}, "add these to docs/configuration.md"


def test_every_documented_variable_is_still_read():
    stale = documented() - set(read_by_the_code())
    assert stale == set(), "docs/configuration.md names variables nothing reads"
