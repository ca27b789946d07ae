"""Forms for the catalog pages. They only parse text into the service functions' arguments;
the services validate names, SQL and the rest, and their errors are put back on the form."""

from __future__ import annotations

import html
from typing import Any

from django import forms
from django.conf import settings
from django.utils.safestring import SafeString, mark_safe

from catalog.core.errors import CatalogError
from catalog.core.inputs import whole_number
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


def _text(value: Any) -> str:
    """A value as HTML text, as Django's templates escape it (safe strings stay as they are)."""
    if hasattr(value, "__html__"):
        return value.__html__()
    return html.escape(str(value))


def _attributes(attrs: dict[str, Any]) -> str:
    """HTML attributes as Django's widgets/attrs.html writes them (False left out, True as a
    bare name)."""
    return "".join(
        f" {_text(name)}" if value is True else f' {_text(name)}="{_text(value)}"'
        for name, value in attrs.items()
        if value is not False
    )


class QuickSelect(forms.Select):
    """A select that writes its options in Python: Django renders each option through two
    templates, which took most of a table page offering a few hundred snapshots. The markup
    is the same, every value escaped as the templates escape it."""

    def render(
        self, name: str, value: Any, attrs: dict | None = None, renderer: Any = None
    ) -> SafeString:
        widget = self.get_context(name, value, attrs)["widget"]
        parts = []
        for group_name, options, _ in widget["optgroups"]:
            if group_name:
                parts.append(f'<optgroup label="{_text(group_name)}">')
            parts.extend(
                f'<option value="{_text(option["value"])}"{_attributes(option["attrs"])}>'
                f"{_text(option['label'])}</option>"
                for option in options
            )
            if group_name:
                parts.append("</optgroup>")
        options_html = "\n  ".join(parts)
        return mark_safe(  # noqa: S308 - every value is escaped above
            f'<select name="{_text(widget["name"])}"{_attributes(widget["attrs"])}>'
            f"\n  {options_html}\n</select>"
        )


class QuickSelectMultiple(QuickSelect, forms.SelectMultiple):
    """SelectMultiple, written as QuickSelect writes a select."""


class QuickInput:
    """An input written in Python with the markup of Django's input.html (the value left out
    when None): for the fields of a page's forms, each a template and its include."""

    def render(
        self, name: str, value: Any, attrs: dict | None = None, renderer: Any = None
    ) -> SafeString:
        widget = self.get_context(name, value, attrs)["widget"]  # type: ignore[attr-defined]
        shown = "" if widget["value"] is None else f' value="{_text(widget["value"])}"'
        return mark_safe(  # noqa: S308 - every value is escaped
            f'<input type="{_text(widget["type"])}" name="{_text(widget["name"])}"{shown}'
            f"{_attributes(widget['attrs'])}>"
        )


class QuickTextInput(QuickInput, forms.TextInput):
    pass


class QuickDateTimeInput(QuickInput, forms.DateTimeInput):
    pass


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
    key = forms.CharField(label="Property", max_length=255, widget=QuickTextInput)
    value = forms.CharField(label="Value", required=False, widget=QuickTextInput)

    service_fields = {"properties": "key"}


def view_dialects(extra: list[str] | None = None) -> list[str]:
    """The dialects the catalog stores for every view, then any others seen."""
    dialects = list(settings.VIEW_DIALECTS)
    for dialect in extra or []:
        if dialect not in dialects:
            dialects.append(dialect)
    return dialects


class DiffForm(forms.Form):
    left = forms.TypedChoiceField(label="Left version", coerce=int, widget=QuickSelect)
    right = forms.TypedChoiceField(label="Right version", coerce=int, widget=QuickSelect)
    dialect = forms.ChoiceField(label="Dialect", widget=QuickSelect)

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


# -- attached tables and the table page -------------------------------------------------------


