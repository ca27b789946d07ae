"""Row filters and column masks in Databricks' grammar, with the expression written inline
(Databricks names a SQL UDF; the catalog keeps SQL, so the expression is the policy):

    ALTER TABLE name SET ROW FILTER <boolean expression> [EXEMPT GROUPS group [, ...]]
    ALTER TABLE name DROP ROW FILTER
    ALTER TABLE name { ALTER | CHANGE } [COLUMN] column SET MASK <expression>
        [EXEMPT GROUPS group [, ...]]
    ALTER TABLE name { ALTER | CHANGE } [COLUMN] column DROP MASK
    SHOW POLICIES ON [TABLE] name

`ALTER MATERIALIZED TABLE name` takes the same clauses (a materialized table is a table).
The expression runs to an unquoted EXEMPT outside parentheses (after a '.', `exempt` is a
field's name) or to the statement's end; its text is kept exactly as written, after
sqlglot has read it as one Spark expression so that a typo is refused at its line and
column here. What it may say (its columns, current_user(), is_member()) is for
`catalog.services.policies` to decide. Group names are words or `quoted`.

Read from sqlglot's tokens by the reader of `refresh.core.statements`, as the grant
statements are (`grant_statements`); this module knows no database."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot.tokens import TokenType

from refresh.core.grant_statements import name_part

Name = tuple[str, ...]

#: What may follow `ALTER TABLE name` (and `ALTER MATERIALIZED TABLE name`) here.
CLAUSE_CHOICES = (
    "SET ROW FILTER <expression>, DROP ROW FILTER, ALTER COLUMN <column> SET MASK "
    "<expression> or ALTER COLUMN <column> DROP MASK"
)
#: Where an expression (as written in the statement) starts: 1-based line and column.
Place = tuple[int, int]


@dataclass(frozen=True)
class SetRowFilter:
    name: Name
    #: The boolean expression, exactly as written.
    expression: str
    exempt_groups: tuple[str, ...] = ()
    #: Where the expression starts in the script, to place the service's refusals of it.
    expression_at: Place | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DropRowFilter:
    name: Name


@dataclass(frozen=True)
class SetColumnMask:
    name: Name
    column: str
    #: The expression whose value readers see instead of the column's, exactly as written.
    expression: str
    exempt_groups: tuple[str, ...] = ()
    expression_at: Place | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DropColumnMask:
    name: Name
    column: str


@dataclass(frozen=True)
class ShowPolicies:
    name: Name


PolicyStatement = SetRowFilter | DropRowFilter | SetColumnMask | DropColumnMask | ShowPolicies
#: The statements that change a policy (SHOW POLICIES reads).
CHANGES = (SetRowFilter, DropRowFilter, SetColumnMask, DropColumnMask)


def starts_a_policy_statement(words: list[str]) -> bool:
    """Whether a statement's first keywords are ALTER TABLE or SHOW POLICIES (ALTER
    MATERIALIZED TABLE is the materialized-table statements', which hand over at
    `at_clause`)."""
    return words[:2] in (["ALTER", "TABLE"], ["SHOW", "POLICIES"])


def parse(reader: Any) -> PolicyStatement:
    """One statement from `reader` (refresh.core.statements' token reader, at its first
    token)."""
    if reader.accept("SHOW POLICIES"):
        reader.expect("ON", "ON <table> after SHOW POLICIES")
        reader.accept("TABLE")
        statement = ShowPolicies(reader.name("a table name"))
        reader.finish()
        return statement
    reader.expect("ALTER TABLE")
    name = reader.name("a table name")
    if not at_clause(reader):
        # Other ALTER TABLE forms are Spark DDL, which the console does not run.
        raise reader.expected(f"{CLAUSE_CHOICES} after ALTER TABLE {'.'.join(name)[:100]}")
    return clause(reader, name)


def at_clause(reader: Any) -> bool:
    """Whether a policy clause comes next (after a table's name)."""
    return any(
        reader.at(phrase) for phrase in ("SET ROW FILTER", "DROP ROW FILTER", "ALTER", "CHANGE")
    )


def clause(reader: Any, name: Name) -> PolicyStatement:
    """The policy clause after the table's name, to the statement's end."""
    statement: PolicyStatement
    if reader.accept("SET ROW FILTER"):
        expression, where = _expression(reader, "a boolean expression after SET ROW FILTER")
        statement = SetRowFilter(name, expression, _exempt(reader), where)
    elif reader.accept("DROP ROW FILTER"):
        statement = DropRowFilter(name)
    else:
        reader.next()  # ALTER or CHANGE, as Databricks reads either
        reader.accept("COLUMN")
        column = reader.identifier("a column name")
        if reader.accept("SET MASK"):
            expression, where = _expression(reader, f"an expression after SET MASK of {column}")
            statement = SetColumnMask(name, column, expression, _exempt(reader), where)
        elif reader.accept("DROP MASK"):
            statement = DropColumnMask(name, column)
        else:
            raise reader.expected(f"SET MASK <expression> or DROP MASK after column {column}")
    reader.finish()
    return statement


def _expression(reader: Any, what: str) -> tuple[str, Place]:
    """The tokens up to an unquoted EXEMPT outside parentheses and brackets, or to the end,
    checked by sqlglot as one Spark expression (`reader.expression`); its text as written."""
    first = reader.peek()
    depth, previous = 0, None
    while (token := reader.peek()) is not None:
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        ends = depth == 0 and reader.at("EXEMPT")
        if ends and (previous is None or previous.token_type != TokenType.DOT):
            break
        previous = reader.next()
    if previous is None:
        raise reader.expected(what)
    return reader.expression(first, previous), reader.place(first)


def _exempt(reader: Any) -> tuple[str, ...]:
    """[EXEMPT GROUPS group [, group ...]]: a group named twice counts once."""
    if not reader.accept("EXEMPT"):
        return ()
    reader.expect("GROUPS", "GROUPS after EXEMPT")
    groups: list[str] = []
    while True:
        group = name_part(reader, "a group name")
        if group not in groups:
            groups.append(group)
        if not reader.at_type(TokenType.COMMA):
            return tuple(groups)
        reader.next()
