"""GRANT, REVOKE and SHOW GRANTS in Unity Catalog's grammar, read from sqlglot's tokens.

    GRANT privilege [, ...] ON securable TO principal
    REVOKE privilege [, ...] ON securable FROM principal
    SHOW GRANTS [principal] [ON securable] [TO principal]

Privileges are the catalog's own (read_metadata, read_data, write_data, create, manage, in
any case) or Unity Catalog's names where one of ours means the same (`UNITY_PRIVILEGES`).
Securables: CATALOG [name], SCHEMA / NAMESPACE / DATABASE name, TABLE / VIEW / MATERIALIZED
TABLE name. Principals: USER name, GROUP name, CREDENTIAL client_id, or a name alone (a
user). Names are words or `quoted`; namespaces and objects are dotted.

sqlglot's own GRANT parser is not used: it reads a few of Unity's forms (no CATALOG
without a name, no ALL PRIVILEGES, no USER/GROUP, no SHOW GRANTS, no MATERIALIZED TABLE)
and falls back to an opaque Command, with no line or column, for the rest. The statement
reader of `refresh.core.statements` is used instead: every refusal is a SqlError at the
token at fault. This module knows no database: the console resolves what the names name
and `catalog.services.grants` decides."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from sqlglot.tokens import TokenType

from catalog.core.access import CREATE, MANAGE, READ_DATA, READ_METADATA, WRITE_DATA
from catalog.core.errors import SqlError

OURS = (READ_METADATA, READ_DATA, WRITE_DATA, CREATE, MANAGE)
#: Unity Catalog's privileges that one of ours means (phrases of upper-cased words).
UNITY_PRIVILEGES: dict[str, str] = {
    "SELECT": READ_DATA,
    "MODIFY": WRITE_DATA,
    "CREATE": CREATE,
    "CREATE TABLE": CREATE,
    "CREATE SCHEMA": CREATE,
    "ALL PRIVILEGES": MANAGE,
    "ALL": MANAGE,
    "USE SCHEMA": READ_METADATA,
    "BROWSE": READ_METADATA,
}
PRIVILEGE_CHOICES = (
    ", ".join(OURS)
    + " (or Unity Catalog's "
    + ", ".join(phrase for phrase in UNITY_PRIVILEGES if phrase != "ALL")
    + ")"
)
SECURABLE_CHOICES = (
    "CATALOG, SCHEMA <namespace>, NAMESPACE <namespace>, TABLE <name>, VIEW <name> or "
    "MATERIALIZED TABLE <name>"
)
PRINCIPAL_CHOICES = "USER <name>, GROUP <name>, CREDENTIAL <client_id> or `user name`"
#: The longest name read (a username is at most 150 characters, a namespace 1,024).
NAME_LIMIT = 1024

Name = tuple[str, ...]


@dataclass(frozen=True)
class Securable:
    """What a statement names: kind "catalog", "namespace", "table", "view" or
    "materialized table", and its name's parts as written (the catalog's own name, or
    nothing, for the catalog)."""

    kind: str
    name: Name = ()


@dataclass(frozen=True)
class Principal:
    """kind "user", "group" or "client"; `implicit` when no keyword said which (a name
    alone is a user)."""

    kind: str
    name: str
    implicit: bool = False


@dataclass(frozen=True)
class GrantPrivileges:
    privileges: tuple[str, ...]
    securable: Securable
    principal: Principal


@dataclass(frozen=True)
class RevokePrivileges:
    privileges: tuple[str, ...]
    securable: Securable
    principal: Principal


@dataclass(frozen=True)
class ShowGrants:
    securable: Securable | None = None
    principal: Principal | None = None


GrantStatement = GrantPrivileges | RevokePrivileges | ShowGrants


def _words(token: Any) -> list[str]:
    if token is None or token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
        return []
    return token.text.upper().split()


def starts_a_grant_statement(words: list[str]) -> bool:
    """Whether a statement's first keywords are GRANT, REVOKE or SHOW GRANT[S]."""
    return words[:1] in (["GRANT"], ["REVOKE"]) or words[:2] in (
        ["SHOW", "GRANTS"],
        ["SHOW", "GRANT"],
    )


def parse(reader: Any) -> GrantStatement:
    """One statement from `reader` (refresh.core.statements' token reader, at its first
    token)."""
    first = reader.next()
    verb = first.text.upper()
    if verb == "SHOW":
        reader.next()  # GRANTS, or Unity's GRANT
        return _show(reader)
    privileges = _privileges(reader)
    reader.expect("ON", "ON <securable> after the privileges")
    securable = _securable(reader)
    preposition = "TO" if verb == "GRANT" else "FROM"
    reader.expect(preposition, f"{preposition} <principal>")
    principal = _principal(reader)
    _finish_after(reader, principal)
    if verb == "GRANT":
        return GrantPrivileges(privileges, securable, principal)
    return RevokePrivileges(privileges, securable, principal)


def _show(reader: Any) -> ShowGrants:
    """[principal] [ON securable] [TO principal]: Unity names the principal before ON."""
    principal = securable = None
    if reader.peek() is not None and not reader.at("ON") and not reader.at("TO"):
        principal = _principal(reader)
    if reader.accept("ON"):
        securable = _securable(reader)
    if reader.at("TO"):
        to = reader.peek()
        reader.next()
        if principal is not None:
            raise reader.error("The principal is named once: before ON or after TO", to)
        principal = _principal(reader)
    _finish_after(reader, principal)
    return ShowGrants(securable, principal)


