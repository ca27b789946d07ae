"""An index for searching objects by any part of their qualified name
(`catalog.selectors._name_candidates`), SQLite only.

An FTS5 table with the trigram tokenizer holding each object's qualified name,
`<namespace>.<name>`, under the object's id, kept in step by triggers (objects created,
renamed, moved, dropped; a namespace renamed) and filled from the existing rows. A text that
no name contains is then known to be in none without reading every name. PostgreSQL and
others: nothing (their scan of the names is fast, and the search works without it)."""

from django.db import migrations

OBJECTS = "catalog_catalogobject"
NAMESPACES = "catalog_namespace"
FTS = "catalog_object_name_fts"


def _qualified(row: str) -> str:
    return f"(SELECT name FROM {NAMESPACES} WHERE id = {row}.namespace_id) || '.' || {row}.name"


SQLITE_FORWARD = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(qualified, tokenize='trigram')",
    f"CREATE TRIGGER {FTS}_ai AFTER INSERT ON {OBJECTS} BEGIN "
    f"INSERT INTO {FTS}(rowid, qualified) VALUES (new.id, {_qualified('new')}); END",
    f"CREATE TRIGGER {FTS}_ad AFTER DELETE ON {OBJECTS} BEGIN "
    f"DELETE FROM {FTS} WHERE rowid = old.id; END",
    f"CREATE TRIGGER {FTS}_au AFTER UPDATE OF name, namespace_id ON {OBJECTS} BEGIN "
    f"UPDATE {FTS} SET qualified = {_qualified('new')} WHERE rowid = new.id; END",
    f"CREATE TRIGGER {FTS}_ns_au AFTER UPDATE OF name ON {NAMESPACES} BEGIN "
    f"UPDATE {FTS} SET qualified = new.name || '.' || "
    f"(SELECT name FROM {OBJECTS} WHERE id = {FTS}.rowid) "
    f"WHERE rowid IN (SELECT id FROM {OBJECTS} WHERE namespace_id = new.id); END",
    f"INSERT INTO {FTS}(rowid, qualified) SELECT o.id, n.name || '.' || o.name "
    f"FROM {OBJECTS} o JOIN {NAMESPACES} n ON n.id = o.namespace_id",
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {FTS}_ns_au",
    f"DROP TRIGGER IF EXISTS {FTS}_au",
    f"DROP TRIGGER IF EXISTS {FTS}_ad",
    f"DROP TRIGGER IF EXISTS {FTS}_ai",
    f"DROP TABLE IF EXISTS {FTS}",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_FORWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0006_view_sql_search_index"),
    ]

    operations = [migrations.RunPython(forward, backward)]
