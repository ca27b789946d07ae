"""Every ETag or Last-Modified the app answers with is known (issue 39): an answer whose
content depends on the principal's grants must change its validator when they change
(tests/integration/test_etags_after_grant_changes.py shows it for the table loads)."""

from __future__ import annotations

from pathlib import Path


def test_the_table_loads_are_the_only_answers_with_a_validator():
    """Every ETag or Last-Modified the app answers with is listed here, each checked in
    test_etags_after_grant_changes: a new one needs its own test that a grant change is no 304."""
    root = Path(__file__).resolve().parents[2]
    found = set()
    for folder in ("catalog", "refresh", "maintenance", "alerts", "webapp", "editor/src"):
        for path in (root / folder).rglob("*"):
            if path.suffix not in (".py", ".js", ".ts", ".mjs") or "migrations" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            markers = ('["ETag"]', "Last-Modified", "last_modified(", "@condition", "etag(")
            if any(marker in text for marker in markers):
                found.add(str(path.relative_to(root)))
    assert found == {"catalog/iceberg_rest/etags.py", "catalog/iceberg_rest/table_endpoints.py"}
