"""The Django-free core of notifications: events, signatures, webhook addresses and requests."""
