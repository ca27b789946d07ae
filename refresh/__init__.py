"""Materialized tables (Flink's FLIP-435) refreshed by Spark, the SQL console and its
queries."""
