"""What a reader asks a table for, parsed and checked against the read's schema: a row
filter in pyiceberg's expression language (`id > 5 and name like 'a%'`), parsed by
pyiceberg's parser and bound to the schema (it never becomes SQL text), and a choice of
columns. Bad input is an InvalidInput that names what is wrong and where. Django-free."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from catalog.core.errors import InvalidInput

#: Longest row filter accepted (a filter is typed by a person; a megabyte of one is not).
MAX_ROW_FILTER_LENGTH = 2000


def parse_row_filter(
    text: str | None, schema: Schema, *, case_sensitive: bool = True
) -> BooleanExpression:
    """The row filter `text` (pyiceberg's expression syntax) as an unbound expression that
    binds to `schema`; AlwaysTrue for no filter. InvalidInput (field "row_filter") names
    what is wrong and where: the position of a syntax error, an unknown column, a value that
    does not fit its column's type."""
    if text is None or not text.strip():
        return AlwaysTrue()
    if len(text) > MAX_ROW_FILTER_LENGTH:
        raise InvalidInput(
            f"The row filter is too long ({len(text)} characters, at most {MAX_ROW_FILTER_LENGTH})",
            field="row_filter",
        )
    if "\x00" in text:
        raise InvalidInput("The row filter contains a NUL character", field="row_filter")
    from pyparsing import ParseBaseException

    # Structure first: it is checked in one pass, and pyparsing takes seconds over thousands
    # of nested parentheses.
    problem = _structure_problem(text)
    try:
        if problem is not None:
            raise _Malformed(*problem)
        expression = _parse(text)
    except _Malformed as error:
        raise InvalidInput(
            _where(text, error.position, error.problem), field="row_filter"
        ) from None
    except ParseBaseException as error:
        position, what = _diagnose(text) or (error.loc, "this is not a filter")
        raise InvalidInput(_where(text, position, what), field="row_filter") from error
    except RecursionError as error:
        raise InvalidInput("The row filter is nested too deeply", field="row_filter") from error
    except (ValueError, TypeError) as error:  # raised by pyiceberg's parse actions (LIKE)
        raise InvalidInput(f"Malformed row filter: {error}", field="row_filter") from error
    try:
        bind(schema, expression, case_sensitive=case_sensitive)
    except ValueError as error:
        raise InvalidInput(_binding_problem(error, schema), field="row_filter") from error
    except (TypeError, AttributeError, NotImplementedError) as error:
        # A literal the column's type cannot hold: `id = 'abc'`, `name > 1.5`.
        raise InvalidInput(f"Invalid row filter: {error}", field="row_filter") from error
    return expression


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> BooleanExpression:
    # Parsing takes pyparsing a millisecond or two, a tenth of a warm preview; pages repeat
    # the same filter (paging, time travel), and expressions are immutable.
    from pyiceberg.expressions.parser import parse

    return parse(text)


class _Malformed(Exception):
    def __init__(self, position: int, problem: str) -> None:
        self.position = position
        self.problem = problem


#: Deepest nesting of parentheses accepted.
MAX_FILTER_NESTING = 32

_CONNECTIVE = re.compile(r"(and|or)\b", re.IGNORECASE)
_NOT = re.compile(r"not\b", re.IGNORECASE)
_KEYWORD_HINTS = (
    (re.compile(r"is\b", re.IGNORECASE), "expected null, not null, nan or not nan after 'is'"),
    (re.compile(r"(not\s+)?in\b", re.IGNORECASE), "expected a list of values in parentheses"),
    (re.compile(r"(not\s+)?like\b", re.IGNORECASE), "expected a 'quoted' pattern after 'like'"),
    (re.compile(r"between\b", re.IGNORECASE), "expected 'value and value' after 'between'"),
)


def _where(text: str, position: int, problem: str) -> str:
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    where = f"line {line}, column {column}" if "\n" in text else f"column {column}"
    return f"Malformed row filter at {where}: {problem}"


def _structure_problem(text: str) -> tuple[int, str] | None:
    """Unbalanced quotes and parentheses, and nesting past MAX_FILTER_NESTING."""
    opened: list[int] = []
    quote: tuple[str, int] | None = None
    position = 0
    while position < len(text):
        character = text[position]
        if quote is not None:
            if character == "\\" and quote[0] == '"':
                position += 1  # an escaped character in a quoted column name
            elif character == quote[0]:
                if text.startswith(quote[0] * 2, position):
                    position += 1  # '' inside a text value
                else:
                    quote = None
        elif character in "'\"":
            quote = (character, position)
        elif character == "(":
            opened.append(position)
            if len(opened) > MAX_FILTER_NESTING:
                return position, f"parentheses nest deeper than {MAX_FILTER_NESTING} levels"
        elif character == ")":
            if not opened:
                return position, "')' closes no '('"
            opened.pop()
        position += 1
    if quote is not None:
        return quote[1], f"the quote {quote[0]} is never closed"
    if opened:
        return opened[-1], "'(' is never closed"
    return None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _match_end(element: Any, text: str, position: int) -> int | None:
    """Where `element` of pyiceberg's grammar ends when it matches at `position`."""
    from pyparsing import ParseBaseException

    try:
        return element.try_parse(text, position)
    except (ParseBaseException, IndexError):
        return None


def _found(text: str, position: int) -> str:
    return f", found {_excerpt(text, position)}"


def _diagnose(text: str) -> tuple[int, str] | None:
    """Where a filter pyparsing refused goes wrong, and what was expected there: pyparsing
    reports the start of the failed alternative (often the whole filter) with its grammar
    as the message. Walks the filter condition by condition with pyiceberg's own grammar
    elements."""
    from pyiceberg.expressions import parser as grammar

    position = 0
    while True:
        # Opening parentheses and negations before a condition.
        while True:
            position = _skip_space(text, position)
            if text.startswith("(", position):
                position += 1
            elif _NOT.match(text, position):
                position += 3
            else:
                break
        if position >= len(text):
            return position, "expected a condition"
        end = _match_end(grammar.predicate, text, position)
        if end is None:
            return _diagnose_condition(text, position, grammar)
        position = _skip_space(text, end)
        while text.startswith(")", position):
            position = _skip_space(text, position + 1)
        if position >= len(text):
            return None
        connective = _CONNECTIVE.match(text, position)
        if connective is None:
            return position, "expected 'and', 'or' or the end of the filter" + _found(
                text, position
            )
        position = connective.end()
        if _skip_space(text, position) >= len(text):
            return position, f"expected a condition after '{connective.group(1)}'"


def _diagnose_condition(text: str, position: int, grammar: Any) -> tuple[int, str]:
    column_end = _match_end(grammar.column, text, position)
    if column_end is None:
        return position, "expected a column name" + _found(text, position)
    column = text[position:column_end].strip()
    after = _skip_space(text, column_end)
    if after >= len(text):
        return after, f"expected an operator after {column}"
    operator_end = _match_end(grammar.comparison_op, text, after)
    if operator_end is not None:
        operator = text[after:operator_end].strip()
        value = _skip_space(text, operator_end)
        return value, (
            f"expected a value (a number, a 'quoted' text, true or false) after {operator}"
            + (_found(text, value) if value < len(text) else "")
        )
    for keyword, hint in _KEYWORD_HINTS:
        found = keyword.match(text, after)
        if found:
            return _skip_space(text, found.end()), hint
    return after, (
        f"expected an operator after {column} (=, !=, <, <=, >, >=, in, not in, is null, "
        "is not null, like, between)" + _found(text, after)
    )


def _excerpt(text: str, position: int) -> str:
    shown = text[position : position + 30]
    return repr(shown + ("..." if len(text) > position + 30 else "")) if shown else "the end"


def _binding_problem(error: ValueError, schema: Schema) -> str:
    message = str(error)
    prefix = "Could not find field with name "
    if message.startswith(prefix):
        name = message[len(prefix) :].split(", case_sensitive")[0]
        return f"Unknown column in the row filter: {name}{_suggestion(name, schema)}"
    return f"Invalid row filter: {message}"


def _suggestion(name: str, schema: Schema) -> str:
    names = [column.name for column in schema.columns]
    same = [candidate for candidate in names if candidate.lower() == name.lower()]
    if same:
        return f" (did you mean {same[0]}?)"
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return f" (the columns are: {shown})"


def choose_columns(names: Sequence[str] | None, schema: Schema) -> Schema:
    """The read's projection: the top-level columns named, in the order named (duplicates
    once), or every column for None or an empty choice. InvalidInput (field "columns")
    names an unknown column."""
    if not names:
        return schema
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise InvalidInput("Columns must be a list of column names", field="columns")
    by_name = {column.name: column for column in schema.columns}
    chosen: list[NestedField] = []
    for name in dict.fromkeys(names):
        column = by_name.get(name)
        if column is None:
            raise InvalidInput(
                f"Unknown column: {name}{_suggestion(name, schema)}", field="columns"
            )
        chosen.append(column)
    return Schema(*chosen, schema_id=schema.schema_id)
