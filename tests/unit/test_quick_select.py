"""QuickSelect writes a select's options in Python with the markup Django's templates write
(Select and SelectMultiple), every value escaped as they escape it: the snapshot choices of
a table page are written this way."""

from __future__ import annotations

import pytest
from django import forms

from catalog.pages.forms import QuickSelect, QuickSelectMultiple

CHOICES = [("", "current snapshot"), ("1", "a <b> & 'c' \"d\""), ("2", "two")]


def _same(html: str) -> str:
    """Markup without the whitespace Django's templates leave between the options."""
    return "".join(html.split())


@pytest.mark.parametrize("value", ["", "2", "<unknown>"])
@pytest.mark.parametrize(
    "attrs",
    [{"id": "id_at"}, {"id": "x", "required": True, "disabled": False, "aria-describedby": "h"}],
)
def test_a_quick_select_writes_what_djangos_select_writes(value, attrs):
    django = forms.Select(choices=CHOICES).render("at", value, dict(attrs))
    quick = QuickSelect(choices=CHOICES).render("at", value, dict(attrs))
    assert _same(quick) == _same(django)
    assert "&lt;b&gt; &amp; &#x27;c&#x27; &quot;d&quot;" in quick


@pytest.mark.parametrize("value", [[], ["1"], ["1", "2"]])
def test_a_quick_multiple_select_writes_what_djangos_writes(value):
    django = forms.SelectMultiple(choices=CHOICES, attrs={"size": 6}).render("c", value, {})
    quick = QuickSelectMultiple(choices=CHOICES, attrs={"size": 6}).render("c", value, {})
    assert _same(quick) == _same(django) and " multiple" in quick


@pytest.mark.parametrize("value", [None, "", "region = 'eu' & <b>"])
def test_quick_inputs_write_what_djangos_inputs_write(value):
    from catalog.pages.forms import QuickDateTimeInput, QuickTextInput

    attrs = {"placeholder": "a 'b' <c>", "spellcheck": "false", "required": True}
    for quick, django in (
        (QuickTextInput(attrs=attrs), forms.TextInput(attrs=attrs)),
        (
            QuickDateTimeInput(attrs={"type": "datetime-local"}),
            forms.DateTimeInput(attrs={"type": "datetime-local"}),
        ),
    ):
        ours, theirs = (
            quick.render("f", value, {"id": "id_f"}),
            django.render("f", value, {"id": "id_f"}),
        )
        assert _same(ours) == _same(theirs)
