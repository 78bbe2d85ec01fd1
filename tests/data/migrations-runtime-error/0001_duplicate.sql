-- Test migration: fails at run time, where the server gives no position; the error
-- names the line where the failing statement starts (6).
CREATE TABLE idem.dup (id integer PRIMARY KEY);
INSERT INTO idem.dup VALUES (1);

INSERT INTO idem.dup
VALUES (1);
