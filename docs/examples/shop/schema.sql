-- The shop's tables, as both MariaDB/MySQL and PostgreSQL take them (a dialect's own schema/<dialect>.sql would
-- be used instead where they differ). tierlab puts each table on the tier the layout gives it.
CREATE TABLE customers (
  id INT NOT NULL PRIMARY KEY,
  name VARCHAR(64) NOT NULL,
  country CHAR(2),
  signed_up DATE NOT NULL
);

CREATE TABLE products (
  id INT NOT NULL PRIMARY KEY,
  name VARCHAR(64) NOT NULL,
  category VARCHAR(16) NOT NULL,
  price DECIMAL(10, 2) NOT NULL
);

CREATE TABLE orders (
  id INT NOT NULL PRIMARY KEY,
  customer_id INT NOT NULL,
  ordered_at DATE NOT NULL,
  status VARCHAR(16) NOT NULL
);

CREATE TABLE order_lines (
  order_id INT NOT NULL,
  line_no INT NOT NULL,
  product_id INT NOT NULL,
  quantity INT NOT NULL,
  price DECIMAL(10, 2) NOT NULL,
  PRIMARY KEY (order_id, line_no)
);
