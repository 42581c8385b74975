-- A tiny shop for the data-quality tests: NOT NULL join keys, a nullable group column,
-- exact decimals, a double and dates.
CREATE TABLE orders (o_id INT NOT NULL, region STRING, o_date DATE NOT NULL, price DECIMAL(10,2) NOT NULL, weight DOUBLE NOT NULL);
CREATE TABLE returns (r_order INT NOT NULL, qty INT NOT NULL);
