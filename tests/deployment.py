"""The deployment's files read as Docker and compose read them, for tests that cannot run
containers: the Dockerfile's instructions and the environment its ENV gives every
container, and docker-compose.yml with its `${VARIABLE...}` references resolved against the
variables a user exports before `docker compose up`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO_ROOT / "Dockerfile"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not current and not stripped):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    parsed = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        parsed.append((keyword.upper(), rest.strip()))
    return parsed


def image_environment() -> dict[str, str]:
    """The variables the Dockerfile's ENV instructions set (the `KEY=value` form)."""
    found: dict[str, str] = {}
    for keyword, rest in dockerfile_instructions():
        if keyword == "ENV":
            for word in shlex.split(rest):
                key, equals, value = word.partition("=")
                assert equals, f"ENV {rest!r}: only the KEY=value form is read here"
                found[key] = value
    return found


# -- compose -------------------------------------------------------------------------------

#: $$, $NAME, ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error},
#: ${NAME:+other}, ${NAME+other}: compose's interpolation (defaults are not nested here).
_REFERENCE = re.compile(
    r"\$(?:(?P<escaped>\$)|(?P<bare>[A-Za-z_]\w*)|"
    r"\{(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\})"
)


class MissingVariable(Exception):
    """A `${NAME:?error}` whose variable is not set: compose refuses to start."""


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    def replace(match: re.Match) -> str:
        if match["escaped"]:
            return "$"
        name = match["bare"] or match["name"]
        value = variables.get(name)
        op, arg = match["op"], match["arg"] or ""
        unset_or_empty = value is None or (value == "" and op and op.startswith(":"))
        if op in (":-", "-"):
            return arg if unset_or_empty else value
        if op in (":?", "?"):
            if unset_or_empty:
                raise MissingVariable(f"{name}: {arg}")
            return value
        if op in (":+", "+"):
            return "" if unset_or_empty else arg
        return value or ""

    return _REFERENCE.sub(replace, text)


def compose_variables() -> dict[str, str | None]:
    """Every variable docker-compose.yml reads from the user's environment, with its
    default (None: required, `${NAME:?...}`; "" when it has none)."""
    found: dict[str, str | None] = {}
    for match in _REFERENCE.finditer(COMPOSE_FILE.read_text()):
        name = match["bare"] or match["name"]
        if name:
            op = match["op"] or ""
            found[name] = None if "?" in op else (match["arg"] or "") if "-" in op else ""
    return found


def _resolved(node: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, variables)
    if isinstance(node, list):
        return [_resolved(item, variables) for item in node]
    if isinstance(node, dict):
        return {key: _resolved(value, variables) for key, value in node.items()}
    return node


def load_compose(variables: Mapping[str, str] | None = None) -> dict:
    """docker-compose.yml with anchors merged; with `variables` (what the user exported),
    every `${...}` resolved as compose resolves it; without, the raw text of each value."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    return compose if variables is None else _resolved(compose, variables)


def service_environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's `environment:` (mapping or `KEY=value` list) as strings; a bare key
    passed through from the host is ""."""
    env = service.get("environment", {}) or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def service_command(service: Mapping[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command]


def healthcheck_command(service: Mapping[str, Any]) -> list[str]:
    """The healthcheck's test as an argv (CMD form; CMD-SHELL runs under sh -c)."""
    test = service["healthcheck"]["test"]
    if isinstance(test, str):
        return ["sh", "-c", test]
    kind, *words = test
    return ["sh", "-c", " ".join(words)] if kind == "CMD-SHELL" else list(words)
