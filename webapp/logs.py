"""Log records as one line each: a message that carries a user's text (SQL, a name, an
error Spark quotes back) cannot forge a second record with a newline or move the terminal
with escape codes. Control characters in the message are written as escapes; a traceback
keeps its lines, indented under its record."""

from __future__ import annotations

import logging

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """`text` with every control character escaped (newlines as \\n, others as \\xNN)."""
    if text.isprintable():
        return text
    return "".join(
        _ESCAPES.get(char, f"\\x{ord(char):02x}") if not char.isprintable() else char
        for char in text
    )


class OneLineFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return one_line(super().formatMessage(record))

    def formatException(self, ei) -> str:  # noqa: N802, ANN001 - logging's name and type
        return "\n".join("    " + line for line in super().formatException(ei).splitlines())
