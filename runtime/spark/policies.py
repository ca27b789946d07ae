"""Row filters and column masks enforced inside Spark's analyzed plan. Django-free.

`enforce` takes the plan `sandbox.analyze` made of a reader's statement and the reader's
bound policies (catalog.core.policies.TablePolicy), and gives the plan in which every read of
a protected table of the app's catalog (wherever it stands: a join, a subquery in an
expression, a CTE, a catalog view's body, time travel) reads the table through its policies:
its row filter applied, its masked columns replaced by their masks, below everything the
reader wrote. The JVM helper `lakeview.sandbox.RowPolicies` (jvm/RowPolicies.java, one call
per statement) does the rewrite and says why it refuses; its comment explains the barrier
that keeps the optimizer from evaluating the reader's predicates on hidden rows.

It runs after `sandbox.analyze` and before `sandbox.facts_of` / `check`, so the sandbox
checks the plan that runs, the policies' SQL included. Refused (SandboxRefused, naming the
policies): a metadata table of a protected table, a write to one, its file paths and row
positions (metadata columns, input_file_name()), a stream of one, and a policy whose SQL
does not resolve against the table (it never runs unfiltered).

`reading_as` says whose policies the sandbox's reads apply when its caller passes none: a
refresh, a rebuild or a verification runs under its table owner's (refresh.runner), through
every `sandbox.query` its steps make, without each step carrying them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from catalog.core.policies import TablePolicy
from runtime.spark.aliases import aliases_of
from runtime.spark.errors import SandboxRefused

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_REFUSED = "lakeview.sandbox.RowPolicies$Refused"

_READING_AS: ContextVar[tuple[TablePolicy, ...]] = ContextVar("lakeview_reading_as", default=())


@contextlib.contextmanager
def reading_as(policies: Sequence[TablePolicy]) -> Iterator[None]:
    """Within it, the sandbox's reads that are given no policies apply these (`current`)."""
    token = _READING_AS.set(tuple(policies))
    try:
        yield
    finally:
        _READING_AS.reset(token)


def current(given: Sequence[TablePolicy] | None = None) -> Sequence[TablePolicy]:
    """`given`, or (None) the policies `reading_as` set in this context (none by default)."""
    return _READING_AS.get() if given is None else given


def effective(policies: Sequence[TablePolicy]) -> list[TablePolicy]:
    """The policies that change what a reader sees (a row filter or a mask), one per table."""
    found: dict[tuple[str, ...], TablePolicy] = {}
    for policy in policies:
        if policy.row_filter is None and not policy.masks:
            continue
        table = tuple(level.lower() for level in policy.table)
        if table in found:
            raise ValueError(f"Two policies for {policy.label}: merge them into one TablePolicy")
        found[table] = policy
    return list(found.values())


def request(policies: Sequence[TablePolicy], catalogs: Sequence[str]) -> str:
    """What the JVM helper reads: the catalog's names in the session and the policies."""
    return json.dumps(
        {
            "catalogs": sorted(set(catalogs)),
            "policies": [
                {
                    "table": list(policy.table),
                    "row_filter": policy.row_filter,
                    "masks": [[column, sql] for column, sql in policy.masks],
                }
                for policy in policies
            ],
        }
    )


def refusal(kind: str, policy: TablePolicy, detail: str = "") -> SandboxRefused:
    """The reader's error for a refusal of the JVM helper, naming the policies."""
    policies = policy.describe()
    if kind == "metadata":
        message = (
            f"A metadata table of {policy.label} cannot be read here: its files and "
            f"statistics would read around {policies}"
        )
    elif kind == "write":
        message = (
            f"{policy.label} cannot be changed by a reader whom {policies} apply to: "
            "the change would read and write around them"
        )
    elif kind == "file":
        message = (
            f"{detail or 'A file column'} gives the files and row positions of "
            f"{policy.label}, which would read around {policies}"
        )
    elif kind == "stream":
        message = f"{policy.label} cannot be read as a stream under {policies}"
    else:
        message = (
            f"The query cannot run: {policies} cannot be applied"
            + (f" ({detail})" if detail else "")
            + "; the table's managers must fix the policy"
        )
    return SandboxRefused(message)


def enforce(
    session: SparkSession, analyzed_plan: Any, policies: Sequence[TablePolicy], *, catalog: str
) -> Any:
    """`analyzed_plan` (a JVM LogicalPlan) reading every protected table of `catalog` (or of
    one of the session's other names for it, `sandbox.aliases_of`) through its policies;
    the same plan when none applies. SandboxRefused as the module says."""
    from py4j.protocol import Py4JJavaError

    applying = effective(policies)
    if not applying:
        return analyzed_plan
    helper = session._jvm.lakeview.sandbox.RowPolicies  # noqa: SLF001 - py4j's entry point
    if type(helper).__name__ != "JavaClass":  # the jar is older than this module
        raise SandboxRefused(
            "The Spark sandbox's helper (lakeview-sandbox.jar) cannot apply row filters and "
            "masks; run scripts/build_sandbox_jar.sh"
        )
    catalogs = [catalog, *aliases_of(session)]
    try:
        return helper.enforce(
            session._jsparkSession,  # noqa: SLF001
            analyzed_plan,
            request(applying, catalogs),
        )
    except Py4JJavaError as error:
        java = error.java_exception
        if java.getClass().getName() != _REFUSED:
            raise
        raise refusal(str(java.kind()), applying[int(java.policy())], str(java.detail())) from None
