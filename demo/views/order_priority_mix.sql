-- How orders spread over priorities, with their value.
SELECT o.o_orderpriority AS priority,
       COUNT(*) AS order_count,
       SUM(o.o_totalprice) AS total_price,
       AVG(o.o_totalprice) AS avg_price
FROM orders o
GROUP BY o.o_orderpriority
