-- Built after the bulk load.
CREATE INDEX orders_customer ON orders (customer_id);
CREATE INDEX order_lines_product ON order_lines (product_id);