def _finish_after(reader: Any, principal: Principal | None) -> None:
    """The end of the statement; a name alone followed by another (TO GRUP analysts) is
    a principal's kind misspelt, and said so at the kind."""
    after, kind = reader.peek(), reader.tokens[reader.index - 1]
    named_last = principal is not None and principal.implicit and kind.text == principal.name
    if (
        named_last
        and after is not None
        and (after.token_type == TokenType.IDENTIFIER or after.text.isidentifier())
    ):
        raise reader.error(
            f"Expected USER, GROUP or CREDENTIAL before a principal's name, found "
            f"{reader.shown(kind)}",
            kind,
        )
    reader.finish()


def _privileges(reader: Any) -> tuple[str, ...]:
    """privilege [, privilege ...] or ALL [PRIVILEGES], each as our name; one named twice
    (READ_DATA, SELECT) counts once."""
    found: list[str] = []
    while True:
        token = reader.peek()
        privilege = _privilege(reader)
        alone = not found and not reader.at_type(TokenType.COMMA)
        if _words(token)[:1] == ["ALL"] and not alone:
            raise reader.error("ALL PRIVILEGES stands alone", token)
        if privilege not in found:
            found.append(privilege)
        if not reader.at_type(TokenType.COMMA):
            return tuple(found)
        reader.next()


def _privilege(reader: Any) -> str:
    token = reader.peek()
    words = _words(token)
    if not words:
        raise reader.expected(f"a privilege: {PRIVILEGE_CHOICES}")
    # The longest of Unity's phrases that comes next (CREATE TABLE before CREATE).
    for phrase in sorted(UNITY_PRIVILEGES, key=lambda p: -len(p.split())):
        if reader.accept(phrase):
            return UNITY_PRIVILEGES[phrase]
    if words[0].lower() in OURS:
        reader.next()
        return words[0].lower()
    raise _placed(
        reader,
        f"Unknown privilege {token.text[:60]!r}: expected {PRIVILEGE_CHOICES}",
        token,
        field="privilege",
    )


def _securable(reader: Any) -> Securable:
    token = reader.peek()
    if reader.accept("CATALOG"):
        name: Name = ()
        if reader.peek() is not None and not reader.at("TO") and not reader.at("FROM"):
            name = (name_part(reader, "the catalog's name"),)
        return Securable("catalog", name)
    for keyword, kind in (("SCHEMA", "namespace"), ("NAMESPACE", "namespace")):
        if reader.accept(keyword):
            return Securable(kind, _dotted(reader, "a namespace"))
    if reader.accept("DATABASE"):
        return Securable("namespace", _dotted(reader, "a namespace"))
    if reader.accept("MATERIALIZED TABLE"):
        return Securable("materialized table", _dotted(reader, "a materialized table name"))
    if reader.accept("TABLE"):
        return Securable("table", _dotted(reader, "a table name"))
    if reader.accept("VIEW"):
        return Securable("view", _dotted(reader, "a view name"))
    raise _placed(
        reader,
        f"Expected a securable: {SECURABLE_CHOICES}, found {reader.shown(token)}",
        token,
        field="securable",
    )


def _principal(reader: Any) -> Principal:
    """USER / GROUP / CREDENTIAL name, or a name alone (a user). A keyword followed by
    nothing is itself the name (a user called `group`, say, needs no quotes at the end)."""
    for keyword, kind in (("USER", "user"), ("GROUP", "group"), ("CREDENTIAL", "client")):
        if reader.at(keyword) and reader.peek(1) is not None:
            reader.next()
            return Principal(kind, name_part(reader, f"a {keyword.lower()} name"))
    if reader.peek() is None:
        raise reader.expected(f"a principal: {PRINCIPAL_CHOICES}")
    return Principal("user", name_part(reader, f"a principal: {PRINCIPAL_CHOICES}"), True)


#: Words that end a securable's name rather than name a level of it (quoted, they may).
_AFTER_A_NAME = (["TO"], ["FROM"])


def _dotted(reader: Any, what: str) -> Name:
    parts = [name_part(reader, what, stop=True)]
    while reader.at_type(TokenType.DOT):
        reader.next()
        parts.append(name_part(reader, "a name after '.'", stop=True))
    return tuple(parts)


def name_part(reader: Any, what: str, *, stop: bool = False) -> str:
    """A word or a `quoted` name (a 'string' too, as a principal's name may be written in
    other dialects), refused when empty, too long or holding control characters. `stop`:
    TO and FROM unquoted end the name (GRANT ... ON SCHEMA TO x lacks the schema)."""
    token = reader.peek()
    if stop and _words(token)[:1] and _words(token) in _AFTER_A_NAME:
        raise reader.expected(what)
    if token is not None and token.token_type == TokenType.STRING:
        reader.next()
        text = token.text
    else:
        text = reader.identifier(what)
    if not text.strip():
        raise reader.error(f"Expected {what}, found an empty name", token)
    if len(text) > NAME_LIMIT:
        raise reader.error(f"A name is at most {NAME_LIMIT} characters", token)
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise reader.error("A name may not hold control characters (NUL included)", token)
    return text


def _placed(reader: Any, message: str, token: Any, *, field: str) -> SqlError:
    """A SqlError at `token` that names the field at fault."""
    placed = reader.error(message, token)
    return SqlError(message, line=placed.line, column=placed.column, field=field)
