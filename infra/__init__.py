"""Infrastructure every app uses, below all of them: it imports Django and the standard
library, never an app (alerts, catalog, maintenance, refresh, webapp). tests/unit/
test_layers.py holds that rule."""
