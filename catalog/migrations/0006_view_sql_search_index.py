"""An index for searching views' SQL by any part of it (`catalog.selectors._sql_candidates`).

SQLite: an FTS5 table with the trigram tokenizer over `ViewRepresentation.sql` (external
content: it keeps only the index, the text stays in the representation table), kept in step
by triggers and filled from the existing rows. PostgreSQL: pg_trgm's GIN index on
`UPPER(sql)`, the expression Django's `icontains` compares; without the right to create the
extension, no index (a warning), and the search reads every view's SQL as before. Other
databases: nothing."""

import logging

from django.db import migrations, transaction

logger = logging.getLogger(__name__)

REPS = "catalog_viewrepresentation"
FTS = "catalog_viewrepresentation_sql_fts"
PG_INDEX = "catalog_viewrep_sql_trgm"

SQLITE_FORWARD = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5("
    f"sql, content='{REPS}', content_rowid='id', tokenize='trigram')",
    f"CREATE TRIGGER {FTS}_ai AFTER INSERT ON {REPS} BEGIN "
    f"INSERT INTO {FTS}(rowid, sql) VALUES (new.id, new.sql); END",
    f"CREATE TRIGGER {FTS}_ad AFTER DELETE ON {REPS} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, sql) VALUES ('delete', old.id, old.sql); END",
    f"CREATE TRIGGER {FTS}_au AFTER UPDATE ON {REPS} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, sql) VALUES ('delete', old.id, old.sql); "
    f"INSERT INTO {FTS}(rowid, sql) VALUES (new.id, new.sql); END",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",  # the rows already there
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {FTS}_au",
    f"DROP TRIGGER IF EXISTS {FTS}_ad",
    f"DROP TRIGGER IF EXISTS {FTS}_ai",
    f"DROP TABLE IF EXISTS {FTS}",
]


def forward(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor == "sqlite":
        for statement in SQLITE_FORWARD:
            schema_editor.execute(statement)
    elif connection.vendor == "postgresql":
        try:
            # A savepoint: a refused CREATE EXTENSION must not abort the migration.
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except Exception as error:  # noqa: BLE001 - any refusal: no index, the scan stays
            logger.warning(
                "pg_trgm could not be created (%s): searches of view SQL read every view's "
                "SQL, without an index",
                error,
            )
            return
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON {REPS} USING gin (UPPER(sql) gin_trgm_ops)"
        )


def backward(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor == "sqlite":
        for statement in SQLITE_BACKWARD:
            schema_editor.execute(statement)
    elif connection.vendor == "postgresql":
        # The extension stays: other objects may use it, and it holds no data.
        schema_editor.execute(f"DROP INDEX IF EXISTS {PG_INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0005_view_reads"),
    ]

    operations = [migrations.RunPython(forward, backward)]
