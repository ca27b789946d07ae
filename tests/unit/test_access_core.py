"""catalog.core.access: what each privilege implies and the walk down a namespace's levels."""

from __future__ import annotations

from catalog.core.access import (
    CREATE,
    MANAGE,
    OWN,
    READ_DATA,
    READ_METADATA,
    WRITE_DATA,
    Held,
    ancestors,
    commit_privilege,
)


def test_a_namespace_is_under_each_of_its_levels():
    assert ancestors("a.b.c") == ["a", "a.b", "a.b.c"]
    assert ancestors("a") == ["a"]


def test_a_grant_on_a_namespace_is_inherited_below_it_and_not_beside_it():
    held = Held.from_rows([(READ_DATA, "sales", None, None)])

    assert READ_DATA in held.on_namespace("sales.eu.daily")
    assert READ_METADATA in held.on_object(7, "sales.eu")
    assert not held.on_namespace("salesforce")
    assert not held.on_namespace("other.sales")


def test_a_namespace_thousands_of_levels_deep_is_answered_like_any_other():
    held = Held.from_rows([(READ_DATA, "a.a", None, None)])
    deep = ".".join(["a"] * 20_000)

    assert READ_DATA in held.on_namespace(deep)
    assert not held.on_namespace(".".join(["b"] * 20_000))


def test_privileges_imply_the_weaker_ones_manage_all_but_own_and_create_nothing_more():
    held = Held.from_rows([(WRITE_DATA, None, 1, "a"), (CREATE, "b", None, None)])
    manager = Held.from_rows([(MANAGE, None, None, None)])

    assert held.on_object(1, "a") == {WRITE_DATA, READ_DATA, READ_METADATA}
    assert held.on_namespace("b") == {CREATE}
    # Managing the catalog gives every privilege but owning (which is transferred, not
    # granted), on the catalog and on everything under it.
    everything_but_own = {MANAGE, CREATE, WRITE_DATA, READ_DATA, READ_METADATA}
    assert manager.on_catalog() == everything_but_own
    assert manager.on_object(3, "sales.eu") == everything_but_own
    assert OWN not in manager.on_namespace("sales")


def test_a_grant_below_a_namespace_makes_it_visible_but_gives_nothing_there():
    held = Held.from_rows([(READ_METADATA, None, 5, "finance.eu")])

    assert held.sees_namespace("finance") and held.sees_namespace("finance.eu")
    assert not held.on_namespace("finance")
    assert not held.sees_namespace("finance.us")
    assert not held.on_object(6, "finance.eu")


def test_a_commit_of_snapshots_alone_needs_write_data_and_anything_else_manage():
    assert commit_privilege([{"action": "add-snapshot"}, {"action": "set-snapshot-ref"}]) == (
        WRITE_DATA
    )
    assert commit_privilege([{"action": "add-snapshot"}, {"action": "set-properties"}]) == MANAGE
    assert commit_privilege([{"action": "add-schema"}]) == MANAGE
    assert commit_privilege(["not an update"]) == MANAGE
    assert commit_privilege([]) == WRITE_DATA


def test_owning_an_object_shows_its_namespaces_and_counts_as_holding_a_change():
    # The loader's row for an owned object: neither a namespace grant nor an object grant,
    # only the object's namespace.
    held = Held.from_rows([("beneath", None, None, "finance.eu")])
    assert held.sees_namespace("finance") and held.sees_namespace("finance.eu")
    assert not held.sees_namespace("sales")
    assert held.on_namespace("finance.eu") == frozenset()
    assert held.holds_any(["manage"]) and not held.is_empty()


def test_holding_a_change_anywhere():
    assert Held.from_rows([("create", "sales", None, None)]).holds_any(["create", "manage"])
    assert not Held.from_rows([("read_data", "sales", None, None)]).holds_any(["manage"])
    assert not Held.from_rows([("read_metadata", None, 7, "sales")]).holds_any(["write_data"])
    assert Held.from_rows([("manage", None, 7, "sales")]).holds_any(["manage"])
