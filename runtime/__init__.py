"""The worker's Spark runtime, below refresh and maintenance: the Spark session and its
settings, slots, leases, heartbeats, stop, and Spark's error texts."""
