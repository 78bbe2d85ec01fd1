-- Test migration 3 of 3.
CREATE TABLE idem.three (id integer PRIMARY KEY);
