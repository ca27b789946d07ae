"""Infrastructure every app uses (the Redis broker, metrics, logs, middleware helpers,
the proxies' rules, the run model): it imports no app."""
