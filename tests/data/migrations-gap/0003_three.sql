-- Test migration 3 of a set with a gap: there is no 0002.
CREATE TABLE idem.three (id integer PRIMARY KEY);
