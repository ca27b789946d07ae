"""The materialized-table statements of FLIP-435 ("Public Interfaces"), parsed.

The clauses are read from sqlglot's tokens in Spark's dialect (quotes, backticks, comments
and case are the tokenizer's business, never regular expressions over the text); the query
after AS is parsed by sqlglot too. Every refusal is a `SqlError` with the line and column of
the token at fault. Values stay data: a partition value or an option is a string here, and
whoever turns it into SQL builds a literal with sqlglot (`partition_predicate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from catalog.core.errors import InvalidInput, SqlError
from catalog.core.sql import parse_query
from refresh.core.freshness import Freshness, RefreshMode

STATEMENTS = (
    "CREATE MATERIALIZED TABLE, ALTER MATERIALIZED TABLE, DROP MATERIALIZED TABLE, "
    "DESCRIBE JOB, SHOW MATERIALIZED TABLES, UPDATE or DELETE"
)
_DIALECT = Spark()


# -- what a statement says ------------------------------------------------------------------


@dataclass(frozen=True)
class CreateMaterializedTable:
    name: tuple[str, ...]
    freshness: Freshness
    query: str
    refresh_mode: RefreshMode | None = None
    primary_key: tuple[str, ...] = ()
    constraint_name: str | None = None
    comment: str | None = None
    partitioned_by: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Suspend:
    name: tuple[str, ...]


@dataclass(frozen=True)
class Resume:
    name: tuple[str, ...]
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Refresh:
    name: tuple[str, ...]
    partition: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SetFreshness:
    name: tuple[str, ...]
    freshness: Freshness


@dataclass(frozen=True)
class SetRefreshMode:
    name: tuple[str, ...]
    refresh_mode: RefreshMode


@dataclass(frozen=True)
class SetOptions:
    name: tuple[str, ...]
    options: dict[str, str]


@dataclass(frozen=True)
class ResetOptions:
    name: tuple[str, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class DropMaterializedTable:
    name: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True)
class DescribeJob:
    job_id: str


@dataclass(frozen=True)
class ShowMaterializedTables:
    namespace: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataChange:
    """UPDATE or DELETE on a table: run as it is by Spark (the next full refresh of a
    materialized table overwrites such changes, as in Flink)."""

    kind: str
    target: tuple[str, ...]
    sql: str


Statement = (
    CreateMaterializedTable | Suspend | Resume | Refresh | SetFreshness | SetRefreshMode
    | SetOptions | ResetOptions | DropMaterializedTable | DescribeJob | ShowMaterializedTables
    | DataChange
)  # fmt: skip


# -- reading tokens -------------------------------------------------------------------------


class _Cursor:
    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text, self.tokens, self.i = text, tokens, 0

    def where(self, token: Token | None) -> tuple[int, int]:
        # No token: the end of the statement.
        offset = len(self.text.rstrip()) if token is None else token.start
        line = self.text.count("\n", 0, offset) + 1
        column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return line, column

    def fail(self, message: str, token: Token | None = None) -> SqlError:
        line, column = self.where(token if token is not None else self.peek())
        return SqlError(message, line=line, column=column)

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.i + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def word(self, ahead: int = 0) -> str:
        """The upper-cased text of a keyword-like token ('' for strings and quoted names)."""
        token = self.peek(ahead)
        if token is None or token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            return ""
        return token.text.upper()

    def next(self) -> Token:
        token = self.peek()
        if token is None:
            raise self.fail("Unexpected end of statement")
        self.i += 1
        return token

    def accept(self, *words: str) -> bool:
        """Consume the words (one token each; 'PRIMARY KEY' may be one token) if they come
        next."""
        joined = " ".join(words)
        if self.word() == joined:
            self.i += 1
            return True
        if all(self.word(n) == w for n, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str, what: str | None = None) -> None:
        if not self.accept(*words):
            found = self.peek()
            shown = repr(found.text) if found is not None else "the end"
            raise self.fail(f"Expected {what or ' '.join(words)}, found {shown}")

    def at(self, token_type: TokenType) -> bool:
        token = self.peek()
        return token is not None and token.token_type == token_type

    def expect_type(self, token_type: TokenType, what: str) -> Token:
        if not self.at(token_type):
            found = self.peek()
            shown = repr(found.text) if found is not None else "the end"
            raise self.fail(f"Expected {what}, found {shown}")
        return self.next()

    def string(self, what: str) -> str:
        """A string literal; adjacent literals join, as in Spark ('a' 'b' is 'ab')."""
        parts = [self.expect_type(TokenType.STRING, what).text]
        while self.at(TokenType.STRING):
            parts.append(self.next().text)
        return "".join(parts)

    def identifier(self, what: str = "a name") -> str:
        """A name: a word (keywords too: `date` may name a column) or a `quoted` one."""
        token = self.peek()
        quoted = token is not None and token.token_type == TokenType.IDENTIFIER
        if not quoted and (token is None or not token.text.isidentifier()):
            shown = repr(token.text) if token is not None else "the end"
            raise self.fail(f"Expected {what}, found {shown}")
        return self.next().text

    def name(self) -> tuple[str, ...]:
        """[catalog.][namespace.]name"""
        parts = [self.identifier("a materialized table name")]
        while self.at(TokenType.DOT):
            self.next()
            parts.append(self.identifier("a name after '.'"))
        return tuple(parts)

    def names_in_parens(self, what: str) -> tuple[str, ...]:
        self.expect_type(TokenType.L_PAREN, "'('")
        names = [self.identifier(what)]
        while self.at(TokenType.COMMA):
            self.next()
            names.append(self.identifier(what))
        self.expect_type(TokenType.R_PAREN, "')'")
        return tuple(names)

    def pairs(self, what: str, *, string_keys: bool = True) -> dict[str, str]:
        """('k' = 'v', ...) for options, or (k = 'v', ...) for a partition."""
        self.expect_type(TokenType.L_PAREN, "'('")
        pairs: dict[str, str] = {}
        while True:
            key_token = self.peek()
            key = self.string(f"a quoted {what} name") if string_keys else self.identifier(what)
            if key in pairs:
                raise self.fail(f"Duplicate {what} {key!r}", key_token)
            self.expect_type(TokenType.EQ, "'='")
            pairs[key] = self.string(f"a quoted value for {key!r}")
            if not self.at(TokenType.COMMA):
                break
            self.next()
        self.expect_type(TokenType.R_PAREN, "')'")
        return pairs

    def freshness(self) -> Freshness:
        self.expect_type(TokenType.EQ, "'=' after FRESHNESS")
        self.expect("INTERVAL", what="INTERVAL '<n>' SECOND|MINUTE|HOUR|DAY")
        value_token = self.peek()
        if self.at(TokenType.DASH):  # INTERVAL -'30' SECOND: Flink's message, not ours
            self.next()
            value = "-" + self.string("a quoted interval")
        else:
            value = self.string("a quoted interval, as in INTERVAL '10' SECOND")
        unit_token = self.peek()
        unit = self.word()
        if unit not in ("SECOND", "MINUTE", "HOUR", "DAY"):
            raise self.fail("Expected SECOND, MINUTE, HOUR or DAY", unit_token)
        self.next()
        try:
            return Freshness.parse(value, unit)
        except InvalidInput as error:  # placed at the interval
            raise self.fail(error.message, value_token) from None

    def refresh_mode(self) -> RefreshMode:
        self.expect_type(TokenType.EQ, "'=' after REFRESH_MODE")
        token = self.peek()
        word = self.word()
        if word not in ("CONTINUOUS", "FULL"):
            raise self.fail("Expected CONTINUOUS or FULL", token)
        self.next()
        return RefreshMode(word)

    def end(self) -> None:
        if self.peek() is not None:
            raise self.fail(f"Unexpected {self.peek().text!r} after the statement")


# -- statements -----------------------------------------------------------------------------


def split_statements(script: str) -> list[tuple[str, int]]:
    """The statements of a script, each with the line it starts on: semicolons inside
    quotes and comments do not split (the tokenizer knows where those are)."""
    tokens = _tokenize(script)
    statements, start = [], 0
    for token in [*tokens, None]:
        if token is None or token.token_type == TokenType.SEMICOLON:
            end = token.start if token is not None else len(script)
            text = script[start:end]
            if text.strip():
                leading = len(text) - len(text.lstrip())
                first = start + leading
                statements.append((text.strip(), script.count("\n", 0, first) + 1))
            start = end + 1
    return statements


def _tokenize(text: str) -> list[Token]:
    try:
        return list(_DIALECT.tokenize(text))
    except TokenError as error:
        raise SqlError(f"Cannot read the SQL: {str(error)[:200]}") from None


def parse_statement(text: str) -> Statement:
    """One statement (no trailing semicolon needed)."""
    tokens = [t for t in _tokenize(text) if t.token_type != TokenType.SEMICOLON]
    cursor = _Cursor(text, tokens)
    if cursor.peek() is None:
        raise SqlError("The statement is empty")
    if cursor.accept("CREATE"):
        cursor.expect("MATERIALIZED", "TABLE", what="MATERIALIZED TABLE after CREATE")
        return _create(cursor)
    if cursor.accept("ALTER"):
        cursor.expect("MATERIALIZED", "TABLE", what="MATERIALIZED TABLE after ALTER")
        return _alter(cursor)
    if cursor.accept("DROP"):
        cursor.expect("MATERIALIZED", "TABLE", what="MATERIALIZED TABLE after DROP")
        if_exists = cursor.accept("IF", "EXISTS")
        statement = DropMaterializedTable(cursor.name(), if_exists=if_exists)
        cursor.end()
        return statement
    if cursor.accept("DESCRIBE") or cursor.accept("DESC"):
        cursor.expect("JOB", what="JOB after DESCRIBE")
        token = cursor.next()
        cursor.end()
        return DescribeJob(token.text)
    if cursor.word() == "SHOW":
        # Spark's tokenizer reads the rest of a SHOW as one opaque command: read it again
        # with SHOW blanked out, so that offsets (and so error positions) stay the same.
        show = cursor.next()
        masked = text[: show.start] + " " * (show.end + 1 - show.start) + text[show.end + 1 :]
        cursor = _Cursor(
            text, [t for t in _tokenize(masked) if t.token_type != TokenType.SEMICOLON]
        )
        cursor.expect("MATERIALIZED", "TABLES", what="MATERIALIZED TABLES after SHOW")
        namespace: tuple[str, ...] = ()
        if cursor.accept("IN") or cursor.accept("FROM"):
            namespace = cursor.name()
        cursor.end()
        return ShowMaterializedTables(namespace)
    if cursor.word() in ("UPDATE", "DELETE"):
        return _data_change(text, cursor)
    raise cursor.fail(f"Unknown statement: expected {STATEMENTS}")


def _create(cursor: _Cursor) -> CreateMaterializedTable:
    name = cursor.name()
    primary_key: tuple[str, ...] = ()
    constraint = None
    if cursor.at(TokenType.L_PAREN):
        cursor.next()
        if cursor.accept("CONSTRAINT"):
            constraint = cursor.identifier("a constraint name")
        cursor.expect("PRIMARY", "KEY", what="PRIMARY KEY (the only constraint allowed)")
        primary_key = cursor.names_in_parens("a primary key column")
        cursor.expect("NOT", "ENFORCED", what="NOT ENFORCED (primary keys are not enforced)")
        cursor.expect_type(TokenType.R_PAREN, "')'")
    clauses: dict[str, object] = {}

    def once(clause: str, token: Token | None) -> None:
        if clause in clauses:
            raise cursor.fail(f"{clause} is given twice", token)

    while not cursor.accept("AS"):
        token = cursor.peek()
        if cursor.accept("COMMENT"):
            once("COMMENT", token)
            clauses["COMMENT"] = cursor.string("a quoted comment")
        elif cursor.accept("PARTITIONED", "BY"):
            once("PARTITIONED BY", token)
            clauses["PARTITIONED BY"] = cursor.names_in_parens("a partition column")
        elif cursor.accept("WITH"):
            once("WITH", token)
            clauses["WITH"] = cursor.pairs("option")
        elif cursor.accept("FRESHNESS"):
            once("FRESHNESS", token)
            clauses["FRESHNESS"] = cursor.freshness()
        elif cursor.accept("REFRESH_MODE"):
            once("REFRESH_MODE", token)
            clauses["REFRESH_MODE"] = cursor.refresh_mode()
        else:
            shown = repr(token.text) if token is not None else "the end"
            expected = "COMMENT, PARTITIONED BY, WITH, FRESHNESS, REFRESH_MODE or AS <query>"
            raise cursor.fail(f"Expected {expected}, found {shown}")
    if "FRESHNESS" not in clauses:
        raise cursor.fail("Expected FRESHNESS = INTERVAL '<n>' <unit> before AS")
    query = _query(cursor)
    return CreateMaterializedTable(
        name=name,
        freshness=clauses["FRESHNESS"],  # type: ignore[arg-type]
        query=query,
        refresh_mode=clauses.get("REFRESH_MODE"),  # type: ignore[arg-type]
        primary_key=primary_key,
        constraint_name=constraint,
        comment=clauses.get("COMMENT"),  # type: ignore[arg-type]
        partitioned_by=clauses.get("PARTITIONED BY", ()),  # type: ignore[arg-type]
        options=clauses.get("WITH", {}),  # type: ignore[arg-type]
    )


def _query(cursor: _Cursor) -> str:
    """The text after AS, parsed as one Spark query (errors placed in the statement)."""
    first = cursor.peek()
    if first is None:
        raise cursor.fail("Expected a query after AS")
    query = cursor.text[first.start :].strip()
    try:
        parse_query(query, "spark")
    except SqlError as error:
        line, column = cursor.where(first)
        if error.line is not None:
            column = error.column if error.line > 1 else column + (error.column or 1) - 1
            line = line + error.line - 1
        message = error.message.rsplit(" (line", 1)[0]
        raise SqlError(message, line=line, column=column) from None
    return query


def _alter(cursor: _Cursor) -> Statement:
    name = cursor.name()
    token = cursor.peek()
    if cursor.accept("SUSPEND"):
        statement: Statement = Suspend(name)
    elif cursor.accept("RESUME"):
        options = cursor.pairs("option") if cursor.accept("WITH") else {}
        statement = Resume(name, options)
    elif cursor.accept("REFRESH"):
        partition = {}
        if cursor.accept("PARTITION"):
            partition = cursor.pairs("partition column", string_keys=False)
        statement = Refresh(name, partition)
    elif cursor.accept("SET", "FRESHNESS"):
        statement = SetFreshness(name, cursor.freshness())
    elif cursor.accept("SET", "REFRESH_MODE"):
        statement = SetRefreshMode(name, cursor.refresh_mode())
    elif cursor.accept("SET"):
        statement = SetOptions(name, cursor.pairs("option"))
    elif cursor.accept("RESET"):
        cursor.expect_type(TokenType.L_PAREN, "'('")
        keys = [cursor.string("a quoted option name")]
        while cursor.at(TokenType.COMMA):
            cursor.next()
            keys.append(cursor.string("a quoted option name"))
        cursor.expect_type(TokenType.R_PAREN, "')'")
        statement = ResetOptions(name, tuple(keys))
    else:
        raise cursor.fail(
            "Expected SUSPEND, RESUME, REFRESH, SET FRESHNESS, SET REFRESH_MODE, SET (...) "
            "or RESET (...)",
            token,
        )
    cursor.end()
    return statement


def _data_change(text: str, cursor: _Cursor) -> DataChange:
    kind = cursor.word()
    cursor.next()
    if kind == "DELETE":
        cursor.expect("FROM", what="FROM after DELETE")
    return DataChange(kind, cursor.name(), text.strip())


def partition_predicate(partition: dict[str, str], *, dialect: str = "spark") -> str:
    """`k1 = 'v1' AND k2 = 'v2'` with every value a string literal built by sqlglot (quotes,
    backslashes and semicolons escaped), never spliced text."""
    conditions = [
        exp.EQ(this=exp.column(key, quoted=True), expression=exp.Literal.string(value))
        for key, value in partition.items()
    ]
    if not conditions:
        return ""
    return exp.and_(*conditions).sql(dialect=dialect)
