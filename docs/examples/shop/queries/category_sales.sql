-- Sales per product category over all order lines: a scan of order_lines.
SELECT p.category, COUNT(*) AS lines_sold, SUM(l.quantity * l.price) AS revenue
FROM order_lines l JOIN products p ON p.id = l.product_id
GROUP BY p.category
ORDER BY revenue DESC;
