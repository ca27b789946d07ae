"""Log records as one line each: a message that carries a user's text (SQL, a name, an
error Spark quotes back) cannot forge a second record with a newline or move the terminal
with escape codes. Control characters in the message are written as escapes; a traceback
keeps its lines, indented under its record."""

from __future__ import annotations

import logging

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """`text` with every character Python does not print escaped: newlines as \\n, other
    control characters as \\xNN, and line and paragraph separators, bidi controls and
    the like as \\uNNNN (a viewer could otherwise start a line or reorder one with them)."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    if char in _ESCAPES:
        return _ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class OneLineFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return one_line(super().formatMessage(record))

    def formatException(self, ei) -> str:  # noqa: N802, ANN001 - logging's name and type
        return "\n".join("    " + line for line in super().formatException(ei).splitlines())


class LineHandler(logging.StreamHandler):
    """A stream handler that also takes a line already made (`write_line`): the audit's
    access events (catalog/access_log.py) are JSON lines serialized once, written at once
    without the LogRecord, caller lookup and formatting a record costs (together, a few
    percent of a load-table). Records sent the usual way are written as StreamHandler
    writes them."""

    def write_line(self, text: str) -> None:
        with self.lock:  # type: ignore[union-attr] - created by Handler.__init__
            try:
                self.stream.write(text + self.terminator)
                self.flush()
            except Exception:  # noqa: BLE001 - as Handler.emit: never fail the caller
                self.handleError(logging.makeLogRecord({"msg": text}))
