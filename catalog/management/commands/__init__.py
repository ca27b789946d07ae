"""The catalog's management commands: the mirror's rebuild, clients, samples, the first
administrator, metrics' files."""
