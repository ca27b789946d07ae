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
        help_text="Queries (SELECT, WITH, VALUES, DESCRIBE, SHOW COLUMNS, EXPLAIN), CREATE "
        "[OR ALTER] / ALTER / DROP MATERIALIZED TABLE, DESCRIBE JOB, SHOW MATERIALIZED "
        "TABLES, SHOW CREATE MATERIALIZED TABLE, UPDATE or DELETE; separate statements with "
        "semicolons.",
    )

    def __init__(self, *args: Any, namespaces: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["namespace"].choices = [("", "(none)"), *((n, n) for n in namespaces)]


class AlterQueryForm(CatalogForm):
    """ALTER MATERIALIZED TABLE ... AS <query>, from the table's page."""

    query = forms.CharField(
        label="Query",
        strip=False,
        widget=forms.Textarea(
            attrs={"rows": 14, "spellcheck": "false", "class": "sql", "id": "alter-query"}
        ),
        help_text="Spark SQL. Unqualified names resolve in the table's default namespace. "
        "The table's schema follows the new query, and a full refresh rebuilds its rows.",
    )

    def __init__(self, *args: Any, current: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.current = current

    def clean_query(self) -> str:
        query = self.cleaned_data["query"]
        if not query.strip():
            raise forms.ValidationError("A materialized table needs a query.")
        if query.strip() == self.current.strip():
            raise forms.ValidationError("That is already the table's query: change it first.")
        return query


class VersionChoiceField(forms.TypedChoiceField):
    """A definition version by id, with a plain message for one that does not exist."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(coerce=int, **kwargs)

    def validate(self, value: Any) -> None:
        if value in self.empty_values and self.required:
            raise forms.ValidationError("Choose a version.", code="required")
        if value not in self.empty_values and not self.valid_value(value):
            known = ", ".join(label for _, label in self.choices)
            raise forms.ValidationError(
                f"There is no version {str(value)[:40]!r}; the versions are {known}.",
                code="invalid_choice",
            )


class VersionDiffForm(forms.Form):
    left = VersionChoiceField(label="Left version")
    right = VersionChoiceField(label="Right version")

    def __init__(self, *args: Any, version_ids: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(v, f"v{v}") for v in version_ids]
        for name in ("left", "right"):
            self.fields[name].choices = choices
            self.fields[name].widget.attrs["id"] = f"diff-{name}"
