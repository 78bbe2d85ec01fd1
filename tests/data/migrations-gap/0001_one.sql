-- Test migration 1 of a set with a gap: there is no 0002.
CREATE TABLE idem.one (id integer PRIMARY KEY);
