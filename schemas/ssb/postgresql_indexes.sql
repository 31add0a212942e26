-- SSB keys and indexes for PostgreSQL, built after the bulk load (one sorted
-- build each): the same primary keys and LINEORDER foreign-key indexes as the
-- MariaDB/MySQL schema, each in its table's tablespace.

ALTER TABLE date ADD PRIMARY KEY (d_datekey) USING INDEX TABLESPACE {{ load_targets.date }};
ALTER TABLE supplier ADD PRIMARY KEY (s_suppkey) USING INDEX TABLESPACE {{ load_targets.supplier }};
ALTER TABLE customer ADD PRIMARY KEY (c_custkey) USING INDEX TABLESPACE {{ load_targets.customer }};
ALTER TABLE part ADD PRIMARY KEY (p_partkey) USING INDEX TABLESPACE {{ load_targets.part }};
ALTER TABLE lineorder ADD PRIMARY KEY (lo_orderkey, lo_linenumber) USING INDEX TABLESPACE {{ load_targets.lineorder }};
CREATE INDEX lineorder_custkey ON lineorder (lo_custkey) TABLESPACE {{ load_targets.lineorder }};
CREATE INDEX lineorder_partkey ON lineorder (lo_partkey) TABLESPACE {{ load_targets.lineorder }};
CREATE INDEX lineorder_suppkey ON lineorder (lo_suppkey) TABLESPACE {{ load_targets.lineorder }};
CREATE INDEX lineorder_orderdate ON lineorder (lo_orderdate) TABLESPACE {{ load_targets.lineorder }};
