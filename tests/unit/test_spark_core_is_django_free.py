"""The Spark core must run where Django is not configured: Spark jobs, scripts, executors."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
import refresh.spark
import refresh.spark.session
leaked = sorted(
    name for name in sys.modules
    if name.split(".")[0] in {"django", "rest_framework", "catalog", "webapp"}
)
print(",".join(leaked))
"""


def test_importing_the_spark_session_factory_loads_no_django() -> None:
    # A fresh interpreter: this test process has Django loaded already by pytest-django.
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"refresh.spark imported: {result.stdout.strip()}"
