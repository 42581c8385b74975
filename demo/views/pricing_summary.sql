-- TPC-H Q1 without its date filter: the pricing summary per return flag and line status.
SELECT l.l_returnflag AS returnflag, l.l_linestatus AS linestatus,
       SUM(l.l_quantity) AS sum_qty,
       SUM(l.l_extendedprice) AS sum_base_price,
       SUM(l.l_extendedprice * (1 - l.l_discount)) AS sum_disc_price,
       AVG(l.l_discount) AS avg_disc,
       MIN(l.l_shipdate) AS first_ship,
       MAX(l.l_shipdate) AS last_ship,
       COUNT(*) AS line_count
FROM lineitem l
GROUP BY l.l_returnflag, l.l_linestatus
