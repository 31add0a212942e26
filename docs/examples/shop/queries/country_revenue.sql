-- Revenue per customer country in the last quarter: orders by date, joined to customers and order_lines. The
-- customers of no known country come last on every engine (PostgreSQL sorts NULL last, MariaDB first).
SELECT c.country, COUNT(DISTINCT o.id) AS orders, SUM(l.quantity * l.price) AS revenue
FROM orders o
JOIN customers c ON c.id = o.customer_id
JOIN order_lines l ON l.order_id = o.id
WHERE o.ordered_at >= DATE '2025-10-01'
GROUP BY c.country
ORDER BY c.country IS NULL, c.country;
