-- Test migration 1 of 3.
CREATE TABLE idem.one (id integer PRIMARY KEY);
