"""Template tags of materialized tables."""
