"""The apps say a thing once: no six lines of code stand the same in two places. A run that
repeats becomes one function, one constant or one value object that both places use.

Counted: the code of every module of the apps but migrations (generated), their lines as
written (indentation kept, as `duplicates` reads them), leaving out blank lines, comments,
docstrings, import statements and the parameter lists of signatures (two services taking
the same keywords is an interface, and the value objects that would fold them cost their
callers more than they save). A window of six lines that are almost all punctuation
(under 60 characters in all) is too thin to say anything twice."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
APPS = ("alerts", "catalog", "infra", "maintenance", "refresh", "runtime", "webapp")
RUN = 6
THIN = 60


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the code that counts, in order."""
    tree = ast.parse(text)
    left_out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            left_out.update(range(node.lineno, node.end_lineno + 1))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            left_out.update(range(node.lineno, node.body[0].lineno))
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                left_out.update(range(first.lineno, first.end_lineno + 1))
    kept = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if number in left_out or not stripped or stripped.startswith("#"):
            continue
        kept.append((number, line.rstrip()))
    return kept


def repeated_runs(files: dict[str, str]) -> list[tuple[tuple[str, int], tuple[str, int]]]:
    """Each pair of places (file, first line) where the same RUN lines of code stand."""
    places: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for name, text in files.items():
        lines = code_lines(text)
        for start in range(len(lines) - RUN + 1):
            window = tuple(line for _, line in lines[start : start + RUN])
            if sum(len(line.strip()) for line in window) >= THIN:
                places[window].append((name, lines[start][0]))
    return [(found[0], found[1]) for found in places.values() if len(found) > 1]


def app_modules() -> dict[str, str]:
    return {
        str(path.relative_to(REPO_ROOT)): path.read_text()
        for app in APPS
        for path in sorted((REPO_ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
    }


def test_no_six_lines_of_app_code_stand_the_same_in_two_places():
    assert repeated_runs(app_modules()) == []


def test_the_finder_sees_a_run_repeated_in_another_module_but_not_imports_or_signatures():
    body = (
        "    rows = Table.objects.filter(namespace=namespace)\n"
        "    rows = rows.exclude(state='DROPPED')\n"
        "    if name:\n"
        "        rows = rows.filter(name__startswith=name)\n"
        "    total = rows.count()\n"
        "    return rows.order_by('name')[:limit], total\n"
    )
    keywords = ("*", "namespace: str", "name: str", "mode: str", "actor: Any", "limit: int")
    signature = "(\n" + "".join(f"    {k},\n" for k in keywords) + "):\n"
    imports = "from a import (\n    one,\n    two,\n    three,\n    four,\n    five,\n    six,\n)\n"
    first = f'{imports}\n\ndef listed{signature}    """Listed."""\n{body}'
    second = f"{imports}\n\ndef shown{signature}    x = 1\n{body}"
    assert repeated_runs({"a.py": first, "b.py": second}) == [(("a.py", 20), ("b.py", 20))]
    other = f"{imports}\n\ndef shown{signature}    return None\n"
    assert repeated_runs({"a.py": first, "b.py": other}) == []
