-- Revenue by customer nation and part brand (TPC-H lineitem x orders x customer x nation x part).
SELECT n.n_name AS nation, p.p_brand AS brand,
       SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
       COUNT(*) AS line_count
FROM lineitem l, orders o, customer c, nation n, part p
WHERE l.l_orderkey = o.o_orderkey
  AND o.o_custkey = c.c_custkey
  AND c.c_nationkey = n.n_nationkey
  AND l.l_partkey = p.p_partkey
GROUP BY n.n_name, p.p_brand
