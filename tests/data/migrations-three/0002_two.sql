-- Test migration 2 of 3.
CREATE TABLE idem.two (id integer PRIMARY KEY);
