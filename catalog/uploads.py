"""Uploaded files on their way to a table: streamed to disk, bounded, named at random.

`StagingUploadHandler` is the app's only upload handler (settings.FILE_UPLOAD_HANDLERS):
every file part of a multipart request is written chunk by chunk into UPLOAD_DIR under a
random name (the user's file name is kept for display only and never reaches a path), and
the request's files may total at most UPLOAD_MAX_BYTES. Past that the upload stops, the
partial file is deleted, and `refusal(request)` is the 413 the view answers with; a
request whose Content-Length already says so is refused before its file is read.

A `StagedFile` is deleted when the request closes it, unless a page `keep`s it for the
upload's second step (`Staged`: the file and a small JSON record beside it, with who
uploaded it, where to, and the preview shown, so the review page never reads the file)."""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest

from catalog.core.errors import CatalogError

#: Form fields beside the file (the CSRF token, the table's name...) may add this much.
FORM_ALLOWANCE = 64 * 1024
SUFFIX = ".upload"
RECORD_SUFFIX = ".json"
_TOKEN = re.compile(r"^[0-9a-f]{32}$")


class TooLarge(CatalogError):
    """An upload over UPLOAD_MAX_BYTES. HTTP 413."""

    status = 413

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The file is larger than the upload limit of {_size(limit)} (UPLOAD_MAX_BYTES)",
            field="file",
        )


def _size(count: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{count} bytes"


def upload_limit() -> int:
    return int(settings.UPLOAD_MAX_BYTES)


def upload_dir() -> Path:
    folder = Path(settings.UPLOAD_DIR)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def refusal(request: HttpRequest) -> TooLarge | None:
    """The refusal of an upload over the limit, once the request's files were read."""
    return getattr(request, "upload_refused", None)


class StagedFile(UploadedFile):
    """An uploaded file in UPLOAD_DIR under a random name; deleted when closed unless kept."""

    def __init__(self, name: str, content_type: str, charset: str | None, extra: Any) -> None:
        self.token = secrets.token_hex(16)
        self.path = upload_dir() / f"{self.token}{SUFFIX}"
        # "x": a new file, never one that is there (the name is random anyway).
        file = open(self.path, "xb")  # noqa: SIM115 - closed by close() below
        os.chmod(self.path, 0o600)
        super().__init__(file, name, content_type, 0, charset, extra)
        self.kept = False

    def temporary_file_path(self) -> str:
        return str(self.path)

    def keep(self) -> str:
        """Keep the file past the request (a page's second step); returns its token."""
        self.kept = True
        return self.token

    def close(self) -> None:
        try:
            super().close()
        finally:
            if not self.kept:
                self.path.unlink(missing_ok=True)


class StagingUploadHandler(FileUploadHandler):
    """Every file part to disk (StagedFile), at most UPLOAD_MAX_BYTES per request."""

    def handle_raw_input(
        self, input_data: Any, META: Any, content_length: int, boundary: Any, encoding: Any = None
    ) -> None:
        self.limit = int(settings.UPLOAD_MAX_BYTES)
        self.received = 0
        self.input = input_data
        self.too_large = bool(content_length) and content_length > self.limit + FORM_ALLOWANCE
        return None

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        if self.too_large:
            self._refuse()
        self.file = StagedFile(
            self.file_name, self.content_type, self.charset, self.content_type_extra
        )

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self.received += len(raw_data)
        if self.received > self.limit:
            self._refuse()
        self.file.write(raw_data)
        return None

    def file_complete(self, file_size: int) -> StagedFile:
        self.file.flush()
        self.file.seek(0)
        self.file.size = file_size
        return self.file

    def upload_interrupted(self) -> None:
        file = getattr(self, "file", None)
        if file is not None:
            file.close()

    def _refuse(self) -> None:
        if self.request is not None:
            self.request.upload_refused = TooLarge(self.limit)
        # The rest of the body is read and dropped (never stored), so that the client,
        # which sends all of it before it reads an answer, gets the 413. Read here in large
        # blocks: Django's own draining iterates the body by lines, five times slower.
        read = getattr(self.input, "read", None)
        while read is not None and read(1 << 20):
            pass
        raise StopUpload(connection_reset=False)


# -- the page's second step --------------------------------------------------------------------


@dataclass
class Staged:
    """A kept upload waiting for its second step."""

    token: str
    user_id: int
    namespace: str
    filename: str
    size: int
    table: str
    mode: str
    format: str
    preview: dict[str, Any] = field(default_factory=dict)
    created: float = field(default_factory=time.time)

    @property
    def path(self) -> str:
        return str(upload_dir() / f"{self.token}{SUFFIX}")

    def save(self) -> None:
        record = upload_dir() / f"{self.token}{RECORD_SUFFIX}"
        record.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.chmod(record, 0o600)

    @classmethod
    def load(cls, token: str, *, user: Any, namespace: str) -> Staged | None:
        """The kept upload `token` of this user for this namespace, or None."""
        if not _TOKEN.match(token or ""):
            return None
        record = upload_dir() / f"{token}{RECORD_SUFFIX}"
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        staged = cls(**data)
        if staged.user_id != user.pk or staged.namespace != namespace:
            return None
        if not Path(staged.path).is_file():
            return None
        return staged

    def discard(self) -> None:
        for suffix in (SUFFIX, RECORD_SUFFIX):
            (upload_dir() / f"{self.token}{suffix}").unlink(missing_ok=True)


def discard_old(now: float | None = None) -> int:
    """Delete kept uploads older than UPLOAD_KEEP_SECONDS (abandoned second steps); returns
    how many files went."""
    cutoff = (now or time.time()) - int(settings.UPLOAD_KEEP_SECONDS)
    deleted = 0
    for path in upload_dir().iterdir():
        if path.suffix not in (SUFFIX, RECORD_SUFFIX) or not _TOKEN.match(path.stem):
            continue
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                deleted += 1
        except FileNotFoundError:
            continue
    return deleted
