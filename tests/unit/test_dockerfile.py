"""The image holds everything the app runs: every package it imports, its templates and
static files, manage.py and pyproject.toml. Docker is not run here, so the test computes
what the image holds from the Dockerfile's COPY instructions and .dockerignore, and what the
app needs from its own code (imports, and the dotted paths settings and URLconfs name as
text), its settings (INSTALLED_APPS, template and static folders) and compose's commands."""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import shlex
import tomllib
from functools import cache
from pathlib import Path, PurePosixPath

from django.conf import settings

from tests.deployment import dockerfile_instructions, load_compose

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Python the app runs besides its packages.
ENTRY_POINTS = ("manage.py",)
#: Files the image's own build reads (`pip install -e .`).
BUILD_FILES = ("pyproject.toml",)
#: A dotted path as settings, URLconfs and Celery name code: "maintenance.page_urls".
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


# -- the Dockerfile and .dockerignore, read as Docker reads them ----------------------------


def copies() -> list[tuple[list[str], PurePosixPath, bool]]:
    """Each COPY from the build context: its sources, its absolute destination, and whether
    that is a folder the sources go into (`./`, `dir/`)."""
    workdir = PurePosixPath("/")
    found = []
    for keyword, rest in dockerfile_instructions():
        if keyword == "WORKDIR":
            workdir = workdir / rest
        elif keyword in ("COPY", "ADD"):
            words = [w for w in shlex.split(rest) if not w.startswith("--")]
            assert "--from" not in rest, "a COPY from another stage: teach this test to read it"
            *sources, dest = words
            into = dest.endswith("/") or dest in (".", "..")
            found.append((sources, workdir / dest, into))
    return found


