"""The catalog: namespaces, views and tables, the one commit path, grants, and the Iceberg REST
protocol."""
