"""The console's form: it only carries the text and the namespace to `refresh.console`."""

from __future__ import annotations

from typing import Any

from django import forms

from catalog.pages.forms import CatalogForm


class ConsoleForm(CatalogForm):
    namespace = forms.ChoiceField(
        label="Namespace",
        required=False,
        help_text="Unqualified names resolve in this namespace.",
        widget=forms.Select(attrs={"id": "console-namespace"}),
    )
    sql = forms.CharField(
        label="Statements",
        strip=False,
        widget=forms.Textarea(
            attrs={"rows": 12, "spellcheck": "false", "class": "sql", "id": "console-sql"}
        ),
        help_text="CREATE / ALTER / DROP MATERIALIZED TABLE, DESCRIBE JOB, SHOW MATERIALIZED "
        "TABLES, UPDATE or DELETE; separate statements with semicolons.",
    )

    def __init__(self, *args: Any, namespaces: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["namespace"].choices = [("", "(none)"), *((n, n) for n in namespaces)]
