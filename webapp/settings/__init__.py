"""Settings per environment: base.py, and dev, test and prod on top of it."""
