"""The cores that know Iceberg metadata, SQL and Spark must run where Django is not
configured: engines' protocol code, Spark jobs, scripts. Every module found under them is
imported in a fresh interpreter, so a new core module is covered without editing this test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CORE_PACKAGES = [
    "catalog/core",
    "refresh/core",
    "refresh/spark",
    "runtime/spark",
    "maintenance/core",
    "maintenance/spark",
    "alerts/core",
]


def core_modules() -> list[str]:
    modules = []
    for package in CORE_PACKAGES:
        for path in sorted((REPO_ROOT / package).glob("**/*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules.append(".".join(parts))
    return modules


def test_the_cores_are_found() -> None:
    found = core_modules()
    assert "catalog.core.view_metadata" in found
    assert "catalog.core.tables" in found
    assert "runtime.spark.session" in found


def test_the_metadata_sql_and_spark_cores_import_no_django() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {module}\n" for module in core_modules())
        + "leaked = sorted(m for m in sys.modules"
        + " if m.split('.')[0] in {'django', 'rest_framework', 'webapp', 'infra'}"
        + " or m in {'catalog.models', 'catalog.services'})\n"
        + "print(','.join(leaked))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"Django imported by the cores: {result.stdout}"
