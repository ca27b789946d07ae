"""The apps' directions, top first (ARCHITECTURE.md's diagram): webapp (the project shell:
settings, URLs, WSGI, Celery) -> alerts -> refresh -> maintenance -> runtime (the worker's
Spark) -> catalog -> infra (imports no app). Each imports only what is below it, even
inside functions (a function-level import is still a dependency; it only hides a circle);
what a lower app needs of a higher one it gets by registration or a signal. Inside
refresh/, modules read top-down by layers (LAYERS), and no two modules import each other.
Read from the source with `ast`, so a new module is covered without editing this test; a
refresh module outside every layer fails it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Lowest first. A module belongs to the first layer with a prefix of its name.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("pure rules", ("refresh.core",)),
    ("Spark jobs", ("refresh.spark.",)),
    ("state", ("refresh.models", "runtime.credentials", "runtime.leases", "runtime.engine",
               "refresh.stream_hosts", "refresh.signals")),
    ("reads and decisions", ("refresh.selectors", "refresh.schedules", "refresh.sources",
                             "refresh.lineage", "refresh.lineage_events", "refresh.monitoring",
                             "refresh.analysis", "refresh.metrics", "refresh.rights",
                             "refresh.checks")),
    ("state changes", ("refresh.services", "refresh.definitions", "refresh.runs",
                       "refresh.table_state", "refresh.queries")),
    ("workers' and the console's work", ("refresh.runner", "refresh.streams", "refresh.pipelines",
                                         "refresh.console", "refresh.verification")),
    ("Celery adapters", ("refresh.tasks",)),
    ("API, pages, admin", ("refresh.api", "refresh.pages", "refresh.operations",
                           "refresh.admin", "refresh.apps", "refresh.management",
                           "refresh.templatetags")),
]  # fmt: skip
#: Packages whose __init__ only re-exports (importing them is importing what they name).
PACKAGES = {
    "refresh",
    "refresh.spark",
    "refresh.core",
    "refresh.api",
    "refresh.pages",
    "refresh.templatetags",
    "refresh.streams",
    "refresh.api.serializers",
    "refresh.monitoring",
}


#: The apps and the project: one graph, in which no circle may form.
APPLICATION = ("alerts", "catalog", "infra", "maintenance", "refresh", "runtime", "webapp")


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str, root: Path = REPO_ROOT) -> dict[str, Path]:
    return {
        module_name(path, root): path
        for path in sorted((root / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def imported(path: Path) -> set[str]:
    """Every module name `path` imports, at any depth (`from a import b` gives a and a.b)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The known modules `path` imports, at any depth (`from a import b` is a.b when b is a
    module, else a)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(name if name in known else node.module for name in names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in known}


def layer_of(module: str) -> int | None:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p.rstrip(".") or module.startswith(p) for p in prefixes):
            return index
    return None


def graph() -> dict[str, set[str]]:
    found = modules("refresh")
    known = set(found)
    return {
        module: imports(path, known) - {module} - PACKAGES
        for module, path in found.items()
        if module not in PACKAGES
    }


def test_every_module_of_refresh_has_a_layer():
    assert [m for m in graph() if layer_of(m) is None] == []


def test_no_module_of_refresh_imports_one_in_a_layer_above_it():
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if layer_of(target) is not None and layer_of(target) > layer_of(module)
    ]
    assert upward == []


def circles(edges: dict[str, set[str]]) -> list[str]:
    """Every circle of the graph, once from each module on it: "a -> b -> a"."""
    found = []

    def walk(start: str, node: str, path: list[str], seen: set[str]) -> None:
        for target in sorted(edges.get(node, ())):
            if target == start:
                found.append(" -> ".join([*path, start]))
            elif target not in seen:
                seen.add(target)
                walk(start, target, [*path, target], seen)

    for module in sorted(edges):
        walk(module, module, [module], {module})
    return found


def application_graph(root: Path = REPO_ROOT, packages: tuple[str, ...] = APPLICATION) -> dict:
    """Module -> the modules of `packages` it imports, anywhere in its source. A package's
    __init__ is a module of its own (importing the package runs it)."""
    found = {name: path for package in packages for name, path in modules(package, root).items()}
    known = set(found)
    return {module: imports(path, known) - {module} for module, path in found.items()}


def test_no_two_modules_of_refresh_import_each_other_even_through_others():
    assert circles(graph()) == []


def test_no_circle_of_imports_in_the_catalog_maintenance_the_project_or_across_them():
    assert circles(application_graph()) == []


def test_a_circle_closed_by_an_import_inside_a_function_is_found(tmp_path: Path):
    package = tmp_path / "shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "orders.py").write_text("from shop import prices\n")
    (package / "prices.py").write_text("def total():\n    from shop.orders import Order\n")
    (package / "other.py").write_text("import shop.prices\n")
    assert circles(application_graph(tmp_path, ("shop",))) == [
        "shop.orders -> shop.prices -> shop.orders",
        "shop.prices -> shop.orders -> shop.prices",
    ]


def reaching_up(packages: tuple[str, ...], above: tuple[str, ...]) -> list[str]:
    """Every import, at any depth, from a module of `packages` into one of `above`."""
    return [
        f"{module} imports {name}"
        for package in packages
        for module, path in modules(package).items()
        for name in sorted(imported(path))
        if name.split(".")[0] in above
    ]


def test_the_catalog_imports_nothing_of_refresh_maintenance_alerts_or_the_runtime():
    assert reaching_up(("catalog",), ("refresh", "maintenance", "alerts", "runtime")) == []


def test_infra_imports_no_app_and_no_app_imports_the_project_shell():
    apps = ("alerts", "catalog", "maintenance", "refresh", "runtime", "webapp")
    assert reaching_up(("infra",), apps) == []
    assert (
        reaching_up(
            ("alerts", "catalog", "infra", "maintenance", "refresh", "runtime"), ("webapp",)
        )
        == []
    )


def test_refresh_may_import_maintenance_and_maintenance_imports_nothing_of_refresh():
    assert reaching_up(("maintenance",), ("refresh", "alerts", "webapp")) == []


def test_the_runtime_sits_below_refresh_and_maintenance():
    assert reaching_up(("runtime",), ("refresh", "maintenance", "alerts", "webapp")) == []


def test_refresh_and_maintenance_import_nothing_of_alerts_even_inside_functions():
    reaching_up = [
        f"{module} imports {name}"
        for package in ("refresh", "maintenance")
        for module, path in modules(package).items()
        for name in sorted(imported(path))
        if name.split(".")[0] == "alerts"
    ]
    assert reaching_up == []


def test_infra_imports_no_app_nor_the_project_even_inside_functions():
    reaching_up = [
        f"{module} imports {name}"
        for module, path in modules("infra").items()
        for name in sorted(imported(path))
        if name.split(".")[0] in APPLICATION and name.split(".")[0] != "infra"
    ]
    assert reaching_up == []
