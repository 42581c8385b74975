-- A small schema for the ingestion tests: every column type, NOT NULL keys.
CREATE TABLE orders (o_id INT NOT NULL, o_cust INT, o_total DECIMAL(10,2), o_date DATE, o_note VARCHAR(20));
CREATE TABLE items  (i_order INT NOT NULL, i_qty INT, i_price DOUBLE, i_gift BOOLEAN);
