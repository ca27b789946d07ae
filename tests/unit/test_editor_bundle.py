"""The SQL console's editor library (static/vendor/codemirror/) is committed, built from
editor/ by scripts/build_editor.sh, so that running the app and its tests needs no npm.
These tests fail when the committed bundle no longer is what its sources build: its first
lines record the SHA-256 of the sources, computed again here as editor/build.mjs does."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

from refresh.core import grant_statements as gs
from refresh.core import statements as st
from refresh.core.freshness import RefreshMode, TimeUnit

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "static" / "vendor" / "codemirror"
BUNDLE = VENDOR / "codemirror.min.js"
BUILD = ROOT / "editor" / "build.mjs"
EDITOR_JS = ROOT / "static" / "js" / "editor.js"
#: What one page load may cost the browser (the bundle is 421 KB, 139 KB gzipped, now).
BUDGET = 460_000
REBUILD = "the committed bundle is stale: run scripts/build_editor.sh and commit its output"


def header() -> str:
    with BUNDLE.open(encoding="utf-8") as bundle:
        return "".join(next(bundle) for _ in range(4))


def sources() -> list[str]:
    """The files the bundle is built from, as editor/build.mjs lists them."""
    listed = re.search(r"SOURCES = \[(.*?)\];", BUILD.read_text(), re.S)
    assert listed, "editor/build.mjs names its SOURCES"
    return re.findall(r'"([^"]+)"', listed.group(1))


def sources_hash() -> str:
    lines = "".join(
        f"{path}\n{hashlib.sha256((ROOT / path).read_bytes()).hexdigest()}\n" for path in sources()
    )
    return hashlib.sha256(lines.encode()).hexdigest()


def bundled() -> dict[str, str]:
    """{package: version} as the bundle's header names them."""
    line = re.search(r"packages: (.*)", header())
    assert line, header()
    return dict(item.rsplit("@", 1) for item in line.group(1).split())


def test_the_committed_bundle_was_built_from_the_sources_as_they_are():
    assert {"editor/package-lock.json", "editor/src/codemirror.js"} <= set(sources())
    recorded = re.search(r"sources-sha256: ([0-9a-f]{64})", header())
    assert recorded, "the bundle's header records its sources' hash"
    assert recorded.group(1) == sources_hash(), REBUILD


def test_the_bundle_holds_the_versions_the_lock_pins():
    lock = json.loads((ROOT / "editor" / "package-lock.json").read_text())["packages"]
    pinned = {
        path.removeprefix("node_modules/"): entry["version"] for path, entry in lock.items() if path
    }
    package = json.loads((ROOT / "editor" / "package.json").read_text())
    for name, version in bundled().items():
        assert pinned[name] == version, REBUILD
    # Direct dependencies are exact versions, never ranges.
    for name, version in {**package["dependencies"], **package["devDependencies"]}.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} is pinned, not {version}"
    assert bundled()["@codemirror/view"].startswith("6.")
    assert bundled()["@codemirror/lang-sql"].startswith("6.")


def test_every_bundled_package_has_its_licence_beside_the_bundle():
    licences = (VENDOR / "LICENSES.txt").read_text()
    for name, version in bundled().items():
        assert f"{name}@{version} (MIT)" in licences
    assert licences.count("Permission is hereby granted") >= len(bundled())


def test_the_gzipped_copy_is_the_bundle_and_both_stay_small():
    data = BUNDLE.read_bytes()
    assert gzip.decompress((VENDOR / "codemirror.min.js.gz").read_bytes()) == data, REBUILD
    assert len(data) < BUDGET, f"the bundle grew to {len(data)} bytes"
    assert data.count(b"\n") < 100, "the bundle is minified"  # a few template literals


def test_the_console_loads_the_editor_from_the_apps_own_static_files():
    template = (ROOT / "templates" / "refresh" / "console.html").read_text()
    scripts = re.findall(r"<script[^>]*src=\"([^\"]+)\"", template)
    assert "{% static 'vendor/codemirror/codemirror.min.js' %}" in scripts
    assert "{% static 'js/editor.js' %}" in scripts
    assert not any("//" in src for src in scripts), "no script from another host"
    assert not re.search(r"https?://", EDITOR_JS.read_text()), "no request to another host"


def test_the_editor_completes_every_clause_and_action_of_the_statements_grammar():
    """The statements' words are listed in editor.js; the grammar is in refresh.core."""
    script = EDITOR_JS.read_text()
    words = [*st._CLAUSES, "SUSPEND", "RESUME", "REFRESH", "SET FRESHNESS", "SET REFRESH_MODE"]
    words += ["RESET", "DESCRIBE JOB", "SHOW MATERIALIZED TABLES", "SHOW CREATE MATERIALIZED"]
    words += ["DROP MATERIALIZED TABLE", "CREATE OR ALTER MATERIALIZED TABLE", "IF EXISTS"]
    words += [*(mode.value for mode in RefreshMode), *(unit.value for unit in TimeUnit)]
    missing = [word for word in words if word not in script]
    assert not missing, f"static/js/editor.js does not offer {missing}"


def test_the_editor_completes_the_grant_statements_privileges_securables_and_principals():
    script = EDITOR_JS.read_text()
    words = ["GRANT", "REVOKE", "SHOW GRANTS", *gs.OURS]
    words += [phrase for phrase in gs.UNITY_PRIVILEGES if phrase != "ALL"]
    words += ["CATALOG", "SCHEMA", "NAMESPACE", "MATERIALIZED TABLE", "VIEW"]
    words += ["USER", "GROUP", "CREDENTIAL"]
    missing = [word for word in words if f'"{word}"' not in script]
    assert not missing, f"static/js/editor.js does not offer {missing}"


def test_the_editor_completes_the_row_filter_and_mask_statements():
    """Their grammar is refresh/core/policy_statements.py; the words are offered as written."""
    script = EDITOR_JS.read_text()
    words = ["SET ROW FILTER", "DROP ROW FILTER", "ALTER COLUMN", "SET MASK", "DROP MASK"]
    words += ["EXEMPT GROUPS", "POLICIES ON", "ROW FILTER", "GROUPS"]
    missing = [word for word in words if f'"{word}"' not in script]
    assert not missing, f"static/js/editor.js does not offer {missing}"
    assert "filter mask exempt groups policies" in script, "the keywords are highlighted"