def _pattern(glob: str) -> re.Pattern:
    """A .dockerignore pattern (Go's filepath.Match, plus `**`) as a regular expression."""
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        elif glob[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif glob[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(glob[i]), i + 1
    # A pattern that names a folder leaves out everything in it.
    return re.compile(out + "(?:/.*)?")


@cache
def ignore_rules() -> tuple[tuple[bool, re.Pattern], ...]:
    rules = []
    for line in (REPO_ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        glob = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        rules.append((negated, _pattern(glob)))
    return tuple(rules)


def ignored(path: str) -> bool:
    """Whether a context path (relative, with /) is left out: the last rule that matches it
    decides, as in Docker."""
    verdict = False
    for negated, pattern in ignore_rules():
        if pattern.fullmatch(path):
            verdict = not negated
    return verdict


@cache
def context_files() -> tuple[str, ...]:
    """The build context Docker sends: every file under the repository not ignored."""
    pruning = not any(negated for negated, _ in ignore_rules())
    found = []
    for folder, dirs, files in os.walk(REPO_ROOT):
        here = Path(folder).relative_to(REPO_ROOT).as_posix()
        prefix = "" if here == "." else f"{here}/"
        if pruning:
            dirs[:] = [d for d in dirs if not ignored(prefix + d)]
        found += [prefix + f for f in files if not ignored(prefix + f)]
    return tuple(sorted(found))


@cache
def image_files() -> frozenset[str]:
    """Absolute paths of the files the Dockerfile copies from the context."""
    held = set()
    files = context_files()
    for sources, dest, into_folder in copies():
        for source in sources:
            source = os.path.normpath(source)
            if source == ".":
                held.update(str(dest / f) for f in files)
            elif source in files:
                held.add(str(dest / PurePosixPath(source).name if into_folder else dest))
            else:
                under = [f for f in files if f.startswith(f"{source}/")]
                held.update(str(dest / f[len(source) + 1 :]) for f in under)
    return frozenset(held)


def workdir() -> PurePosixPath:
    [last] = [rest for keyword, rest in dockerfile_instructions() if keyword == "WORKDIR"][-1:]
    return PurePosixPath(last)


# -- what the app needs --------------------------------------------------------------------


def top_level_code() -> dict[str, Path]:
    """The repository's top-level Python packages and modules, by import name."""
    found = {}
    for entry in REPO_ROOT.iterdir():
        if entry.is_dir() and (entry / "__init__.py").exists():
            found[entry.name] = entry
        elif entry.suffix == ".py":
            found[entry.stem] = entry
    return found


def own_apps() -> list[str]:
    code = top_level_code()
    return [app for app in settings.INSTALLED_APPS if app.split(".")[0] in code]


def names_used(path: Path) -> set[str]:
    """Top-level names a Python file imports or names as a dotted path in a string."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and DOTTED.match(node.value)
        ):
            found.add(node.value.split(".")[0])
    return found


def python_files(root: Path) -> list[Path]:
    return [root] if root.is_file() else sorted(root.rglob("*.py"))


@cache
def packages_the_app_runs() -> frozenset[str]:
    """The top-level packages and modules reached from the entry points, the settings'
    apps and ROOT_URLCONF, through imports and dotted paths, until nothing new is found."""
    code = top_level_code()
    start = {
        *(Path(e).stem for e in ENTRY_POINTS),
        *(app.split(".")[0] for app in own_apps()),
        settings.ROOT_URLCONF.split(".")[0],
        settings.WSGI_APPLICATION.split(".")[0],
    }
    reached, frontier = set(), start & set(code)
    while frontier:
        name = frontier.pop()
        reached.add(name)
        for path in python_files(code[name]):
            frontier |= (names_used(path) & set(code)) - reached
    return frozenset(reached)


def data_folders() -> list[str]:
    """Folders the settings read templates and static files from, relative to the repo."""
    folders = [*settings.STATICFILES_DIRS]
    for engine in settings.TEMPLATES:
        folders += engine.get("DIRS", [])
    return [Path(folder).relative_to(REPO_ROOT).as_posix() for folder in folders]


def files_commands_name() -> set[str]:
    """Repository files compose's app services name in their commands (gunicorn's -c)."""
    services = load_compose()["services"]
    named = set()
    for service in services.values():
        command = service.get("command") or []
        words = shlex.split(command) if isinstance(command, str) else command
        named.update(w for w in words if (REPO_ROOT / w).is_file())
    return named


def missing_from_image(paths: list[str]) -> list[str]:
    """The repository files under `paths` that the image lacks at WORKDIR/<path>."""
    held = image_files()
    root = workdir()
    missing = []
    for path in paths:
        target = REPO_ROOT / path
        assert target.exists(), f"{path} is needed but is not in the repository"
        files = [target] if target.is_file() else [p for p in target.rglob("*") if p.is_file()]
        for file in files:
            relative = file.relative_to(REPO_ROOT).as_posix()
            if "__pycache__" in relative or relative.endswith(".pyc"):
                continue
            if str(root / relative) not in held:
                missing.append(relative)
    return missing


# -- the tests -----------------------------------------------------------------------------


def test_the_app_runs_more_than_one_package_of_its_own() -> None:
    # The checks below are only as good as this walk: it must find the apps and what they
    # name as text (maintenance is reached only through settings and URLconfs).
    assert {"webapp", "catalog", "refresh", "maintenance"} <= packages_the_app_runs()


def test_every_package_the_app_imports_is_in_the_image() -> None:
    code = top_level_code()
    paths = [code[name].relative_to(REPO_ROOT).as_posix() for name in packages_the_app_runs()]
    missing = missing_from_image(sorted(paths))
    assert not missing, f"The Dockerfile's COPYs and .dockerignore leave out {missing[:20]}"


def test_every_installed_app_of_ours_is_in_the_image() -> None:
    apps = [app.replace(".", "/") for app in own_apps()]
    assert apps, "no app of our own in INSTALLED_APPS?"
    missing = missing_from_image(apps)
    assert not missing, f"Installed apps missing from the image: {missing[:20]}"


def test_templates_static_files_and_the_entry_points_are_in_the_image() -> None:
    needed = [*data_folders(), *ENTRY_POINTS, *BUILD_FILES, *sorted(files_commands_name())]
    assert "templates" in needed and "static" in needed
    assert "webapp/gunicorn.conf.py" in needed
    missing = missing_from_image(needed)
    assert not missing, f"Missing from the image: {missing[:20]}"


def test_the_virtualenv_the_data_and_the_tests_stay_out_of_the_image() -> None:
    for path in (".venv/bin/python", "var/db.sqlite3", ".git/HEAD", "tests/conftest.py"):
        assert ignored(path), f"{path} would be sent to Docker and copied"
    assert ignored("catalog/__pycache__/models.cpython-311.pyc")
    assert not ignored("catalog/models.py")


def test_the_package_install_covers_every_package_the_app_runs() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted(name for name in packages_the_app_runs() if top_level_code()[name].is_dir())
    uncovered = [name for name in packages if not any(fnmatch.fnmatch(name, p) for p in include)]
    assert not uncovered, f"pyproject's packages.find include lacks {uncovered}"


def test_code_changes_reuse_the_dependency_and_jar_layers() -> None:
    steps = dockerfile_instructions()
    code = top_level_code()

    def copies_code(keyword: str, rest: str) -> bool:
        sources = [w for w in shlex.split(rest) if not w.startswith("--")][:-1]
        return keyword == "COPY" and any(
            os.path.normpath(s) == "." or os.path.normpath(s) in code for s in sources
        )

    first_code_copy = next(i for i, step in enumerate(steps) if copies_code(*step))
    for build in ("pip install -r", "build_jars.sh", "build_sandbox_jar.sh"):
        [at] = [i for i, (kw, rest) in enumerate(steps) if kw == "RUN" and build in rest]
        assert at < first_code_copy, f"`{build}` runs after the code is copied"
