"""The materialized-table statements of FLIP-435 ("Public Interfaces"), parsed.

The clauses are read from sqlglot's tokens in Spark's dialect: quotes, backticks, comments
and case are the tokenizer's business, never regular expressions over the text. The query
after AS, and an UPDATE, DELETE or MERGE, are parsed by sqlglot as Spark SQL. Every refusal is a
`SqlError` with the 1-based line and column of the token at fault, worded as Flink words it
where Flink has words for it (its parser, `SqlConstraintValidator`,
`MaterializedTableUtils`, `IntervalFreshness`, the create converter's option checks).

Values stay data: an option or a partition value is a string here, and whoever turns one
into SQL builds a literal with sqlglot (`partition_predicate`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import NamedTuple, TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.tokens import Token, TokenType

from catalog.core.errors import InvalidInput, SqlError
from refresh.core import grant_statements as grants
from refresh.core import policy_statements as policies
from refresh.core.columns import (
    ColumnDefinition,
    NamesAsWritten,
    declared_type,
    quote_name,
    quote_string,
    render_type,
)
from refresh.core.expectations import ACTIONS, Expectation, parse_condition
from refresh.core.freshness import (
    DEFAULT_CONTINUOUS_FRESHNESS,
    DEFAULT_FULL_FRESHNESS,
    DEFAULT_THRESHOLD,
    UNSUPPORTED_UNIT,
    Freshness,
    RefreshMode,
    plan_refresh,
)
from refresh.core.partitions import check_formatter_column, compile_pattern

STATEMENTS = (
    "CREATE [OR ALTER] MATERIALIZED TABLE, ALTER MATERIALIZED TABLE, DROP MATERIALIZED TABLE, "
    "DESCRIBE JOB, SHOW MATERIALIZED TABLES, SHOW CREATE MATERIALIZED TABLE, UPDATE, "
    "DELETE or MERGE of a materialized table, or a query (SELECT, WITH, VALUES, DESCRIBE, "
    "SHOW COLUMNS, EXPLAIN), GRANT, REVOKE, SHOW GRANTS, ALTER TABLE ... SET ROW FILTER, "
    "ALTER TABLE ... ALTER COLUMN ... SET MASK (or DROP either) or SHOW POLICIES"
)
FRESHNESS_SYNTAX = "FRESHNESS = INTERVAL '<n>' <unit>"
# Flink's messages (parserImpls.ftl, MaterializedTableUtils, SqlConstraintValidator).
INTERVAL_ONLY = (
    "MATERIALIZED TABLE only supports define interval type FRESHNESS, please refer to the "
    "materialized table document."
)
NEGATIVE_FRESHNESS = "Materialized table freshness doesn't support negative value."
ENFORCED_UNSUPPORTED = (
    "Flink doesn't support ENFORCED mode for PRIMARY KEY constraint. ENFORCED/NOT ENFORCED "
    "controls if the constraint checks are performed on the incoming/outgoing data. Flink does "
    "not own the data therefore the only supported mode is the NOT ENFORCED mode"
)

Name = tuple[str, ...]
_T = TypeVar("_T")


# -- what a statement says ---------------------------------------------------------------------


@dataclass(frozen=True)
class Distribution:
    """DISTRIBUTED BY [HASH] (columns) INTO n BUCKETS (FLIP-542): an Iceberg `bucket[n]`
    partition field per column."""

    columns: tuple[str, ...]
    buckets: int


@dataclass(frozen=True)
class CreateMaterializedTable:
    name: Name
    freshness: Freshness
    #: The text after AS, as written (one Spark query: SELECT, a set operation, or WITH).
    query: str
    #: REFRESH_MODE when given; None lets the freshness decide (Flink's AUTOMATIC).
    refresh_mode: RefreshMode | None = None
    primary_key: tuple[str, ...] = ()
    constraint_name: str | None = None
    comment: str | None = None
    partitioned_by: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict, hash=False)
    #: CREATE OR ALTER (FLIP-546): create when absent, else change what differs.
    or_alter: bool = False
    #: The schema part (FLIP-550): names only, or names with types, NOT NULL and comments.
    columns: tuple[ColumnDefinition, ...] = ()
    distribution: Distribution | None = None
    #: CONSTRAINT name EXPECT (condition) [ON VIOLATION ...] in the schema part (Databricks).
    expectations: tuple[Expectation, ...] = ()


@dataclass(frozen=True)
class Suspend:
    name: Name


@dataclass(frozen=True)
class Resume:
    name: Name
    #: Options for this resume only; Flink does not persist them.
    options: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Refresh:
    name: Name
    #: {column: value}, values as written (strings; a number keeps its text).
    partition: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class SetFreshness:
    name: Name
    freshness: Freshness


@dataclass(frozen=True)
class SetRefreshMode:
    name: Name
    refresh_mode: RefreshMode


@dataclass(frozen=True)
class SetOptions:
    name: Name
    options: dict[str, str] = field(hash=False)


@dataclass(frozen=True)
class ResetOptions:
    name: Name
    keys: tuple[str, ...]


@dataclass(frozen=True)
class AlterQuery:
    """ALTER MATERIALIZED TABLE name AS <query>: a new definition version."""

    name: Name
    query: str


@dataclass(frozen=True)
class DropMaterializedTable:
    name: Name
    if_exists: bool = False


@dataclass(frozen=True)
class DescribeJob:
    job_id: str


@dataclass(frozen=True)
class ShowMaterializedTables:
    namespace: Name = ()


@dataclass(frozen=True)
class ShowCreateMaterializedTable:
    name: Name


@dataclass(frozen=True)
class DataChange:
    """UPDATE, DELETE or MERGE on a materialized table (FLIP-435's GDPR case): run by Spark
    once its sandbox found the statement changes that table only; the next full refresh
    overwrites such changes, as in Flink."""

    kind: str
    target: Name
    sql: str


@dataclass(frozen=True)
class Query:
    """A read of the catalog's tables and views, run by the workers' Spark through its
    sandbox (refresh.spark.query), which has the last word on what it is: SELECT (any
    query: WITH, VALUES, TABLE, FROM ... SELECT, set operations, time travel), DESCRIBE [TABLE
    | QUERY], SHOW COLUMNS, or EXPLAIN."""

    kind: str
    sql: str
    #: The statement as Spark reads it: what precedes it in its script blanked (lines kept),
    #: so that Spark's lines and columns are the script's.
    positioned: str = field(default="", compare=False)


Statement = (
    CreateMaterializedTable | Suspend | Resume | Refresh | SetFreshness | SetRefreshMode
    | SetOptions | ResetOptions | AlterQuery | DropMaterializedTable | DescribeJob
    | ShowMaterializedTables | ShowCreateMaterializedTable | DataChange | Query
    | grants.GrantPrivileges | grants.RevokePrivileges | grants.ShowGrants
    | policies.SetRowFilter | policies.DropRowFilter | policies.SetColumnMask
    | policies.DropColumnMask | policies.ShowPolicies
)  # fmt: skip


class ScriptStatement(NamedTuple):
    """One statement of a script: its text and where it starts (1-based)."""

    text: str
    line: int
    column: int


# -- tokens ------------------------------------------------------------------------------------

_DIALECT = Spark()


class _Tokenizer(NamesAsWritten):
    """Spark's tokenizer with quoted names as written (`NamesAsWritten`), except that SHOW
    is an ordinary keyword: Spark's reads the rest of a SHOW statement as one opaque
    string, and SHOW MATERIALIZED TABLES has a clause."""

    COMMANDS = Spark.Tokenizer.COMMANDS - {TokenType.SHOW}


def _words(token: Token) -> list[str]:
    """A token's keywords, upper-cased ('PRIMARY KEY' is one token of two words); a string
    or a quoted name is never a keyword."""
    if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
        return []
    return token.text.upper().split()


def _position(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


_UNCLOSED = {"'": "string literal", '"': "string literal", "`": "quoted name", "/": "comment"}


def _tokenize(text: str) -> list[Token]:
    tokenizer = _Tokenizer(dialect=_DIALECT)
    try:
        return tokenizer.tokenize(text)
    except TokenError:
        # Where the token that could not be read began (the tokenizer keeps it; else just
        # after the last token it read).
        read = tokenizer.tokens
        offset = getattr(tokenizer, "_start", read[-1].end + 1 if read else 0)
        what = _UNCLOSED.get(text[offset : offset + 1], "token")
        line, column = _position(text, offset)
        raise SqlError(f"Unclosed {what}", line=line, column=column) from None


def _blank(text: str) -> str:
    """`text` with every character but line breaks turned into a space: what comes before a
    statement of a script keeps its lines and columns without being read."""
    return "".join(char if char == "\n" else " " for char in text)


def _spans(script: str, tokens: list[Token]) -> list[tuple[int, int, list[Token]]]:
    """(start, end, tokens) of each statement: semicolons split, those inside quotes and
    comments are not tokens and do not."""
    spans, start, current = [], 0, []
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            spans.append((start, token.start, current))
            start, current = token.end + 1, []
        else:
            current.append(token)
    spans.append((start, len(script), current))
    return [span for span in spans if span[2]]


def split_statements(script: str) -> list[ScriptStatement]:
    """The statements of a script, each with the line and column it starts at (a comment
    before a statement belongs to it)."""
    return [ScriptStatement(part.text, *part.position()) for part in read_script(script)]


@dataclass(frozen=True)
class Located:
    """One statement of a script as `read_script` found it: its place and its tokens, read
    once, so that whoever asks about it (does it need Spark, where does it start, what does
    it say: `parse`) reads no SQL again. A console request reads its script this way once
    and parses each statement at most once (refresh.console)."""

    #: Where its span starts in the script: just after the semicolon before it.
    offset: int
    #: The script up to the statement's end, what comes before `offset` blanked (lines
    #: kept): a parse of it reports the script's own lines and columns.
    padded: str
    #: Its tokens, at their places in `padded` (and in the script), semicolons left out.
    tokens: tuple[Token, ...] = field(repr=False, compare=False)

    @property
    def text(self) -> str:
        return self.padded[self.offset :].strip()

    @property
    def start(self) -> int:
        """Where its text starts in the script (a comment before it is part of it)."""
        rest = self.padded[self.offset :]
        return self.offset + len(rest) - len(rest.lstrip())

    def position(self) -> tuple[int, int]:
        """The 1-based line and column it starts at in the script."""
        return _position(self.padded, self.start)

    @property
    def query_kind(self) -> str | None:
        """The kind of query it is, from its first keywords (None: not a query)."""
        return _query_kind(list(self.tokens))

    @property
    def needs_spark(self) -> bool:
        """Whether its work needs a worker's Spark (CREATE, ALTER ... AS, UPDATE, DELETE,
        MERGE, a query), judged from its keywords alone (cheap: nothing is parsed)."""
        first = set(_words(self.tokens[0])[:1])
        if first in _SPARK_STATEMENTS or self.query_kind is not None:
            return True
        return first == {"ALTER"} and _alters_the_query(self.tokens)

    def leading_words(self, count: int) -> list[str]:
        """Its first `count` keywords, upper-cased (see `leading_words`)."""
        return _leading_words(self.tokens, count)

    def parse(self, *, threshold: timedelta = DEFAULT_THRESHOLD) -> Statement:
        """What it says (`parse_statement`), from the tokens already read."""
        return _parse(self.padded, list(self.tokens), threshold)


def read_script(script: str) -> list[Located]:
    """The statements of a script, tokenized once (a SqlError at the place a token cannot
    be read, such as an unclosed quote)."""
    return [
        Located(start, _blank(script[:start]) + script[start:end], tuple(tokens))
        for start, end, tokens in _spans(script, _tokenize(script))
    ]


def located_statements(script: str) -> list[tuple[int, str]]:
    """(offset, text) of each statement of a script, the text padded so that a parse of
    it reports the script's own lines and columns (what comes before is blanked)."""
    return [(part.offset, part.padded) for part in read_script(script)]