class AttachForm(CatalogForm):
    """Attach a table another system writes, read-only, from its folder. The options choose
    its metadata file as ClickHouse's Iceberg engine does (`catalog.core.attached`)."""

    NEWEST_BY_CHOICES = [
        ("version", "Highest version in the file name (v3.metadata.json, 00003-….metadata.json)"),
        ("last-updated-ms", "Highest last-updated-ms inside the file"),
    ]

    name = forms.CharField(label="Table name", max_length=255)
    location = forms.CharField(
        label="Location",
        max_length=4096,
        help_text="The table's folder (the one holding metadata/ and data/), or its URI.",
    )
    metadata_file_path = forms.CharField(
        label="Metadata file path",
        max_length=4096,
        required=False,
        help_text="Relative to the folder, e.g. metadata/v3.metadata.json. When given, this "
        "file is the table and no other is looked for (no '..', never outside the folder). "
        "Empty: the newest metadata file of metadata/ is the table, and the table follows "
        "its writer as it writes newer ones.",
    )
    table_uuid = forms.CharField(
        label="Table UUID",
        max_length=64,
        required=False,
        help_text="Only metadata files whose table-uuid is this one are candidates (for a "
        "folder where a table was dropped and created again).",
    )
    newest_by = forms.ChoiceField(
        label="Newest file is the one with",
        choices=NEWEST_BY_CHOICES,
        initial="version",
        help_text="How the newest candidate is chosen: by the version number in its name, or "
        "by the last-updated-ms its JSON records (for writers whose names carry no version). "
        "Files with a name of no known pattern or unreadable JSON are left out and listed on "
        "the table's page. Gzip-compressed files (.gz.metadata.json, .metadata.json.gz) are "
        "candidates too.",
    )

    def arguments(self) -> dict[str, Any]:
        """The cleaned data as keyword arguments for services.attach_table."""
        data = self.cleaned_data
        return {
            "name": data["name"].strip(),
            "location": data["location"].strip(),
            "metadata_file_path": data["metadata_file_path"].strip(),
            "table_uuid": data["table_uuid"].strip() or None,
            "newest_by": data["newest_by"],
        }


def _iso_utc(milliseconds: int) -> str:
    """Milliseconds since 1970 as a datetime-local value in UTC (2024-05-01T12:30:00.250)."""
    from datetime import UTC, datetime, timedelta

    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=milliseconds)
    return moment.replace(tzinfo=None).isoformat(timespec="milliseconds")


