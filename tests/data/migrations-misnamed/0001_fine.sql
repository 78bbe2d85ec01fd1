-- Test migration: well named; its neighbour 2_bad.sql is not.
CREATE TABLE idem.fine (id integer PRIMARY KEY);
