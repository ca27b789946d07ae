"""Forms for the catalog pages. They only parse text into the service functions' arguments;
the services validate names, SQL and the rest, and their errors are put back on the form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from catalog.core.errors import CatalogError
from catalog.core.sql import SUPPORTED_DIALECTS

DIALECT_CHOICES = [(d, d) for d in SUPPORTED_DIALECTS]


def split_commas(text: str) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def split_lines(text: str) -> list[str | None]:
    """One entry per line; an empty line is a column without a comment."""
    lines = [line.strip() for line in (text or "").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return [line or None for line in lines]


class CatalogForm(forms.Form):
    """A form that can show a service's `CatalogError` beside the field it names."""

    #: Service argument name -> form field name, where they differ.
    service_fields: dict[str, str] = {}

    def add_catalog_error(self, error: CatalogError) -> None:
        field = self.service_fields.get(error.field or "", error.field)
        self.add_error(field if field in self.fields else None, error.message)


class NamespaceForm(CatalogForm):
    name = forms.CharField(
        label="Namespace name",
        max_length=255,
        help_text="Levels separated by dots, e.g. sales or sales.eu",
    )
    service_fields = {"namespace": "name"}


class ViewDefinitionForm(CatalogForm):
    """The fields a create and a replace share: the query and what describes it."""

    sql = forms.CharField(
        label="SQL",
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "class": "sql"}),
    )
    dialect = forms.ChoiceField(label="Dialect", choices=DIALECT_CHOICES, initial="spark")
    column_names = forms.CharField(
        label="Column names",
        required=False,
        help_text="Comma-separated: one name per output column, in order.",
    )
    column_comments = forms.CharField(
        label="Column comments",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line, in column order; leave a line empty to skip a column.",
    )
    comment = forms.CharField(label="View comment", required=False)
    default_catalog = forms.CharField(
        label="Default catalog",
        required=False,
        help_text="The catalog that unqualified table names refer to.",
    )
    default_namespace = forms.CharField(
        label="Default namespace",
        required=False,
        help_text="Dotted (e.g. sales.eu); defaults to the view's namespace.",
    )
    allow_unknown_sources = forms.BooleanField(
        label="Created before its sources",
        required=False,
        help_text="Accept tables and views the catalog does not know yet; the columns they "
        "give have unknown types (stored as string).",
    )

    service_fields = {"column_aliases": "column_names"}

    def definition(self) -> dict[str, Any]:
        """The cleaned data as keyword arguments for create_view / replace_view."""
        data = self.cleaned_data
        default_namespace = data["default_namespace"].strip()
        return {
            "sql": data["sql"],
            "dialect": data["dialect"],
            "column_aliases": split_commas(data["column_names"]) or None,
            "column_comments": split_lines(data["column_comments"]) or None,
            "comment": data["comment"].strip(),
            "default_catalog": data["default_catalog"].strip() or None,
            "default_namespace": default_namespace.split(".") if default_namespace else None,
            "allow_unknown_sources": data["allow_unknown_sources"],
        }


class ViewCreateForm(ViewDefinitionForm):
    name = forms.CharField(label="View name", max_length=255)

    field_order = ["name", "sql", "dialect"]


class ViewReplaceForm(ViewDefinitionForm):
    #: The pointer the user saw: a replace built on an older state is refused. (Its errors
    #: are shown as the form's own, since a hidden field cannot show them.)
    expected_metadata_location = forms.CharField(widget=forms.HiddenInput, required=False)


class PropertyForm(CatalogForm):
    key = forms.CharField(label="Property", max_length=255)
    value = forms.CharField(label="Value", required=False)

    service_fields = {"properties": "key"}


def view_dialects(extra: list[str] | None = None) -> list[str]:
    """The dialects the catalog stores for every view, then any others seen."""
    dialects = list(settings.VIEW_DIALECTS)
    for dialect in extra or []:
        if dialect not in dialects:
            dialects.append(dialect)
    return dialects


class DiffForm(forms.Form):
    left = forms.TypedChoiceField(label="Left version", coerce=int)
    right = forms.TypedChoiceField(label="Right version", coerce=int)
    dialect = forms.ChoiceField(label="Dialect")

    def __init__(self, *args: Any, version_ids: list[int], dialects: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        choices = [(v, f"v{v}") for v in version_ids]
        self.fields["left"].choices = choices
        self.fields["right"].choices = choices
        self.fields["dialect"].choices = [(d, d) for d in dialects]


# -- what the API could do and the pages could not -------------------------------------------


class RenameForm(CatalogForm):
    new_namespace = forms.CharField(
        label="Namespace", max_length=1024, help_text="Dotted, e.g. sales or sales.eu."
    )
    new_name = forms.CharField(label="New name", max_length=255)


class AddDialectForm(CatalogForm):
    dialect = forms.ChoiceField(label="Dialect", choices=DIALECT_CHOICES)
    sql = forms.CharField(
        label="SQL",
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "class": "sql"}),
        help_text="The same query, written for this dialect.",
    )


class RegisterForm(CatalogForm):
    KIND_CHOICES = [("view", "View"), ("table", "Table")]

    kind = forms.ChoiceField(label="Kind", choices=KIND_CHOICES, initial="view")
    name = forms.CharField(label="Name", max_length=255)
    metadata_location = forms.CharField(
        label="Metadata file",
        max_length=4096,
        help_text="The path or file: URI of an existing *.metadata.json inside the warehouse.",
    )


class NamespacePropertiesForm(CatalogForm):
    updates = forms.CharField(
        label="Set",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="One key=value per line.",
    )
    removals = forms.CharField(
        label="Remove",
        required=False,
        help_text="Comma-separated keys.",
    )

    service_fields = {"properties": "updates"}

    def clean_updates(self) -> dict[str, str]:
        updates: dict[str, str] = {}
        for number, line in enumerate((self.cleaned_data["updates"] or "").splitlines(), 1):
            if not line.strip():
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise forms.ValidationError(f"Line {number} is not key=value.")
            updates[key.strip()] = value.strip()
        return updates

    def clean_removals(self) -> list[str]:
        return split_commas(self.cleaned_data["removals"])


class ClientForm(CatalogForm):
    name = forms.CharField(
        label="Client name", max_length=255, help_text="What uses it, e.g. spark-laptop."
    )
