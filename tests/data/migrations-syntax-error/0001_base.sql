-- Test migration: a table, created unqualified (migrations run with search_path = idem).
CREATE TABLE base (id integer PRIMARY KEY);
