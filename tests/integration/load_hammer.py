"""One process of test_rest_etags' "nothing stale" test, run as `python -m
tests.integration.load_hammer ROLE ...` against a live app (tests/live_server.py).

- `reader`: loads one table over and over for some seconds; before each request it reads
  the table's pointer from the app's SQLite database (read-only, no transaction held), and
  checks that the answer is at least that new: a 200's metadata-location, or for a 304 the
  location of the tag it sent. Every other request sends If-None-Match with the last tag.
- `committer`: commits a property change over and over; prints the locations it was given.

Each prints one JSON document on stdout. Django-free (stdlib and requests), so that the
processes start fast and share nothing with the app."""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from typing import Any

import requests

_SEQUENCE = re.compile(r"/(\d+)-[0-9a-fA-F-]+\.metadata\.json$")
POINTER_SQL = (
    "SELECT o.metadata_location FROM catalog_catalogobject o "
    "JOIN catalog_namespace n ON n.id = o.namespace_id WHERE n.name = ? AND o.name = ?"
)


def sequence(location: str) -> int:
    found = _SEQUENCE.search(location)
    if found is None:
        raise ValueError(f"not a metadata file of this catalog: {location}")
    return int(found.group(1))


def read_pointer(database: sqlite3.Connection, namespace: str, name: str) -> str:
    [(location,)] = database.execute(POINTER_SQL, (namespace, name)).fetchall()
    return location


def reader(args: argparse.Namespace) -> dict[str, Any]:
    # Autocommit: every SELECT sees what was committed when it ran, not an older snapshot.
    database = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True, isolation_level=None)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {args.token}"
    url = f"{args.url}/iceberg/v1/namespaces/{args.namespace}/tables/{args.table}"
    params = {"snapshots": args.snapshots} if args.snapshots else {}
    statuses: dict[str, int] = {}
    stale: list[dict[str, Any]] = []
    last_tag, last_location = None, None
    deadline = time.monotonic() + args.seconds
    count = 0
    while time.monotonic() < deadline:
        count += 1
        before = read_pointer(database, args.namespace, args.table)
        headers = {"If-None-Match": last_tag} if last_tag and count % 2 == 0 else {}
        response = session.get(url, params=params, headers=headers, timeout=30)
        statuses[str(response.status_code)] = statuses.get(str(response.status_code), 0) + 1
        if response.status_code == 200:
            answered = response.json()["metadata-location"]
            last_tag, last_location = response.headers["ETag"], answered
        elif response.status_code == 304:
            if response.content or response.headers.get("ETag") != headers.get("If-None-Match"):
                stale.append({"what": "a 304 with a body or another tag", "sent": headers})
            answered = last_location
        else:
            stale.append({"what": f"status {response.status_code}", "body": response.text[:300]})
            continue
        if sequence(answered) < sequence(before):
            stale.append(
                {"what": f"stale {response.status_code}", "answered": answered, "db": before}
            )
    return {"requests": count, "statuses": statuses, "stale": stale}


def committer(args: argparse.Namespace) -> dict[str, Any]:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {args.token}"
    url = f"{args.url}/iceberg/v1/namespaces/{args.namespace}/tables/{args.table}"
    acknowledged: list[str] = []
    statuses: dict[str, int] = {}
    deadline = time.monotonic() + args.seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        body = {"updates": [{"action": "set-properties", "updates": {"n": f"{args.name}-{n}"}}]}
        response = session.post(url, json=body, timeout=30)
        statuses[str(response.status_code)] = statuses.get(str(response.status_code), 0) + 1
        if response.status_code == 200:
            acknowledged.append(response.json()["metadata-location"])
        time.sleep(args.pause)
    return {"acknowledged": acknowledged, "statuses": statuses}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("reader", "committer"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--db", help="the app's SQLite file (reader)")
    parser.add_argument("--snapshots", default="", help="the snapshots mode (reader)")
    parser.add_argument("--name", default="c", help="this committer's name")
    parser.add_argument("--pause", type=float, default=0.01, help="between commits (s)")
    args = parser.parse_args(argv)
    result = reader(args) if args.role == "reader" else committer(args)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
