-- A few customers' orders with their totals: index lookups into orders and order_lines.
SELECT o.id, o.ordered_at, SUM(l.quantity * l.price) AS total
FROM orders o JOIN order_lines l ON l.order_id = o.id
WHERE o.customer_id BETWEEN 100 AND 160
GROUP BY o.id, o.ordered_at
ORDER BY o.ordered_at DESC, o.id;
