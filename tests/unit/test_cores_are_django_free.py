import subprocess
import sys

CORE_MODULES = [
    "catalog.core.errors",
    "catalog.core.metadata_io",
    "catalog.core.sql",
    "catalog.core.types",
    "catalog.core.views",
]


def test_the_metadata_and_sql_cores_import_no_django():
    code = (
        "import sys\n"
        + "".join(f"import {module}\n" for module in CORE_MODULES)
        + "leaked = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        + "print(','.join(leaked))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "", f"Django imported by the cores: {result.stdout}"
