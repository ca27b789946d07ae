"""What a full refresh pins (refresh.core.pinning): every table a query reads, whatever its
shape, with the views it reads expanded into their SQL; and the rewrite that swaps pinned
tables in (refresh.core.streaming.rewrite_sources) leaves a CTE of the same name alone."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from refresh.core.pinning import ViewText, expand_views, flattened, table_references
from refresh.core.streaming import rewrite_sources

NS = ["sales"]
CATALOG = "lv"


def tables_of(sql: str) -> set[str]:
    """Every table name the SQL reads, as written (catalog.db.name)."""
    return {
        ".".join(p.name for p in t.parts)
        for t in sqlglot.parse_one(sql, read="spark").find_all(exp.Table)
    }


def test_every_table_of_an_outer_join_a_window_and_subqueries_is_found_once():
    query = (
        "SELECT o.id, c.region, row_number() OVER (PARTITION BY c.region ORDER BY o.id) AS r "
        "FROM orders o FULL OUTER JOIN customers c ON o.customer = c.customer "
        "LEFT JOIN lv.sales.orders again ON again.id = o.id "
        "WHERE o.id IN (SELECT id FROM other.returns) "
        "AND EXISTS (SELECT 1 FROM (SELECT * FROM regions) r WHERE r.name = c.region)"
    )
    found = table_references(query, namespace=NS, catalog=CATALOG)
    assert sorted(found) == [
        ("other", "returns"),
        ("sales", "customers"),
        ("sales", "orders"),
        ("sales", "regions"),
    ]


def test_a_cte_and_a_table_valued_function_are_not_tables():
    query = (
        "WITH orders AS (SELECT * FROM sales.orders WHERE amount > 0) "
        "SELECT * FROM orders JOIN range(3) r ON orders.id = r.id"
    )
    assert table_references(query, namespace=NS, catalog=CATALOG) == [("sales", "orders")]


def test_rewriting_sources_swaps_the_table_but_not_a_cte_that_shadows_its_name():
    query = "WITH orders AS (SELECT * FROM sales.orders WHERE amount > 0) SELECT * FROM orders"
    rewritten = rewrite_sources(
        query, {("sales", "orders"): "pinned_1"}, namespace=NS, catalog=CATALOG
    )
    assert tables_of(rewritten) == {"pinned_1", "orders"}
    # The CTE still reads the pinned table; the outer query still reads the CTE.
    assert "FROM pinned_1 AS `orders` WHERE" in rewritten
    assert rewritten.endswith("SELECT * FROM orders")


def views(known: dict) -> object:
    return lambda name: known.get(name)


def test_a_view_is_replaced_by_its_sql_with_its_names_qualified_in_its_own_namespace():
    big = ViewText(
        sql="SELECT id, amount FROM orders WHERE amount > 40",
        namespace=("shop",),
        catalog=None,
        columns=("order_id", "amount"),
        types=("BIGINT", None),
    )
    expanded = expand_views(
        "SELECT b.order_id, c.region FROM big_orders b LEFT JOIN customers c ON b.order_id = c.id",
        namespace=NS,
        catalog=CATALOG,
        view=views({("sales", "big_orders"): big}),
    )
    # The view's `orders` is shop.orders (its namespace), the query's `customers` sales's.
    assert expanded.tables == (("shop", "orders"), ("sales", "customers"))
    assert expanded.views == (("sales", "big_orders"),)
    assert expanded.unexpanded == ()
    assert tables_of(expanded.query) == {"lv.shop.orders", "customers"}
    # The view's columns are named by its schema, by position, and cast to its types, as
    # Spark reads a view; the query still calls it by its alias.
    assert "AS `__lakeview_view`(`order_id`, `amount`)" in expanded.query
    assert "SELECT CAST(`order_id` AS BIGINT) AS `order_id`, `amount` FROM" in expanded.query
    assert expanded.query.startswith("SELECT b.order_id, c.region FROM (SELECT CAST(")
    assert ") AS `b` LEFT JOIN customers AS c" in expanded.query


def test_views_over_views_are_expanded_down_to_tables_and_their_ctes_cannot_meet_the_querys():
    inner = ViewText(sql="WITH t AS (SELECT * FROM orders) SELECT id FROM t", namespace=("sales",))
    outer = ViewText(
        sql="SELECT id FROM inner_v UNION ALL SELECT id FROM returns", namespace=("sales",)
    )
    expanded = expand_views(
        "WITH t AS (SELECT 1 AS id) SELECT * FROM outer_v JOIN t ON outer_v.id = t.id",
        namespace=NS,
        catalog=CATALOG,
        view=views({("sales", "outer_v"): outer, ("sales", "inner_v"): inner}),
    )
    assert set(expanded.tables) == {("sales", "orders"), ("sales", "returns")}
    assert set(expanded.views) == {("sales", "outer_v"), ("sales", "inner_v")}
    # The inner view's CTE t was renamed: the query's own t still means its own.
    assert sorted(table_references(expanded.query, namespace=NS, catalog=CATALOG)) == [
        ("sales", "orders"),
        ("sales", "returns"),
    ]
    ctes = [cte.alias for cte in sqlglot.parse_one(expanded.query, read="spark").find_all(exp.CTE)]
    assert "t" in ctes and len(set(ctes)) == len(ctes) == 2


def test_a_view_that_cannot_be_expanded_stays_a_view_and_says_why():
    expanded = expand_views(
        "SELECT * FROM trino_v JOIN loop_v ON true JOIN orders ON true",
        namespace=NS,
        catalog=CATALOG,
        view=views(
            {
                ("sales", "trino_v"): "it has no Spark SQL (its dialect is trino)",
                ("sales", "loop_v"): ViewText(sql="SELECT * FROM loop_v", namespace=("sales",)),
            }
        ),
    )
    assert expanded.tables == (("sales", "orders"),)
    assert expanded.unexpanded[0] == "sales.trino_v: it has no Spark SQL (its dialect is trino)"
    assert "sales.loop_v: it reads itself through views" in expanded.unexpanded
    assert "trino_v" in tables_of(expanded.query)


def test_a_view_of_another_catalog_or_with_unreadable_sql_stays_a_view():
    expanded = expand_views(
        "SELECT * FROM elsewhere_v JOIN broken_v ON true",
        namespace=NS,
        catalog=CATALOG,
        view=views(
            {
                ("sales", "elsewhere_v"): ViewText(
                    sql="SELECT x FROM sales.t", namespace=("sales",), catalog="other"
                ),
                ("sales", "broken_v"): ViewText(sql="SELEC nothing FROM", namespace=("sales",)),
            }
        ),
    )
    assert expanded.views == () and expanded.tables == ()
    assert [line.split(":")[0] for line in expanded.unexpanded] == [
        "sales.elsewhere_v",
        "sales.broken_v",
    ]
    assert "reads sales.t in its default catalog other" in expanded.unexpanded[0]


def test_an_engines_name_for_the_catalog_in_a_views_sql_is_read_as_this_catalog():
    """Spark as `lake` stores `lake.sales.orders` (its default catalog spark_catalog);
    Trino as `iceberg` leaves names to its default catalog `iceberg`."""
    expanded = expand_views(
        "SELECT * FROM big JOIN mine ON big.id = mine.id",
        namespace=NS,
        catalog=CATALOG,
        aliases={"lake", "iceberg"},
        view=views(
            {
                ("sales", "big"): ViewText(
                    sql="SELECT id FROM lake.sales.orders WHERE v > 1",
                    namespace=("default",),
                    catalog="spark_catalog",
                ),
                ("sales", "mine"): ViewText(
                    sql="SELECT id FROM customers", namespace=("sales",), catalog="iceberg"
                ),
            }
        ),
    )
    assert expanded.unexpanded == ()
    assert expanded.tables == (("sales", "orders"), ("sales", "customers"))
    assert "lake" not in expanded.query and "iceberg" not in expanded.query
    assert f"`{CATALOG}`.`sales`.`orders`" in expanded.query


def test_a_group_by_alias_that_names_a_column_it_reads_is_flattened_as_spark_reads_it():
    """Spark groups `GROUP BY coalesce(k, '-')` by the column k even where an output is
    named k; sqlglot's alias expansion would coalesce twice."""
    lookup = views({("sales", "v"): ViewText(sql="SELECT k, n FROM orders", namespace=NS)})
    same = "SELECT coalesce(k, '-') AS k, sum(n) AS n FROM v GROUP BY coalesce(k, '-')"
    query = flattened(expand_views(same, namespace=NS, catalog=CATALOG, view=lookup))
    assert query is not None
    group = query.args["group"].sql(dialect="spark")
    assert group.count("COALESCE") == 1, group
    by_alias = "SELECT coalesce(k, '-') AS day, sum(n) AS total FROM v GROUP BY day"
    query = flattened(expand_views(by_alias, namespace=NS, catalog=CATALOG, view=lookup))
    assert query is not None and "COALESCE" in query.args["group"].sql(dialect="spark")
    both = "SELECT coalesce(k, '-') AS k, count(*) AS c FROM v GROUP BY k, c"
    assert flattened(expand_views(both, namespace=NS, catalog=CATALOG, view=lookup)) is None


