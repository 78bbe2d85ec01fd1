-- Test migration: ends the transaction it runs in, which a transactional file must not.
CREATE TABLE idem.before_commit (id integer PRIMARY KEY);
COMMIT;
CREATE TABLE idem.after_commit (id integer PRIMARY KEY);
