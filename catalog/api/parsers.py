"""The API's JSON parser: DRF's, plus the checks every JSON body of ours gets (no NUL
characters, which databases refuse; no nesting deeper than settings.JSON_MAX_DEPTH)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from catalog.core.errors import InvalidInput
from catalog.core.inputs import check_document


class CheckedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error: the body nests too deeply") from None
        try:
            check_document(data, max_depth=settings.JSON_MAX_DEPTH)
        except InvalidInput as error:
            raise ParseError(error.message) from None
        return data
