"""The catalog's part of the management API at /api/ (Django REST framework)."""