def test_a_query_without_views_is_kept_as_written():
    query = "select  o.id from orders o left outer join customers c on o.customer = c.customer"
    expanded = expand_views(query, namespace=NS, catalog=CATALOG, view=views({}))
    assert expanded.query == query
    assert expanded.tables == (("sales", "orders"), ("sales", "customers"))


def test_a_view_that_projects_and_filters_is_merged_into_the_query_and_an_unplaced_column_is_not():
    from refresh.core.pinning import flattened

    def views(name):
        return {
            ("shop", "big"): ViewText(
                sql="SELECT id, k, v FROM shop.orders WHERE v > 0.3",
                namespace=("shop",),
                columns=("id", "k", "v"),
                types=("bigint", "bigint", "double"),
            ),
            # `region` of orders or of customers: without a schema nobody can say.
            ("shop", "joined"): ViewText(
                sql="SELECT o.id, region FROM shop.orders o JOIN shop.customers c ON o.c = c.c",
                namespace=("shop",),
            ),
        }.get(tuple(name))

    def flat(query):
        found = flattened(expand_views(query, namespace=["shop"], catalog="lv", view=views))
        return found.sql(dialect="spark") if found is not None else None

    assert flat("SELECT k, count(*) AS n FROM big GROUP BY k") == (
        "SELECT CAST(`orders`.`k` AS BIGINT) AS `k`, COUNT(*) AS `n` FROM `lv`.`shop`.`orders` "
        "AS `orders` WHERE `orders`.`v` > 0.3 GROUP BY CAST(`orders`.`k` AS BIGINT)"
    )
    assert flat("SELECT region, count(*) AS n FROM joined GROUP BY region") is None
