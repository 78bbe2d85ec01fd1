-- 0013: which declared records' receipts go out canonical. A declared effect's record keeps
-- the server's JSON text ('{"ticket_id" : 2}'); the library answers its canonical form
-- (RFC 8785 whitespace and member order, every number's digits as written) to the first
-- caller and to every retry, but only of a record that says so: one written before this
-- migration got the server's text as its first answer, and every retry gets that again,
-- byte for byte.
--
-- Nullable, no default: adding it rewrites no row, and every row already there is NULL,
-- replayed as stored. Only the declared statement's INSERT names it (true); the records of
-- callback, external and intent calls, whose receipts idem serializes canonical itself,
-- leave it NULL. The sweeper leaves it on a tombstone, which has no receipt to answer.

-- On Citus, the function below is created over one connection per node, which a
-- transaction may not do after a parallel DDL (the ALTER TABLE on every shard): the whole
-- migration runs sequentially. Elsewhere the setting is an unused placeholder.
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

ALTER TABLE idem.operations ADD COLUMN IF NOT EXISTS receipt_canonical boolean;

-- Row-level security covers the new column with the row (idem.isolate_tenants(), 0007):
-- idem_app and idem_operator have it through their table privileges. The sweeper neither
-- reads nor writes it.

COMMENT ON COLUMN idem.operations.receipt_canonical IS
    'true: a declared effect''s record, whose receipt (the server''s JSON text, kept as it was) goes out in canonical form, RFC 8785 whitespace and member order with every number''s digits as written, to its first caller and every retry. NULL: the receipt goes out byte for byte as stored (records of callback, external and intent calls, which are canonical already, and declared records written before migration 0013, whose first caller got the stored text). Read it with idem.receipt_form().';

-- How a record's receipt goes out, for operators reading idem.operations; also what
-- idem-migrate baseline looks for to tell that this migration ran.
CREATE FUNCTION idem.receipt_form(receipt_canonical boolean)
RETURNS text
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE WHEN receipt_canonical THEN 'canonical' ELSE 'as stored' END
$$;

COMMENT ON FUNCTION idem.receipt_form(boolean) IS
    'How a record''s receipt goes out, from idem.operations.receipt_canonical: ''canonical'' (RFC 8785 whitespace and member order, numbers as stored) or ''as stored'' (byte for byte).';

REVOKE ALL ON FUNCTION idem.receipt_form(boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.receipt_form(boolean) TO idem_app, idem_operator;
