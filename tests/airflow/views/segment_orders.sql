-- Orders and their value per customer market segment: joins the two sources (orders: sales, customer: catalog).
SELECT c.c_mktsegment AS segment, COUNT(*) AS orders, SUM(o.o_totalprice) AS total
FROM orders o, customer c
WHERE o.o_custkey = c.c_custkey
GROUP BY c.c_mktsegment
