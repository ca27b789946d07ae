"""Table maintenance: compaction, snapshot expiry, orphan removal and metadata housekeeping on
Iceberg's Spark actions."""
