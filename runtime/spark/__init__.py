"""Django-free Spark helpers of the runtime: building a session, the sandbox every
session carries, Spark's error texts, commits with properties."""
