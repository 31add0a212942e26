-- TPC-H keys and indexes for PostgreSQL, built after the bulk load: one sorted
-- build each, where rows inserted into existing indexes would write their pages
-- many times over through a small shared_buffers. The same primary keys and
-- indexes as the MariaDB/MySQL schema, each in its table's tablespace.

ALTER TABLE region ADD PRIMARY KEY (r_regionkey) USING INDEX TABLESPACE {{ load_targets.region }};
ALTER TABLE nation ADD PRIMARY KEY (n_nationkey) USING INDEX TABLESPACE {{ load_targets.nation }};
ALTER TABLE part ADD PRIMARY KEY (p_partkey) USING INDEX TABLESPACE {{ load_targets.part }};
ALTER TABLE supplier ADD PRIMARY KEY (s_suppkey) USING INDEX TABLESPACE {{ load_targets.supplier }};
ALTER TABLE partsupp ADD PRIMARY KEY (ps_partkey, ps_suppkey) USING INDEX TABLESPACE {{ load_targets.partsupp }};
ALTER TABLE customer ADD PRIMARY KEY (c_custkey) USING INDEX TABLESPACE {{ load_targets.customer }};
ALTER TABLE orders ADD PRIMARY KEY (o_orderkey) USING INDEX TABLESPACE {{ load_targets.orders }};
ALTER TABLE lineitem ADD PRIMARY KEY (l_orderkey, l_linenumber) USING INDEX TABLESPACE {{ load_targets.lineitem }};

CREATE INDEX nation_regionkey ON nation (n_regionkey) TABLESPACE {{ load_targets.nation }};
CREATE INDEX supplier_nationkey ON supplier (s_nationkey) TABLESPACE {{ load_targets.supplier }};
CREATE INDEX partsupp_suppkey ON partsupp (ps_suppkey) TABLESPACE {{ load_targets.partsupp }};
CREATE INDEX customer_nationkey ON customer (c_nationkey) TABLESPACE {{ load_targets.customer }};
CREATE INDEX orders_custkey ON orders (o_custkey) TABLESPACE {{ load_targets.orders }};
CREATE INDEX lineitem_partkey_suppkey ON lineitem (l_partkey, l_suppkey) TABLESPACE {{ load_targets.lineitem }};
CREATE INDEX lineitem_suppkey ON lineitem (l_suppkey) TABLESPACE {{ load_targets.lineitem }};
