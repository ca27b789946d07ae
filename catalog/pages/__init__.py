"""The catalog's server-rendered pages, behind login."""
