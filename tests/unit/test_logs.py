"""A log record is one line: user text in a message (SQL, names, errors Spark quotes back)
cannot forge a second record or move the terminal."""

from __future__ import annotations

import logging

from infra.logs import OneLineFormatter, one_line


def test_control_characters_in_a_message_are_escaped():
    assert one_line("ok") == "ok"
    assert one_line("a\nINFO forged record\r\x1b[2J") == "a\\nINFO forged record\\r\\x1b[2J"


def test_a_record_with_user_text_is_one_line_and_its_traceback_is_indented():
    formatter = OneLineFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord(
        "refresh", logging.WARNING, __file__, 1, "Run %s failed: %s", (7, "x\nERROR fake"), None
    )
    assert formatter.format(record) == "WARNING Run 7 failed: x\\nERROR fake"
    try:
        raise ValueError("bad\nERROR fake")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    lines = formatter.format(record).splitlines()
    assert lines[0] == "WARNING Run 7 failed: x\\nERROR fake"
    assert all(line.startswith("    ") for line in lines[1:])


def test_line_separators_and_bidi_controls_in_user_text_are_escaped_as_unicode():
    assert one_line("a\u2028b\u2029c\u202ed") == "a\\u2028b\\u2029c\\u202ed"
