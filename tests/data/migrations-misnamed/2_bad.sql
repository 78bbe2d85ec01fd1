-- Test migration with a name that does not follow NNNN_description.sql.
CREATE TABLE idem.bad (id integer PRIMARY KEY);
