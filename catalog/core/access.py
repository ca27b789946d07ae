"""Who may do what: privileges, what each implies, and the walk that answers "does this set
of grants allow privilege A on a namespace or an object" in memory.

A grant is held on the catalog, on a namespace (and so on every namespace and object under
it: `sales` covers `sales.eu` and `sales.eu.orders`) or on one object (a table, a view, a
materialized table, an attached table). `catalog.access` loads a principal's grants once
per request and asks `Held`; this module knows no database."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

READ_METADATA = "read_metadata"
READ_DATA = "read_data"
WRITE_DATA = "write_data"
CREATE = "create"
MANAGE = "manage"
OWN = "own"

#: Every privilege, weakest first, with what it means (the API's documentation says this).
PRIVILEGES: dict[str, str] = {
    READ_METADATA: "see that it exists: lists, names, schemas, properties",
    READ_DATA: "read its rows (engines' loads, previews); implies read_metadata",
    WRITE_DATA: "commit new snapshots (append, overwrite, delete rows); implies read_data",
    CREATE: "create namespaces, tables and views in it (catalog and namespaces only)",
    MANAGE: "alter, rename, drop, and grant or revoke on it; implies every privilege but own",
    OWN: "held by the owner alone; implies every privilege",
}

#: What holding a privilege lets one do. CREATE implies nothing more: creating in a
#: namespace does not let one see what others made there.
IMPLIES: dict[str, frozenset[str]] = {
    READ_METADATA: frozenset({READ_METADATA}),
    READ_DATA: frozenset({READ_DATA, READ_METADATA}),
    WRITE_DATA: frozenset({WRITE_DATA, READ_DATA, READ_METADATA}),
    CREATE: frozenset({CREATE}),
    MANAGE: frozenset({MANAGE, CREATE, WRITE_DATA, READ_DATA, READ_METADATA}),
    OWN: frozenset(PRIVILEGES),
}

#: Privileges a grant may name (OWN is the owner's, transferred rather than granted), and
#: those that mean something on one object (nothing is created inside a table).
GRANTABLE = (READ_METADATA, READ_DATA, WRITE_DATA, CREATE, MANAGE)
GRANTABLE_ON_OBJECTS = (READ_METADATA, READ_DATA, WRITE_DATA, MANAGE)

#: Iceberg table updates that change only data (snapshots, refs, statistics): a commit of
#: these alone needs WRITE_DATA; any other update (schema, spec, sort order, properties,
#: location, format version) alters the table and needs MANAGE.
DATA_UPDATES = frozenset(
    {
        "add-snapshot",
        "set-snapshot-ref",
        "remove-snapshots",
        "remove-snapshot-ref",
        "set-statistics",
        "remove-statistics",
        "set-partition-statistics",
        "remove-partition-statistics",
    }
)


def commit_privilege(updates: Iterable[dict]) -> str:
    """The privilege a table commit with these REST updates needs."""
    for update in updates:
        if not isinstance(update, dict) or update.get("action") not in DATA_UPDATES:
            return MANAGE
    return WRITE_DATA


def ancestors(namespace: str) -> list[str]:
    """A namespace and every namespace above it: "a.b.c" -> ["a", "a.b", "a.b.c"]."""
    levels = namespace.split(".")
    return [".".join(levels[: i + 1]) for i in range(len(levels))]


@dataclass
class Held:
    """The privileges one principal holds, as loaded rows: each (privilege, namespace name
    or None, object id or None, the object's namespace or None). A row with neither
    namespace nor object is held on the catalog. Answers are memoized per namespace: one
    `Held` lives for one request."""

    catalog: set[str] = field(default_factory=set)
    namespaces: dict[str, set[str]] = field(default_factory=dict)
    objects: dict[int, set[str]] = field(default_factory=dict)
    #: Namespaces with a grant at or under them (an ancestor of a granted namespace or
    #: object is visible, so that one can reach what one was given).
    beneath: set[str] = field(default_factory=set)
    #: Whether the principal owns an object (which its row, not a grant, says).
    owns_objects: bool = False
    _on_namespace: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, str | None, int | None, str | None]]) -> Held:
        held = cls()
        for privilege, namespace, object_id, object_namespace in rows:
            implied = IMPLIES.get(privilege, frozenset())
            if object_id is not None:
                held.objects.setdefault(object_id, set()).update(implied)
                if object_namespace:
                    held.beneath.update(ancestors(object_namespace))
            elif namespace is not None:
                held.namespaces.setdefault(namespace, set()).update(implied)
                held.beneath.update(ancestors(namespace))
            elif object_namespace is not None:
                # Neither a namespace nor an object: an object owned (its owner holds
                # everything on it, read from its own row) in this namespace.
                held.owns_objects = True
                held.beneath.update(ancestors(object_namespace))
            else:
                held.catalog.update(implied)
        return held

    def is_empty(self) -> bool:
        return not (self.catalog or self.namespaces or self.objects or self.beneath)

    def holds_any(self, privileges: Iterable[str]) -> bool:
        """Whether one of `privileges` is held anywhere (owning an object counts)."""
        wanted = set(privileges)
        held = [self.catalog, *self.namespaces.values(), *self.objects.values()]
        return self.owns_objects or any(wanted & found for found in held)

    def on_catalog(self) -> frozenset[str]:
        return frozenset(self.catalog)

    def on_namespace(self, namespace: str) -> frozenset[str]:
        """Privileges held on the namespace: its own grants, its ancestors' and the
        catalog's."""
        found = self._on_namespace.get(namespace)
        if found is not None:
            return found
        # Walked from the top, not by recursion: a name may have thousands of levels.
        found, name = frozenset(self.catalog), ""
        for level in namespace.split("."):
            name = f"{name}.{level}" if name else level
            known = self._on_namespace.get(name)
            if known is None:
                known = found | frozenset(self.namespaces.get(name, ()))
                self._on_namespace[name] = known
            found = known
        return found

    def on_object(self, object_id: int | None, namespace: str) -> frozenset[str]:
        inherited = self.on_namespace(namespace)
        own = self.objects.get(object_id) if object_id is not None else None
        return inherited | frozenset(own) if own else inherited

    def sees_namespace(self, namespace: str) -> bool:
        """Any privilege at or above it, or a grant somewhere under it."""
        return bool(self.on_namespace(namespace)) or namespace in self.beneath

    def objects_with(self, privilege: str) -> set[int]:
        """Ids of objects granted `privilege` one by one (not through a namespace)."""
        return {oid for oid, held in self.objects.items() if privilege in held}

    def namespaces_with(self, privilege: str) -> list[str]:
        """Namespaces granted `privilege` directly (everything under them inherits it)."""
        return [name for name, held in self.namespaces.items() if privilege in held]
