"""The WSGI entry point gunicorn loads."""

from __future__ import annotations

import gc
import importlib
import sys


def test_the_entry_point_loads_every_view_and_freezes_what_start_up_built():
    """Start-up objects are moved out of the collector's reach (gc.freeze) once the URLconf
    and its views are imported, so a full collection never walks them during a request."""
    sys.modules.pop("webapp.wsgi", None)
    gc.unfreeze()
    try:
        wsgi = importlib.import_module("webapp.wsgi")
        assert callable(wsgi.application)
        assert "catalog.pages.sql_views" in sys.modules and "catalog.api.sql_views" in sys.modules
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