def _whole_number(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise forms.ValidationError(f"{what} must be a whole number, not {text[:40]!r}.") from None


class SnapshotChoiceForm(forms.Form):
    """Which snapshot the table page shows the schema and files at (`?at=`)."""

    at = forms.CharField(label="At snapshot", required=False, max_length=40, widget=QuickSelect)

    def __init__(self, *args: Any, choices: list[tuple[str, str]], known: dict, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.known = known
        self.fields["at"].widget.choices = [("", "current snapshot"), *choices]

    def clean_at(self) -> str:
        value = (self.cleaned_data["at"] or "").strip()
        if value and value not in self.known:
            _whole_number(value, "A snapshot id")
            # ClickHouse's words for an unknown snapshot (catalog.core.attached.state_at).
            raise forms.ValidationError(f"No snapshot found for id `{value}`")
        return value


class AnyChoices(forms.MultipleChoiceField):
    """A multiple choice whose values are checked by the service, not against the
    choices (so an unknown column is refused in the service's words)."""

    def valid_value(self, value: str) -> bool:
        return True


class TablePreviewForm(CatalogForm):
    """A preview of a table's first rows: a column choice, a row filter, and a snapshot id
    or a timestamp (both at once is refused by the service, in ClickHouse's words). A GET
    form, so a preview's address can be shared."""

    columns = AnyChoices(
        label="Columns",
        required=False,
        widget=QuickSelectMultiple(attrs={"size": 6}),
        help_text="None chosen: every column. Ctrl-click or Cmd-click to choose several.",
    )
    row_filter = forms.CharField(
        label="Row filter",
        required=False,
        max_length=4000,
        widget=QuickTextInput(
            attrs={"placeholder": "region = 'eu' and amount > 10", "spellcheck": "false"}
        ),
        help_text="e.g. region = 'eu' and amount > 10. Also: <>, <=, >=, in ('a', 'b'), "
        "not in (...), is null, is not null, is nan, like 'ab%', not, or, parentheses; "
        "strings in single quotes, timestamps as '2024-05-01T00:00:00'.",
    )
    snapshot_id = forms.CharField(
        label="Snapshot",
        required=False,
        max_length=40,
        widget=QuickSelect,
        help_text="Read the table as it was at this snapshot, with the schema it had then.",
    )
    timestamp = forms.CharField(
        label="Or as of (UTC)",
        required=False,
        max_length=40,
        widget=QuickDateTimeInput(attrs={"type": "datetime-local", "step": "1"}),
        help_text="The newest snapshot at or before this moment; give either this or a "
        "snapshot, not both.",
    )

    service_fields = {"timestamp_ms": "timestamp", "limit": "row_filter"}

    def __init__(
        self,
        *args: Any,
        columns: list[str],
        snapshots: list[tuple[str, str]],
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        asked = self.data.getlist("columns") if hasattr(self.data, "getlist") else []
        unknown = [name for name in asked if name not in columns]
        self.fields["columns"].choices = [(c, c) for c in columns] + [
            (c, f"{c} (not in this schema)") for c in unknown
        ]
        self.fields["snapshot_id"].widget.choices = [("", "current snapshot"), *snapshots]
        moment = str(self.data.get("timestamp", "") or "").strip()
        if moment.isdigit() and len(moment) <= 15:
            # Milliseconds since 1970 (a link's form): shown in the date and time input.
            try:
                shown = _iso_utc(int(moment))
            except (OverflowError, ValueError):  # past year 9999: left as given
                shown = moment
            self.data = self.data.copy()
            self.data["timestamp"] = shown

    def clean_snapshot_id(self) -> int | None:
        value = (self.cleaned_data["snapshot_id"] or "").strip()
        return _whole_number(value, "A snapshot id") if value else None

    def clean_timestamp(self) -> int | None:
        value = (self.cleaned_data["timestamp"] or "").strip()
        if not value:
            return None
        milliseconds = whole_number(value, signed=True)
        if milliseconds is not None:
            return milliseconds  # since 1970, as Iceberg counts them
        from datetime import UTC, datetime, timedelta

        from django.utils.dateparse import parse_datetime

        try:
            moment = parse_datetime(value)
        except ValueError:
            moment = None
        if moment is None:
            raise forms.ValidationError(
                f"{value[:40]!r} is not a date and time: write it as 2024-05-01T12:30:00 "
                "(UTC), or as milliseconds since 1970."
            )
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)

    def arguments(self) -> dict[str, Any]:
        """The cleaned data as keyword arguments for previews.preview_table."""
        data = self.cleaned_data
        return {
            "columns": list(data["columns"]) or None,
            "row_filter": data["row_filter"].strip() or None,
            "snapshot_id": data["snapshot_id"],
            "timestamp_ms": data["timestamp"],
        }


class ViewPreviewForm(CatalogForm):
    """A preview of a view's first rows, which Spark reads (the rows Spark gives for the
    view's query): a column choice and a row filter. A GET form."""

    columns = AnyChoices(
        label="Columns",
        required=False,
        widget=QuickSelectMultiple(attrs={"size": 5}),
        help_text="None chosen: every column.",
    )
    row_filter = TablePreviewForm.base_fields["row_filter"]

    service_fields = {"limit": "row_filter"}

    def __init__(self, *args: Any, columns: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        asked = self.data.getlist("columns") if hasattr(self.data, "getlist") else []
        unknown = [name for name in asked if name not in columns]
        self.fields["columns"].choices = [(c, c) for c in columns] + [
            (c, f"{c} (not a column)") for c in unknown
        ]

    def arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "columns": list(data["columns"]) or None,
            "row_filter": data["row_filter"].strip() or None,
        }


UPLOAD_MODES = [
    ("create", "Create a new table"),
    ("append", "Append to an existing table"),
]


class UploadTargetForm(CatalogForm):
    """Where an uploaded file's rows go; the services check the name and the mode."""

    table = forms.CharField(label="Table name", max_length=255)
    mode = forms.ChoiceField(label="Mode", choices=UPLOAD_MODES, initial="create")
    service_fields = {"name": "table"}


class UploadForm(UploadTargetForm):
    """The first step: the file (and where it goes)."""

    file = forms.FileField(
        label="File",
        allow_empty_file=True,
        help_text="CSV (a header row, UTF-8), Parquet or JSON lines (.jsonl); the extension "
        "says which.",
    )
    format = forms.ChoiceField(
        label="Format",
        required=False,
        choices=[
            ("", "from the file name"),
            ("csv", "CSV"),
            ("parquet", "Parquet"),
            ("jsonl", "JSON lines"),
        ],
    )
    field_order = ["file", "table", "mode", "format"]
