"""`manage.py apply_sql <folder> [--namespace NS] [--user NAME] [--plan]`: apply a folder of
materialized-table statements, grants and row filters / column masks (any statement the
console runs), as a CI job applies pipelines kept in git.

Every `*.sql` file under the folder is read and split into statements; the statements are
put in dependency order (a definition after the tables it reads, found from the queries by
sqlglot; any other statement after the definition of its table; otherwise files by name
and statements as written). The plan comes first, one line per statement (create, alter
with its changes, nothing, refused). On the first refusal the command stops with its file,
line and column and exit status 1, having changed nothing. Otherwise the statements run in
that order through the SQL console's own code, Spark in this process (as a worker's), so
that `CREATE OR ALTER` definitions applied a second time change nothing. `--plan` stops
after the plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from catalog.core.errors import CatalogError, SqlError
from refresh import analysis, console, console_plan, pipelines
from refresh.core import statements as st


@dataclass
class Unit:
    """One statement of one file."""

    path: str
    script: str
    offset: int
    padded: str
    statement: st.Statement | None
    defines: set[str]
    reads: set[str]


class Command(BaseCommand):
    help = "Apply every *.sql file of a folder in dependency order, after printing the plan."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("folder", help="the folder of *.sql files (read recursively)")
        parser.add_argument(
            "--namespace", default=None, help="the namespace unqualified names resolve in"
        )
        parser.add_argument(
            "--user",
            default=None,
            help="who applies them (an editor); by default the first active superuser",
        )
        parser.add_argument("--plan", action="store_true", help="print the plan and stop")

    def handle(
        self, *args: Any, folder: str, namespace: str | None, user: str | None, plan: bool,
        **options: Any,
    ) -> None:  # fmt: skip
        actor = _actor(user)
        units = _read(Path(folder), namespace=namespace)
        try:
            order = pipelines.order_by_dependencies([(u.defines, u.reads) for u in units])
        except pipelines.DependencyCycle as cycle:
            stuck = [units[index] for index in cycle.indexes]
            raise CommandError(
                "These definitions read each other in a cycle: "
                + ", ".join(
                    f"{u.path} ({', '.join(sorted(u.defines)) or 'no table'})" for u in stuck
                )
            ) from None
        units = [units[index] for index in order]

        self.stdout.write(f"Plan ({len(units)} statements):")
        planned: set[str] = set()
        refusal = None
        actions: dict[str, int] = {}
        for unit in units:
            result = console_plan.plan_statement(
                unit.script,
                unit.offset,
                unit.padded,
                namespace=namespace,
                actor=actor,
                planned=planned,
            )
            action = (result.plan or {}).get("action", "refused")
            actions[action] = actions.get(action, 0) + 1
            where = f"{unit.path}:{result.line}:{result.column}"
            self.stdout.write(f"  {where}  {action}  {result.table or ''}  {_changes(result)}")
            if not result.ok and refusal is None:
                error = result.error or {}
                line, column = error.get("line", result.line), error.get("column", result.column)
                refusal = f"{unit.path}:{line}:{column}: refused: {result.message}"
        self.stdout.write("  " + ", ".join(f"{n} {a}" for a, n in sorted(actions.items())))
        if refusal is not None:
            raise CommandError(refusal)
        if plan:
            return

        with analysis.on_worker():
            for unit in units:
                [result] = console.execute(unit.padded, namespace=namespace, actor=actor)
                where = f"{unit.path}:{result.line}:{result.column}"
                if not result.ok:
                    error = result.error or {}
                    line = error.get("line", result.line)
                    column = error.get("column", result.column)
                    raise CommandError(f"{unit.path}:{line}:{column}: refused: {result.message}")
                self.stdout.write(f"{where}  {result.message}")
        self.stdout.write(f"Applied {len(units)} statements.")


def _actor(username: str | None) -> Any:
    users = get_user_model().objects.filter(is_active=True)
    found = (
        users.filter(username=username).first()
        if username
        else users.filter(is_superuser=True).order_by("pk").first()
    )
    if found is None:
        raise CommandError(
            f"No active user {username!r}" if username else "No active superuser: use --user"
        )
    return found


def _read(folder: Path, *, namespace: str | None) -> list[Unit]:
    """Every statement of every *.sql file, files by path; a file that does not split into
    statements (an unclosed quote or comment) stops the command with its place."""
    if not folder.is_dir():
        raise CommandError(f"Not a folder: {folder}")
    units = []
    for path in sorted(folder.rglob("*.sql")):
        shown = str(path.relative_to(folder))
        script = path.read_text(encoding="utf-8")
        try:
            located = st.located_statements(script)
        except SqlError as error:
            raise CommandError(
                f"{shown}:{error.line}:{error.column}: refused: {error.message}"
            ) from None
        for offset, padded in located:
            try:
                statement: st.Statement | None = st.parse_statement(padded)
            except CatalogError:
                statement = None  # the plan refuses it, with its place
            defines, reads = (
                pipelines.defines_and_reads(statement, namespace=namespace)
                if statement is not None
                else (set(), set())
            )
            units.append(Unit(shown, script, offset, padded, statement, defines, reads))
    if not units:
        raise CommandError(f"No statements in any *.sql file under {folder}")
    return units


def _changes(result: console.StatementResult) -> str:
    if not result.ok:
        return result.message
    return "; ".join(change for change in (result.plan or {}).get("changes", []) if change)
