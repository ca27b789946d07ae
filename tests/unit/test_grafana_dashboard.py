"""deploy/grafana/lakeview.json, the dashboard operators import: valid JSON that Grafana
reads, each panel asking Prometheus (the dashboard's datasource variable) only for metrics
GET /metrics exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "lakeview.json"
SOURCES = [REPO_ROOT / "infra" / "metrics.py", REPO_ROOT / "refresh" / "metrics.py",
           REPO_ROOT / "infra" / "metrics_endpoint.py"]  # fmt: skip


def exported() -> set[str]:
    """The sample names the app's metric definitions give (counters' _total, histograms'
    _bucket, _count and _sum)."""
    names = set()
    for source in SOURCES:
        for name in re.findall(r'"(lakeview_[a-z_]+)"', source.read_text()):
            names |= {name, f"{name}_total", f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return names


def test_the_dashboard_reads_only_metrics_the_app_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    exprs = [target["expr"] for panel in panels for target in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"lakeview_[a-z_]+", expr)}
    assert used and used <= exported(), used - exported()
    for needed in (
        "lakeview_http_requests_total",
        "lakeview_iceberg_commit_conflicts_total",
        "lakeview_refresh_runs_total",
        "lakeview_materialized_table_lag_seconds",
        "lakeview_streaming_hosts_alive",
    ):
        assert needed in used, needed


def test_every_panel_asks_the_dashboards_prometheus_and_has_a_place_of_its_own() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    [variable] = dashboard["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    ids, places = set(), set()
    for panel in dashboard["panels"]:
        assert panel["id"] not in ids
        ids.add(panel["id"])
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        cells = {
            (grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])
        }
        assert not cells & places, panel["title"]
        places |= cells
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
