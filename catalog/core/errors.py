"""Domain errors. Each names the problem in words a user can act on; the web layers map
them to HTTP statuses (and, for the Iceberg REST protocol, to Iceberg's exception types)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


def describe_validation_error(error: ValidationError) -> str:
    """The first problem pydantic found, as "where: what" (e.g. "versions.0.schema-id: ...")."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "document"
    return f"{where}: {first['msg']}"


class CatalogError(Exception):
    """Base of every error the catalog raises on purpose."""

    #: Iceberg's exception type name, used by the REST protocol's error body.
    iceberg_type = "BadRequestException"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: The input field that is wrong, when one is (forms show the error beside it).
        self.field = field


class InvalidInput(CatalogError):
    """The request itself is wrong: a bad name, an unknown dialect, a malformed value."""


class SqlError(InvalidInput):
    """SQL that does not parse, or is not a query; carries the 1-based line and column."""

    def __init__(
        self, message: str, *, line: int | None = None, column: int | None = None, field="sql"
    ) -> None:
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"{message}{where}", field=field)
        #: The message without its position, to place it elsewhere (a script's lines).
        self.base_message = message
        self.line = line
        self.column = column


class InvalidMetadata(InvalidInput):
    """A metadata file that is not valid JSON or does not follow the spec."""


class ValidationFailed(InvalidInput):
    """Metadata a change would produce that engines cannot read: duplicate field ids, an
    unknown transform, a partition field over a missing column, SQL that does not parse.
    Refused as Iceberg's Java builders refuse it."""

    iceberg_type = "ValidationException"


class NotFound(CatalogError):
    iceberg_type = "NotFoundException"


class NoSuchNamespace(NotFound):
    iceberg_type = "NoSuchNamespaceException"


class NoSuchView(NotFound):
    iceberg_type = "NoSuchViewException"


class NoSuchTable(NotFound):
    iceberg_type = "NoSuchTableException"


class NoSuchVersion(NotFound):
    iceberg_type = "NotFoundException"


class AlreadyExists(CatalogError):
    iceberg_type = "AlreadyExistsException"


class NamespaceNotEmpty(CatalogError):
    iceberg_type = "NamespaceNotEmptyException"


class CommitConflict(CatalogError):
    """Another writer changed the object first, or a requirement no longer holds.

    The writer's metadata file is never referenced; it may retry from the new state."""

    iceberg_type = "CommitFailedException"


class Unavailable(CatalogError):
    """Something the operation needs is not answering (a refresh worker, the broker); the
    request may be retried. HTTP 503."""

    iceberg_type = "ServiceUnavailableException"
    status = 503


class TooManyJobs(CatalogError):
    """The user (or everyone) has as many Spark jobs waiting as the workers are allowed to
    queue; `retry_after` says when to ask again. HTTP 429."""

    iceberg_type = "ServiceUnavailableException"
    status = 429

    def __init__(self, message: str, *, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StatementTimeout(InvalidInput):
    """A statement ran past the time limit statements of its kind have, and was stopped
    (a query past QUERY_TIMEOUT_SECONDS). HTTP 400: the statement, not the service, is at
    fault."""


class NeedsWorker(Exception):  # noqa: N818 - a signal, not an error users see
    """The operation needs a worker's Spark and was attempted where none runs (a web
    request): the caller turns it into a job (catalog.jobs) instead of waiting.
    Raised before the operation writes anything."""


class Forbidden(CatalogError):
    """The user's role does not allow the operation. HTTP 403."""

    iceberg_type = "ForbiddenException"
    status = 403


class ReadOnly(CatalogError):
    """A write to an object the catalog only reads (an attached table). HTTP 403."""

    iceberg_type = "ForbiddenException"
    status = 403


def http_status(error: CatalogError) -> int:
    """The HTTP status every web layer answers an error with."""
    explicit = getattr(error, "status", None)
    if explicit is not None:
        return explicit
    if isinstance(error, NotFound):
        return 404
    if isinstance(error, AlreadyExists | CommitConflict | NamespaceNotEmpty):
        return 409
    return 400
