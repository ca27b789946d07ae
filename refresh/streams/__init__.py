"""The streaming process: a long-running process (`manage.py run_streams`) hosting the
streaming queries of ACTIVATED continuous materialized tables in one Spark session. Any
number of them share the tables through leases in the database (refresh.stream_hosts): each
runs the queries of the tables it holds, at most its fair share, and takes over the tables
of a host that died once their leases end, from their checkpoints.

It reads the desired state from the database every few seconds and makes it so: it claims
its share of the active continuous tables and starts a query for each table it holds, gives
up tables above its share, stops (between micro-batches, keeping the checkpoint) the query
of a table suspended, dropped or switched to FULL, given up or taken over, restarts one
whose definition, freshness, options or checkpoint changed. The table's lease holder is the
only writer of its `stream_*` columns.

- A table with no checkpoint is loaded first (its sources pinned at their current
  snapshots, one overwrite), then streamed from just after those snapshots. That is how a
  CREATE, a new definition, a switch from FULL and a recompute start.
- A source snapshot that deletes or overwrites rows stops the stream (Iceberg's stream
  source refuses it), and a merge plan's static source that moved on stops it between
  micro-batches; the table then catches up (refresh.streams.catch_up): with a primary key,
  the sources' row changes since the snapshots it holds are applied by key in one commit
  (an INCREMENTAL run in its history) and the stream resumes just after them from a new
  checkpoint; where that cannot be exact, it is recomputed (loaded again, a new
  checkpoint), the history saying why. It never silently diverges.
- Every micro-batch is a RefreshRun (trigger CONTINUOUS); rows older than an hour are
  aggregated per hour, so a table running for months keeps a small history.
- Every commit, load or micro-batch, records in its snapshot summary what it answers
  (refresh.core.refresh_state): the definition version it runs and each source's table
  UUID, which this process passes to the Django-free Spark side, with the snapshot read.
- If the process dies, another host (or the next start) resumes its queries from their
  checkpoints once their leases end; a micro-batch commits only while its host holds the
  table's lease.

The process reads in modules, one job each, over one host's state (`state.HostState`):
`supervisor` (the loop: a pass over the tables), `hosting` (the host's registration,
heartbeat and its share of the leases), `starts` (starting queries and what a micro-batch
asks of the host), `stops` (a query stopped or ended by itself), `catch_up` (following
views, static sources and rewritten sources), `loads` (a load at pinned snapshots),
`rebuilds` (ALTER ... AS, rollbacks and manual refreshes), `batches` (the micro-batches'
history) and `checkpoints` (the checkpoint folders)."""
