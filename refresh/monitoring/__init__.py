"""One place to watch every materialized table (as Snowflake's dynamic-table monitoring
does): every table across namespaces with its status, failing and late ones first
(`tables`), the refresh and maintenance history of all tables together (`history`), the
streaming hosts (`hosts`) and what both lists may be filtered by (`filters`). Reads only;
the pages (refresh/pages/monitoring.py) and the API (refresh/api/monitoring.py) share these."""
