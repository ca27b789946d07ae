"""What the table and view pages show of a preview (`catalog.previews.Result`): the columns,
the rows as text (from their JSON-safe values: ISO times, exact decimals, nested values as
JSON), and this preview's share of the metadata cache's figures."""

from __future__ import annotations

import json
from typing import Any


def cell(value: Any) -> str | None:
    """A JSON-safe value as the text of a cell; None stays None (shown as null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def cache_figures(before: Any, after: Any) -> dict[str, Any] | None:
    """The metadata cache's hits and misses during one preview (the difference of two
    `CacheStats`), and what it holds after it."""
    if before is None or after is None:
        return None
    return {
        "hits": max(0, after.hits - before.hits),
        "misses": max(0, after.misses - before.misses),
        "entries": after.entries,
        "bytes": after.bytes,
        "max_bytes": after.max_bytes,
    }


def shown_preview(result: Any, arguments: dict[str, Any], before: Any = None) -> dict[str, Any]:
    """The template context of a preview's results."""
    return {
        "result": result,
        "arguments": arguments,
        "columns": list(result.columns),
        "rows": [[cell(value) for value in row] for row in result.json_rows],
        "truncated": result.truncated,
        "cache": cache_figures(before, result.cache),
    }


def shown_body(body: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """The template context of a preview a worker's Spark read (a job's answer, the API's
    body): as `shown_preview`, without this process's cache figures."""
    return {
        "result": body,
        "arguments": arguments,
        "columns": [(column["name"], column["type"]) for column in body["columns"]],
        "rows": [[cell(value) for value in row] for row in body["rows"]],
        "truncated": body.get("truncated"),
        "cache": None,
    }


def job_preview(job: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The preview section's context for a Spark job: its answer once it succeeded, its
    error once it failed, else the job block that fills it in (static/js/jobs.js)."""
    from catalog.pages.jobs import job_context

    if job.state == "SUCCEEDED" and job.result is not None:
        return shown_body(job.result, arguments)
    if job.state in ("FAILED", "CANCELLED"):
        return {"error": (job.error or {}).get("message", "The preview failed"), "job": None}
    return {"job": job_context(job)}
