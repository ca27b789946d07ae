"""README's tutorial, read as the tests follow it: its numbered steps, each with the code
blocks, the bold labels (what a reader presses) and the `names` it gives. The browser test
(tests/browser/test_tutorial.py) and the compose test (tests/spark/test_compose_services.py)
take their SQL, files, names and labels from here, so that they fail when the text and the
app part ways."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "## Tutorial"
STEP = re.compile(r"^\*\*(\d+)\. (.+?)\*\*", re.MULTILINE)
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Step:
    number: int
    title: str
    text: str

    def blocks(self, language: str) -> list[str]:
        return [body for lang, body in BLOCK.findall(self.text) if lang == language]

    def block(self, language: str) -> str:
        [body] = self.blocks(language)
        return body

    @property
    def prose(self) -> str:
        """The text without its code blocks."""
        return BLOCK.sub("", self.text)

    @property
    def labels(self) -> list[str]:
        """What the reader presses or chooses, in bold, in order (the step's title aside)."""
        return re.findall(r"\*\*(.+?)\*\*", self.prose)[1:]

    def label(self, text: str) -> str:
        """The one bold label that begins with `text`: the test names which one it means,
        the README decides its exact words."""
        [found] = {label for label in self.labels if label.startswith(text)}
        return found

    def name_after(self, words: str) -> str:
        """The `name` that follows `words` in the prose ("name the table `targets`")."""
        spaced = r"\s+".join(re.escape(word) for word in words.split())
        match = re.search(spaced + r"\s+`([^`]+)`", self.prose)
        assert match, f"step {self.number} no longer says {words!r} `...`"
        return match.group(1)


@cache
def steps() -> dict[int, Step]:
    text = README.read_text()
    start = text.index(HEADING)
    end = text.find("\n## ", start + len(HEADING))
    section = text[start : end if end != -1 else len(text)]
    marks = list(STEP.finditer(section))
    found = {}
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        body = section[mark.start() : following.start() if following else len(section)]
        found[int(mark.group(1))] = Step(int(mark.group(1)), mark.group(2), body)
    return found


def step(number: int) -> Step:
    return steps()[number]


def csv_rows(text: str) -> list[dict[str, str]]:
    header, *rows = [line.split(",") for line in text.strip().splitlines()]
    return [dict(zip(header, row, strict=True)) for row in rows]


def with_address(code: str, base_url: str, credential: str) -> str:
    """A tutorial's Python snippet pointed at a running app and a credential, as a reader
    pastes theirs."""
    client_id, _, secret = credential.partition(":")
    code = code.replace("http://127.0.0.1:8000", base_url.rstrip("/"))
    code = code.replace("CLIENT_ID:SECRET", credential)
    return code.replace("'CLIENT_ID'", f"'{client_id}'").replace("'SECRET'", f"'{secret}'")
