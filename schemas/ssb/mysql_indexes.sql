-- SSB secondary indexes for MariaDB/MySQL, built after the bulk load (one
-- sorted build each): LINEORDER's foreign keys, the index-join plans' way
-- from a dimension's rows to their facts.

ALTER TABLE lineorder
  ADD KEY lineorder_custkey (lo_custkey),
  ADD KEY lineorder_partkey (lo_partkey),
  ADD KEY lineorder_suppkey (lo_suppkey),
  ADD KEY lineorder_orderdate (lo_orderdate);
