-- TPC-H secondary indexes for MariaDB/MySQL, built after the bulk load: one
-- sorted build each, where rows inserted into existing indexes would write
-- their pages many times over through a small buffer pool. An index on every
-- foreign key the primary key does not lead with.

ALTER TABLE nation ADD KEY nation_regionkey (n_regionkey);
ALTER TABLE supplier ADD KEY supplier_nationkey (s_nationkey);
ALTER TABLE partsupp ADD KEY partsupp_suppkey (ps_suppkey);
ALTER TABLE customer ADD KEY customer_nationkey (c_nationkey);
ALTER TABLE orders ADD KEY orders_custkey (o_custkey);
ALTER TABLE lineitem ADD KEY lineitem_partkey_suppkey (l_partkey, l_suppkey), ADD KEY lineitem_suppkey (l_suppkey);