def position(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of a character offset in `text`."""
    return _position(text, offset)


#: First keywords of the statements whose work needs Spark's analyzer or Spark itself.
_SPARK_STATEMENTS = ({"CREATE"}, {"UPDATE"}, {"DELETE"}, {"MERGE"})
#: First keywords of a query (Spark's `query` rule: a SELECT, a CTE, VALUES, TABLE name,
#: FROM ... SELECT, a query in parentheses) and of EXPLAIN.
_QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "FROM", "(", "EXPLAIN"})


def _query_kind(tokens: list[Token]) -> str | None:
    """The kind of query a statement is, from its first keywords (None: not a query)."""
    first = _words(tokens[0])[:1]
    second = _words(tokens[1])[:1] if len(tokens) > 1 else []
    if not first:
        return None
    if first[0] in _QUERY_STARTS:
        if first == ["EXPLAIN"]:
            return "EXPLAIN"
        return "VALUES" if first == ["VALUES"] else "SELECT"
    if first[0] in ("DESCRIBE", "DESC") and second != ["JOB"]:
        return "DESCRIBE"
    if first == ["SHOW"] and tokens[1:2] and tokens[1].text.upper() == "COLUMNS":
        return "SHOW COLUMNS"
    return None


def _alters_the_query(tokens: Sequence[Token]) -> bool:
    """ALTER MATERIALIZED TABLE name AS ...: AS right after the name. An AS further on is
    inside a policy's expression (CAST(x AS STRING)), which needs no Spark."""
    index = 1
    while index < len(tokens) and _words(tokens[index])[:1] in (["MATERIALIZED"], ["TABLE"]):
        index += 1
    index += 1  # the name's first part
    while index + 1 < len(tokens) and tokens[index].token_type == TokenType.DOT:
        index += 2
    return index < len(tokens) and _words(tokens[index]) == ["AS"]


def leading_words(statement: str, count: int) -> list[str]:
    """The first `count` keywords of a statement, upper-cased (cheap: tokens only, nothing
    parsed); fewer when a name, a string or the end comes first; [] when it does not
    tokenize."""
    try:
        tokens = _tokenize(statement)
    except SqlError:
        return []
    return _leading_words(tokens, count)


def _leading_words(tokens: Sequence[Token], count: int) -> list[str]:
    words: list[str] = []
    for token in tokens:
        read = _words(token)
        if not read:
            break
        words.extend(read)
        if len(words) >= count:
            break
    return words[:count]


# -- reading tokens ----------------------------------------------------------------------------


class _Reader:
    """A cursor over one statement's tokens that knows where each one is."""

    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text, self.tokens, self.index = text, tokens, 0

    # where, and what is there

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.index + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def next(self) -> Token:
        token = self.peek()
        if token is None:
            raise self.error("Unexpected end of the statement", None)
        self.index += 1
        return token

    def error(self, message: str, token: Token | None) -> SqlError:
        """A SqlError placed at `token`, or just after the last token when it is None."""
        if token is None:
            return self.at_end(message)
        line, column = _position(self.text, token.start)
        return SqlError(message, line=line, column=column)

    def at_end(self, message: str) -> SqlError:
        """A SqlError placed just after the statement's last token."""
        offset = self.tokens[-1].end + 1 if self.tokens else 0
        line, column = _position(self.text, offset)
        return SqlError(message, line=line, column=column)

    def fail(self, message: str) -> SqlError:
        """A SqlError placed at the next token."""
        return self.error(message, self.peek())

    @staticmethod
    def shown(token: Token | None) -> str:
        if token is None:
            return "the end of the statement"
        return repr(token.text)

    def expected(self, what: str) -> SqlError:
        return self.fail(f"Expected {what}, found {self.shown(self.peek())}")

    # keywords

    def _match(self, phrase: str) -> int:
        """How many tokens the words of `phrase` take if they come next, else 0."""
        wanted, seen, count = phrase.split(), [], 0
        while len(seen) < len(wanted):
            token = self.peek(count)
            words = _words(token) if token is not None else []
            if not words:
                return 0
            seen += words
            count += 1
        return count if seen == wanted else 0

    def at(self, phrase: str) -> bool:
        return self._match(phrase) > 0

    def accept(self, phrase: str) -> bool:
        count = self._match(phrase)
        self.index += count
        return count > 0

    def expect(self, phrase: str, what: str | None = None) -> None:
        if not self.accept(phrase):
            raise self.expected(what or phrase)

    def at_type(self, token_type: TokenType) -> bool:
        token = self.peek()
        return token is not None and token.token_type == token_type

    def take(self, token_type: TokenType, what: str) -> Token:
        if not self.at_type(token_type):
            raise self.expected(what)
        return self.next()

    def finish(self) -> None:
        if self.peek() is not None:
            raise self.fail(f"Unexpected {self.shown(self.peek())} after the statement")

    def place(self, token: Token) -> tuple[int, int]:
        """The 1-based line and column of `token` in the script."""
        return _position(self.text, token.start)

    def expression(self, first: Token, last: Token) -> str:
        """The text from `first` to `last`, as written, once sqlglot has read it as one Spark
        expression (a policy's: refresh.core.policy_statements); a refusal at its place."""
        node = _parse_spark(self, first, last.end + 1, (exp.Expression,), "an expression")
        if isinstance(node, exp.Alias):
            raise self.error("Expected one expression, found two side by side (an alias)", first)
        if not isinstance(node, exp.Condition | exp.Subquery | exp.Interval):
            raise self.error(f"Expected an expression, found {node.key.upper()}", first)
        return self.text[first.start : last.end + 1]

    # values

    def string(self, what: str) -> str:
        """A string literal; adjacent literals join, as in Spark ('a' 'b' is 'ab')."""
        parts = [self.take(TokenType.STRING, what).text]
        while self.at_type(TokenType.STRING):
            parts.append(self.next().text)
        return "".join(parts)

    def identifier(self, what: str) -> str:
        """A simple name: a word (a keyword too: `date` may name a column) or a `quoted` one."""
        token = self.peek()
        quoted = token is not None and token.token_type == TokenType.IDENTIFIER
        if not quoted and (token is None or not token.text.isidentifier()):
            raise self.expected(what)
        return self.next().text

    def name(self, what: str = "a materialized table name") -> Name:
        """[catalog.][namespace.]name"""
        parts = [self.identifier(what)]
        while self.at_type(TokenType.DOT):
            self.next()
            parts.append(self.identifier("a name after '.'"))
        return tuple(parts)

    def in_parens(self, read_item: Callable[[], _T], *, allow_empty: bool = False) -> list[_T]:
        """'(' item {',' item} ')', each item read by `read_item`."""
        self.take(TokenType.L_PAREN, "'('")
        items = []
        if not (allow_empty and self.at_type(TokenType.R_PAREN)):
            items.append(read_item())
            while self.at_type(TokenType.COMMA):
                self.next()
                items.append(read_item())
        self.take(TokenType.R_PAREN, "')'" if not items else "',' or ')'")
        return items

    def column_list(self, what: str) -> tuple[str, ...]:
        """(a, b, ...) of simple names, none twice."""
        items = self.in_parens(lambda: (self.peek(), self.identifier(f"a {what}")))
        return tuple(_unique(self, items, what))

    def options(self) -> tuple[dict[str, str], dict[str, tuple[Token, Token]]]:
        """('k' = 'v', ...), possibly empty as Flink allows, and where each key and value
        was; a key given twice is refused."""

        def option() -> tuple[Token, str, Token, str]:
            key_token = self.peek()
            key = self.string("a quoted option name, as in 'key' = 'value'")
            self.take(TokenType.EQ, f"'=' after {key!r}")
            value_token = self.peek()
            return key_token, key, value_token, self.string(f"a quoted value for {key!r}")

        found: dict[str, str] = {}
        where: dict[str, tuple[Token, Token]] = {}
        for key_token, key, value_token, value in self.in_parens(option, allow_empty=True):
            if key in found:
                raise self.error(f"Duplicate option {key!r}", key_token)
            found[key], where[key] = value, (key_token, value_token)
        return found, where

    def option_keys(self) -> tuple[str, ...]:
        """('k', ...) for RESET, possibly empty as Flink allows."""
        items = self.in_parens(
            lambda: (self.peek(), self.string("a quoted option name")), allow_empty=True
        )
        return tuple(_unique(self, items, "option"))

    def partition_spec(self) -> dict[str, str]:
        """(k = 'v', ...): values stay data (a number, which Flink's parser also takes, keeps
        the text it was written with)."""

        def pair() -> tuple[Token, str, str]:
            key_token = self.peek()
            key = self.identifier("a partition column")
            self.take(TokenType.EQ, f"'=' after {key}")
            return key_token, key, self.partition_value(key)

        spec: dict[str, str] = {}
        for key_token, key, value in self.in_parens(pair):
            if key in spec:
                raise self.error(f"Duplicate partition column {key!r}", key_token)
            spec[key] = value
        return spec

    def partition_value(self, key: str) -> str:
        if self.at_type(TokenType.STRING):
            return self.string("")
        sign = self.next().text if self.at_type(TokenType.DASH) else ""
        if self.at_type(TokenType.NUMBER):
            return sign + self.next().text
        raise self.expected(f"a quoted value for {key}, as in {key} = '2024-01-01'")

    # FRESHNESS and REFRESH_MODE

    def freshness(self) -> tuple[Freshness, Token]:
        """`= INTERVAL '<n>' <unit>`, checked in Flink's order (MaterializedTableUtils, then
        IntervalFreshness): a negative sign, then the unit, then the value; returns the
        freshness and its value's token."""
        self.take(TokenType.EQ, "'=' after FRESHNESS")
        if not self.accept("INTERVAL"):
            raise self.fail(INTERVAL_ONLY)
        sign = self.next() if self.at_type(TokenType.DASH) or self.at_type(TokenType.PLUS) else None
        if not self.at_type(TokenType.STRING):  # INTERVAL 3 MINUTE: not an interval literal
            raise self.fail(INTERVAL_ONLY)
        value_token = self.next()
        value = value_token.text
        unit_token, unit = self.peek(), self._interval_unit()
        if sign is not None and sign.token_type == TokenType.DASH:
            raise self.error(NEGATIVE_FRESHNESS, sign)
        if unit is None:
            raise self.error(UNSUPPORTED_UNIT, unit_token)
        try:
            return Freshness.parse(value, unit), value_token
        except InvalidInput as error:
            raise self.error(error.message, value_token) from None

    _INTERVAL_UNITS = frozenset(
        ["YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND",
         "MICROSECOND", "YEARS", "MONTHS", "WEEKS", "DAYS", "HOURS", "MINUTES", "SECONDS"]
    )  # fmt: skip

    def _interval_unit(self) -> str | None:
        """The unit of an interval literal, consumed with any `TO <unit>`; None unless it is
        one Flink supports (SECOND, MINUTE, HOUR, DAY: a single day-time unit)."""
        token = self.peek()
        words = _words(token) if token is not None else []
        if len(words) != 1 or words[0] not in self._INTERVAL_UNITS:
            return None
        self.next()
        if self.accept("TO"):  # DAY TO HOUR: a compound unit, refused like YEAR
            if self.peek() is not None and _words(self.peek()):
                self.next()
            return None
        # Flink's parser reads a plural unit as the singular (INTERVAL '3' DAYS is 3 DAY).
        unit = words[0].removesuffix("S") if words[0].endswith("S") else words[0]
        return unit if unit in ("SECOND", "MINUTE", "HOUR", "DAY") else None

    def refresh_mode(self) -> RefreshMode:
        self.take(TokenType.EQ, "'=' after REFRESH_MODE")
        token = self.peek()
        words = _words(token) if token is not None else []
        if words not in (["CONTINUOUS"], ["FULL"]):
            raise self.expected("CONTINUOUS or FULL")
        self.next()
        return RefreshMode(words[0])


def _unique(reader: _Reader, items: list[tuple[Token, str]], what: str) -> list[str]:
    seen: list[str] = []
    for token, item in items:
        if item in seen:
            raise reader.error(f"Duplicate {what} {item!r}", token)
        seen.append(item)
    return seen


# -- statements --------------------------------------------------------------------------------


def parse_statement(text: str, *, threshold: timedelta = DEFAULT_THRESHOLD) -> Statement:
    """One statement (a trailing semicolon is fine). `threshold` is Flink's
    `materialized-table.refresh-mode.freshness-threshold`: a CREATE whose mode comes out
    FULL must have a freshness a cron can express, as Flink checks at CREATE."""
    return _parse(text, _tokenize(text), threshold)


def _parse(text: str, tokens: list[Token], threshold: timedelta) -> Statement:
    end = _statement_end(text, tokens)
    tokens = [token for token in tokens if token.start < end]
    if tokens:  # a trailing comment is not part of a query someone may wrap in SQL
        end = tokens[-1].end + 1
    reader = _Reader(text, tokens)
    first = reader.peek()
    if first is None:
        raise SqlError("The statement is empty", line=1, column=1)
    keyword = _words(first)[:1]
    kind = _query_kind(tokens)
    if kind is not None:
        return Query(kind, text[first.start : end].strip(), text[:end])
    second = reader.peek(1)
    leading = _words(first) + (_words(second) if second else [])
    if grants.starts_a_grant_statement(leading):
        return grants.parse(reader)
    if policies.starts_a_policy_statement(leading):
        return policies.parse(reader)
    if keyword == ["CREATE"]:
        return _create(reader, end, threshold)
    if keyword == ["ALTER"]:
        return _alter(reader, end)
    if keyword == ["DROP"]:
        return _drop(reader)
    if keyword in (["DESCRIBE"], ["DESC"]):
        return _describe_job(reader)
    if keyword == ["SHOW"]:
        return _show(reader)
    if keyword in (["UPDATE"], ["DELETE"], ["MERGE"]):
        return _data_change(reader, end)
    head = text[first.start : tokens[min(len(tokens), 3) - 1].end + 1]
    head = head if len(head) <= 40 else head[:40] + "..."
    raise reader.error(f"Unknown statement: {head!r}; expected {STATEMENTS}", first)


def parse_script(script: str, *, threshold: timedelta = DEFAULT_THRESHOLD) -> list[Statement]:
    """Every statement of a script, errors placed in the script's own lines and columns."""
    return [part.parse(threshold=threshold) for part in read_script(script)]


def _statement_end(text: str, tokens: list[Token]) -> int:
    """Where the statement ends: its first semicolon, after which only semicolons may come
    (a script goes through `split_statements` or `parse_script`)."""
    for index, token in enumerate(tokens):
        if token.token_type == TokenType.SEMICOLON:
            for after in tokens[index + 1 :]:
                if after.token_type != TokenType.SEMICOLON:
                    line, column = _position(text, after.start)
                    raise SqlError(
                        "Only one statement is read here: split a script into statements",
                        line=line,
                        column=column,
                    )
            return token.start
    return len(text)


def _create(reader: _Reader, end: int, threshold: timedelta) -> CreateMaterializedTable:
    """CREATE [OR ALTER] MATERIALIZED TABLE name [(schema part)] [COMMENT] [DISTRIBUTED BY]
    [PARTITIONED BY] [WITH] FRESHNESS [REFRESH_MODE] AS query, the clauses in that order as
    Flink's grammar has it."""
    reader.next()
    or_alter = reader.accept("OR ALTER")
    replace = not or_alter and reader.accept("OR REPLACE")
    temporary = reader.accept("TEMPORARY")
    materialized = reader.peek()
    reader.expect("MATERIALIZED TABLE", "MATERIALIZED TABLE after CREATE")
    # Flink's parser refuses both, at MATERIALIZED.
    if temporary:
        raise reader.error("CREATE TEMPORARY MATERIALIZED TABLE is not supported.", materialized)
    if replace:
        raise reader.error("REPLACE MATERIALIZED TABLE is not supported.", materialized)
    name = reader.name()
    constraint_name, primary_key, columns, expectations = None, (), (), ()
    if reader.at_type(TokenType.L_PAREN):
        constraint_name, primary_key, columns, expectations = _schema_part(reader)
    clauses = _create_clauses(reader)
    refresh_mode = clauses.get("REFRESH_MODE")
    # Flink 2.x: FRESHNESS may be left out; the defaults are Flink's
    # (materialized-table.default-freshness.full / .continuous).
    default = DEFAULT_FULL_FRESHNESS if refresh_mode is RefreshMode.FULL else (
        DEFAULT_CONTINUOUS_FRESHNESS
    )  # fmt: skip
    freshness, freshness_token = clauses.get("FRESHNESS", (default, None))
    options, option_tokens = clauses.get("WITH", ({}, {}))
    statement = CreateMaterializedTable(
        name=name,
        freshness=freshness,
        query=_query(reader, end),
        refresh_mode=refresh_mode,
        primary_key=primary_key,
        constraint_name=constraint_name,
        comment=clauses.get("COMMENT"),
        partitioned_by=clauses.get("PARTITIONED BY", ()),
        options=options,
        or_alter=or_alter,
        columns=columns,
        distribution=clauses.get("DISTRIBUTED BY"),
        expectations=expectations,
    )
    _check_formatters(reader, statement, option_tokens)
    try:
        plan_refresh(freshness, statement.refresh_mode, threshold)
    except InvalidInput as error:  # Flink's cron refusals, placed at the interval
        raise reader.error(error.message, freshness_token) from None
    return statement


def _schema_part(
    reader: _Reader,
) -> tuple[str | None, tuple[str, ...], tuple[ColumnDefinition, ...], tuple[Expectation, ...]]:
    """( element, ... ): columns (names only, or each with its type, NOT NULL and COMMENT;
    FLIP-550), at most one [CONSTRAINT name] PRIMARY KEY (columns) NOT ENFORCED, and
    expectations, CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]
    (Databricks' place for them). Watermarks, computed and metadata columns and UNIQUE are
    refused: Spark refreshes the table and it has none of them."""
    reader.next()
    constraint: tuple[str | None, tuple[str, ...]] | None = None
    columns: list[ColumnDefinition] = []
    where: list[Token] = []
    expectations: list[tuple[Token, Expectation]] = []
    while True:
        start = reader.peek()
        if reader.at("CONSTRAINT") and _words(reader.peek(2) or start) == ["EXPECT"]:
            expectations.append((reader.peek(1), _expectation(reader)))
        elif reader.at("CONSTRAINT") or reader.at("PRIMARY KEY") or reader.at("UNIQUE"):
            if constraint is not None:
                raise reader.error("A materialized table has at most one PRIMARY KEY", start)
            constraint = _constraint(reader)
        elif reader.at("WATERMARK"):
            raise reader.error(
                "WATERMARK is not supported: Spark refreshes a materialized table here, "
                "without event-time watermarks",
                start,
            )
        else:
            columns.append(_column(reader, columns))
            where.append(start)
        if reader.at_type(TokenType.COMMA):
            reader.next()
            continue
        reader.take(TokenType.R_PAREN, "',' or ')'")
        break
    seen: list[str] = []
    for token, column in zip(where, columns, strict=True):
        if column.name in seen:
            raise reader.error(f"Duplicate column '{column.name}'", token)
        seen.append(column.name)
    constraint_name, primary_key = constraint or (None, ())
    names: list[str] = [constraint_name.lower()] if constraint_name else []
    for token, expectation in expectations:
        if expectation.name.lower() in names:  # Databricks: unique for a dataset
            raise reader.error(f"Duplicate constraint name '{expectation.name}'", token)
        names.append(expectation.name.lower())
    return constraint_name, primary_key, tuple(columns), tuple(e for _, e in expectations)


def _expectation(reader: _Reader) -> Expectation:
    """CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]: the
    condition is the text inside the parentheses (balanced), read by sqlglot as one
    row-level Spark expression (refresh.core.expectations.parse_condition)."""
    reader.next()
    name = reader.identifier("a constraint name")
    reader.next()  # EXPECT
    opening = reader.peek()
    if opening is None or opening.token_type != TokenType.L_PAREN:
        raise reader.expected(f"'(' and a condition after EXPECT of expectation '{name}'")
    reader.next()
    first, depth = reader.peek(), 1
    while True:
        token = reader.peek()
        if token is None:
            raise reader.error(
                f"The condition of expectation '{name}' is not closed: expected ')' for this '('",
                opening,
            )
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                break
        reader.next()
    closing = reader.next()
    if first is closing:
        raise reader.error(f"Expectation '{name}' needs a condition inside EXPECT ( )", closing)
    condition = reader.text[first.start : reader.tokens[reader.index - 2].end + 1]
    try:
        parse_condition(condition)
    except InvalidInput as error:
        raise reader.error(f"Expectation '{name}': {error.message}", first) from None
    action = None
    if reader.accept("ON VIOLATION"):
        token = reader.peek()
        action = next((a for a in ACTIONS if reader.accept(a)), None)
        if action is None:
            raise reader.error(
                f"Expected DROP ROW or FAIL UPDATE after ON VIOLATION, found {reader.shown(token)}",
                token,
            )
    return Expectation(name, condition, action)


#: What may follow a column's name in the schema part, and what ends its type.
_COLUMN_END = ("NOT NULL", "NULL", "COMMENT")


def _column(reader: _Reader, before: list[ColumnDefinition]) -> ColumnDefinition:
    """name [type [NOT NULL | NULL] [COMMENT 'text']]; every column typed, or none."""
    name = reader.identifier("a column name, [CONSTRAINT name] PRIMARY KEY (...) NOT ENFORCED")
    typed = bool(before) and before[0].type is not None
    after = reader.peek()
    if after is None or after.token_type in (TokenType.COMMA, TokenType.R_PAREN):
        if typed:
            raise reader.expected(f"a type for column '{name}' (every column is typed, or none)")
        return ColumnDefinition(name)
    if before and not typed:
        raise reader.fail(
            f"Expected ',' or ')', found {reader.shown(after)}: a list of column names gives "
            "no types (every column is typed, or none)"
        )
    type_start, depth = after, 0
    while True:
        token = reader.peek()
        if token is None:
            break
        kind = token.token_type
        if depth == 0 and (
            kind in (TokenType.COMMA, TokenType.R_PAREN)
            or any(reader.at(word) for word in _COLUMN_END)
        ):
            break
        if depth == 0 and _words(token)[:1] in (["AS"], ["METADATA"]):
            what = "Computed" if _words(token)[0] == "AS" else "Metadata"
            raise reader.error(
                f"{what} columns are not supported: a materialized table's columns are its query's",
                token,
            )
        if kind in (TokenType.L_PAREN, TokenType.LT):
            depth += 1
        elif kind in (TokenType.R_PAREN, TokenType.GT):
            depth -= 1
        reader.next()
    last = reader.tokens[reader.index - 1]
    type_text = reader.text[type_start.start : last.end + 1]
    try:
        declared_type(type_text)
    except InvalidInput as error:
        raise reader.error(f"{error.message} for column '{name}'", type_start) from None
    not_null = reader.accept("NOT NULL")
    if not not_null:
        reader.accept("NULL")
    comment = reader.string("a quoted comment") if reader.accept("COMMENT") else None
    return ColumnDefinition(name, type_text, not_null, comment)


def _constraint(reader: _Reader) -> tuple[str | None, tuple[str, ...]]:
    """[CONSTRAINT name] PRIMARY KEY (columns) NOT ENFORCED."""
    start = reader.peek()
    constraint_name = None
    if reader.accept("CONSTRAINT"):
        constraint_name = reader.identifier("a constraint name")
    if reader.at("UNIQUE"):  # SqlConstraintValidator
        raise reader.error("UNIQUE constraint is not supported yet", start)
    if not reader.accept("PRIMARY KEY"):
        raise reader.expected("PRIMARY KEY (...) NOT ENFORCED after the constraint's name")
    primary_key = reader.column_list("primary key column")
    if not reader.accept("NOT ENFORCED"):  # SqlConstraintValidator
        raise reader.error(ENFORCED_UNSUPPORTED, start)
    return constraint_name, primary_key


def _distribution(reader: _Reader) -> Distribution:
    """[HASH] (columns) INTO n BUCKETS (FLIP-542); RANGE and a missing bucket count have no
    Iceberg partition field to become."""
    token = reader.peek()
    if reader.accept("RANGE"):
        raise reader.error(
            "DISTRIBUTED BY RANGE is not supported: Iceberg buckets hash their columns; write "
            "DISTRIBUTED BY HASH (...) INTO <n> BUCKETS",
            token,
        )
    reader.accept("HASH")
    if not reader.at_type(TokenType.L_PAREN):
        raise reader.expected("HASH (columns) or (columns) after DISTRIBUTED BY")
    columns = reader.column_list("distribution column")
    if not reader.accept("INTO"):
        raise reader.expected(
            "INTO <n> BUCKETS (an Iceberg bucket partition field has a fixed number of buckets)"
        )
    count = reader.peek()
    # ASCII digits only: str.isdigit also takes '²' (which int() refuses) and other scripts'
    # digits, which Spark would not read.
    if (
        count is None
        or count.token_type != TokenType.NUMBER
        or not (count.text.isascii() and count.text.isdigit())
    ):
        raise reader.expected("a number of buckets")
    reader.next()
    # The length first: int() refuses a text of over 4,300 digits (a ValueError, not ours).
    if len(count.text.lstrip("0")) > 10 or not 1 <= int(count.text) <= 2**31 - 1:
        raise reader.error(
            f"The number of buckets must be a positive integer, not {count.text}", count
        )
    reader.expect("BUCKETS", "BUCKETS")
    return Distribution(columns, int(count.text))


#: The optional clauses and FRESHNESS, in the one order Flink's grammar reads them.
_CLAUSES = (
    "COMMENT", "DISTRIBUTED BY", "PARTITIONED BY", "WITH", "FRESHNESS", "REFRESH_MODE", "AS"
)  # fmt: skip
_SHOWN = {"FRESHNESS": FRESHNESS_SYNTAX, "AS": "AS <query>"}


def _create_clauses(reader: _Reader) -> dict:
    """Read the clauses up to and including AS, refusing a clause out of Flink's order, a
    clause given twice, and a missing FRESHNESS."""
    values: dict = {}
    allowed_from = 0
    while True:
        token = reader.peek()
        clause = next((c for c in _CLAUSES if reader.at(c)), None)
        if clause is None:
            raise reader.expected(_clause_choices(allowed_from))
        if clause in values:
            raise reader.error(f"{clause} is given twice", token)
        if _CLAUSES.index(clause) < allowed_from:
            later = _CLAUSES[allowed_from - 1]
            raise reader.error(
                f"{clause} must come before {later}: the clauses go in the order "
                f"{', '.join(_CLAUSES[:-1])}, AS",
                token,
            )
        reader.accept(clause)
        allowed_from = _CLAUSES.index(clause) + 1
        if clause == "AS":
            return values
        values[clause] = _read_clause(reader, clause)


def _clause_choices(allowed_from: int) -> str:
    choices = list(_CLAUSES[allowed_from:])
    shown = [_SHOWN.get(choice, choice) for choice in choices]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _read_clause(reader: _Reader, clause: str) -> object:
    if clause == "COMMENT":
        return reader.string("a quoted comment")
    if clause == "PARTITIONED BY":
        return reader.column_list("partition column")
    if clause == "DISTRIBUTED BY":
        return _distribution(reader)
    if clause == "WITH":
        return reader.options()
    if clause == "FRESHNESS":
        return reader.freshness()
    return reader.refresh_mode()


def _check_formatters(
    reader: _Reader, statement: CreateMaterializedTable, where: Mapping[str, tuple[Token, Token]]
) -> None:
    """Flink's create-time check of `partition.fields.<col>.date-formatter` (it must name a
    partition column; placed at the key), and ours that its pattern translates (placed at
    the pattern)."""
    for key, pattern in statement.options.items():
        key_token, value_token = where[key]
        try:
            column = check_formatter_column(key, statement.partitioned_by)
        except InvalidInput as error:
            raise reader.error(error.message, key_token) from None
        if column is None:
            continue
        try:
            compile_pattern(pattern)
        except InvalidInput as error:
            raise reader.error(error.message, value_token) from None


def _alter(reader: _Reader, end: int) -> Statement:
    reader.next()
    reader.expect("MATERIALIZED TABLE", "MATERIALIZED TABLE after ALTER")
    name = reader.name()
    if policies.at_clause(reader):  # a materialized table's row filter and masks
        return policies.clause(reader, name)
    statement: Statement
    if reader.accept("AS"):
        return AlterQuery(name, _query(reader, end))
    if reader.accept("SUSPEND"):
        statement = Suspend(name)
    elif reader.accept("RESUME"):
        statement = Resume(name, reader.options()[0] if reader.accept("WITH") else {})
    elif reader.accept("REFRESH"):
        statement = Refresh(name, reader.partition_spec() if reader.accept("PARTITION") else {})
    elif reader.accept("SET FRESHNESS"):
        statement = SetFreshness(name, reader.freshness()[0])
    elif reader.accept("SET REFRESH_MODE"):
        statement = SetRefreshMode(name, reader.refresh_mode())
    elif reader.accept("SET"):
        if not reader.at_type(TokenType.L_PAREN):
            raise reader.expected("FRESHNESS, REFRESH_MODE or ('key' = 'value', ...) after SET")
        statement = SetOptions(name, reader.options()[0])
    elif reader.accept("RESET"):
        statement = ResetOptions(name, reader.option_keys())
    else:
        raise reader.expected(
            "SUSPEND, RESUME, REFRESH, SET FRESHNESS, SET REFRESH_MODE, SET (...), RESET (...) "
            "or AS <query>"
        )
    reader.finish()
    return statement


def _drop(reader: _Reader) -> DropMaterializedTable:
    reader.next()
    temporary = reader.accept("TEMPORARY")
    materialized = reader.peek()
    reader.expect("MATERIALIZED TABLE", "MATERIALIZED TABLE after DROP")
    if temporary:  # Flink's parser, at MATERIALIZED
        raise reader.error("DROP TEMPORARY MATERIALIZED TABLE is not supported.", materialized)
    if_exists = reader.accept("IF EXISTS")
    statement = DropMaterializedTable(reader.name(), if_exists=if_exists)
    reader.finish()
    return statement


def _describe_job(reader: _Reader) -> DescribeJob:
    """{DESCRIBE | DESC} JOB '<id>': Flink quotes the id; a bare one is taken too."""
    reader.next()
    reader.expect("JOB", "JOB after DESCRIBE")
    token = reader.peek()
    kinds = (TokenType.STRING, TokenType.NUMBER, TokenType.IDENTIFIER, TokenType.VAR)
    if token is None or token.token_type not in kinds:
        raise reader.expected("a job id, as in DESCRIBE JOB '<id>'")
    reader.next()
    reader.finish()
    return DescribeJob(token.text)


def _show(reader: _Reader) -> ShowMaterializedTables | ShowCreateMaterializedTable:
    reader.next()
    if reader.accept("CREATE"):
        reader.expect("MATERIALIZED TABLE", "MATERIALIZED TABLE after SHOW CREATE")
        show_create = ShowCreateMaterializedTable(reader.name())
        reader.finish()
        return show_create
    reader.expect("MATERIALIZED TABLES", "MATERIALIZED TABLES or CREATE after SHOW")
    namespace: Name = ()
    if reader.accept("IN") or reader.accept("FROM"):
        namespace = reader.name("a namespace")
    reader.finish()
    return ShowMaterializedTables(namespace)


def _data_change(reader: _Reader, end: int) -> DataChange:
    """UPDATE name ... / DELETE FROM name ... / MERGE INTO name ...: the target from the
    tokens, the whole checked by sqlglot as one Spark UPDATE, DELETE or MERGE (and again by
    Spark's own analyzer in the worker's sandbox, which has the last word)."""
    first = reader.next()
    kind = first.text.upper()
    if kind == "DELETE":
        reader.expect("FROM", "FROM after DELETE")
    elif kind == "MERGE":
        reader.expect("INTO", "INTO after MERGE")
    target = reader.name("a table name")
    article = "a" if kind == "MERGE" else "an"
    _parse_spark(reader, first, end, (exp.Update, exp.Delete, exp.Merge), f"{article} {kind}")
    return DataChange(kind, target, reader.text[first.start : end].strip())


def _query(reader: _Reader, end: int) -> str:
    """The text after AS: one Spark query (SELECT, a set operation, WITH ... SELECT)."""
    first = reader.peek()
    if first is None:
        raise reader.error("Expected a query after AS", None)
    _parse_spark(reader, first, end, (exp.Query,), "a SELECT (or a set operation, or WITH)")
    return reader.text[first.start : end].strip()


def _parse_spark(
    reader: _Reader, first: Token, end: int, kinds: tuple[type, ...], what: str
) -> exp.Expression:
    """Parse text[first:end] as one Spark statement of one of `kinds`; sqlglot reads it
    with what comes before blanked, so its lines and columns are the statement's."""
    padded = _blank(reader.text[: first.start]) + reader.text[first.start : end]
    try:
        parsed = [node for node in sqlglot.parse(padded, read="spark") if node is not None]
    except ParseError as error:
        raise _parse_error(error) from None
    except TokenError:
        raise reader.error("Cannot read the SQL", first) from None
    except (SqlglotError, RecursionError, LookupError, ValueError, TypeError, AttributeError):
        # sqlglot fails in these ways on some malformed input (deep nesting, a construct
        # it half knows): the SQL is refused, not the caller crashed.
        raise reader.error("Cannot parse the SQL as Spark SQL", first) from None
    if len(parsed) != 1 or not isinstance(parsed[0], kinds):
        found = parsed[0].key.upper() if parsed else "nothing"
        raise reader.error(f"Expected {what}, found {found}", first)
    return parsed[0]


def _parse_error(error: ParseError) -> SqlError:
    """sqlglot's first complaint, placed at the start of the token it highlights."""
    details = error.errors[0] if error.errors else {}
    message = str(details.get("description") or error)[:200]
    highlight = details.get("highlight") or ""
    line, column = details.get("line"), details.get("col")
    if highlight:
        message = f"{message} near {highlight[:100]!r}"
        if column is not None and "\n" not in highlight:
            column = max(1, column - len(highlight) + 1)
    return SqlError(f"The SQL does not parse as Spark SQL: {message}", line=line, column=column)


# -- values into SQL ---------------------------------------------------------------------------


def partition_condition(partition: Mapping[str, str]) -> exp.Expression | None:
    """`k1 = 'v1' AND ...` as a sqlglot expression: names quoted, values string literals."""
    conditions = [
        exp.EQ(this=exp.column(key, quoted=True), expression=exp.Literal.string(value))
        for key, value in partition.items()
    ]
    return exp.and_(*conditions) if conditions else None


def partition_predicate(partition: Mapping[str, str], *, dialect: str = "spark") -> str:
    """The partition as SQL text, every value a literal sqlglot escapes (quotes,
    backslashes, semicolons, comment markers stay inside it), never spliced text."""
    condition = partition_condition(partition)
    return condition.sql(dialect=dialect) if condition is not None else ""


# -- SHOW CREATE MATERIALIZED TABLE ------------------------------------------------------------


@dataclass(frozen=True)
class TableColumn:
    """A column of the table as its Iceberg schema has it."""

    name: str
    #: The Iceberg type (REST JSON: a string, or a list/map/struct object).
    type: object
    required: bool = False
    doc: str | None = None


def show_create(
    name: Name,
    *,
    columns: Sequence[TableColumn],
    query: str,
    freshness: Freshness,
    refresh_mode: RefreshMode | None = None,
    primary_key: Sequence[str] = (),
    constraint_name: str | None = None,
    comment: str | None = None,
    distribution: Distribution | None = None,
    partitioned_by: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    expectations: Sequence[Expectation] = (),
) -> str:
    """The CREATE OR ALTER statement that defines the table as it is: its schema part (every
    column with its type, NOT NULL and comment, and the primary key), each clause in Flink's
    order, the query as stored. Reading it back (`parse_statement`) gives this definition,
    and applying it to the table changes nothing. Names are quoted, strings escaped."""
    lines = [f"CREATE OR ALTER MATERIALIZED TABLE {'.'.join(quote_name(p) for p in name)} ("]
    elements = []
    for column in columns:
        text = f"  {quote_name(column.name)} {render_type(column.type)}"
        text += " NOT NULL" if column.required else ""
        text += f" COMMENT {quote_string(column.doc)}" if column.doc else ""
        elements.append(text)
    if primary_key:
        named = f"CONSTRAINT {quote_name(constraint_name)} " if constraint_name else ""
        keys = ", ".join(quote_name(key) for key in primary_key)
        elements.append(f"  {named}PRIMARY KEY ({keys}) NOT ENFORCED")
    elements += [f"  {expectation.clause}" for expectation in expectations]
    lines += [",\n".join(elements), ")"]
    if comment:
        lines.append(f"COMMENT {quote_string(comment)}")
    if distribution is not None:
        keys = ", ".join(quote_name(key) for key in distribution.columns)
        lines.append(f"DISTRIBUTED BY HASH ({keys}) INTO {distribution.buckets} BUCKETS")
    if partitioned_by:
        lines.append(f"PARTITIONED BY ({', '.join(quote_name(key) for key in partitioned_by)})")
    if options:
        pairs = ",\n".join(
            f"  {quote_string(key)} = {quote_string(value)}" for key, value in options.items()
        )
        lines.append(f"WITH (\n{pairs}\n)")
    lines.append(f"FRESHNESS = {freshness}")
    if refresh_mode is not None:
        lines.append(f"REFRESH_MODE = {refresh_mode.value}")
    lines.append(f"AS {query}")
    return "\n".join(lines)
