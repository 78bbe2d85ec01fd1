-- Test migration: writes, then fails with a syntax error on line 7. Nothing may remain.
CREATE TABLE half_done (id integer PRIMARY KEY);
INSERT INTO half_done VALUES (1);
INSERT INTO base VALUES (1);

SELECT id
  FROM base ORDER BY BY id;
