-- 0012: the digests of a record's identity fields, for tools with an identity policy
-- (include/idem/identity.h), so that a conflict names the first field that differs instead
-- of "arguments". The record keeps no argument: per field, its JSON Pointer and 16 bytes of
-- SHA-256 over the key and the field's RFC 8785 bytes.
--
-- Nullable, no default: adding it rewrites no row, existing rows and the records of tools
-- without a policy (the default) leave it NULL, which costs them nothing; only the claims
-- of tools with a policy name it. The sweeper drops it with the receipt when it turns a
-- record into a tombstone: a tombstone's conflict says "arguments".

-- On Citus, the function below is created over one connection per node, which a
-- transaction may not do after a parallel DDL (the ALTER TABLE on every shard): the whole
-- migration runs sequentially. Elsewhere the setting is an unused placeholder.
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

ALTER TABLE idem.operations ADD COLUMN IF NOT EXISTS identity_digests bytea;

-- Row-level security covers the new column with the row (idem.isolate_tenants(), 0007):
-- idem_app and idem_operator have it through their table privileges. The sweeper's
-- privileges are per column: it may clear this one, never read it.
GRANT UPDATE (identity_digests) ON idem.operations TO idem_sweeper;

COMMENT ON COLUMN idem.operations.identity_digests IS
    'For a tool with an identity policy: per identity field present, in RFC 8785 member order, the length of its JSON Pointer (2 bytes, big-endian), the pointer, and the first 16 bytes of SHA-256 over tenant, operation ID, pointer (each NUL-terminated) and the field''s RFC 8785 bytes. NULL for tools that fingerprint all their arguments, rows before migration 0012, and tombstones. Read it with idem.identity_fields().';

-- The column's entries as rows, for operators: which identity fields a record has.
CREATE FUNCTION idem.identity_fields(digests bytea)
RETURNS TABLE (field text, digest bytea)
LANGUAGE plpgsql
IMMUTABLE STRICT
AS $$
DECLARE
    at integer := 0;
    n integer;
BEGIN
    WHILE at + 2 <= length(digests) LOOP
        n := get_byte(digests, at) * 256 + get_byte(digests, at + 1);
        EXIT WHEN at + 2 + n + 16 > length(digests);
        field := convert_from(substring(digests FROM at + 3 FOR n), 'UTF8');
        digest := substring(digests FROM at + 3 + n FOR 16);
        RETURN NEXT;
        at := at + 2 + n + 16;
    END LOOP;
END
$$;

COMMENT ON FUNCTION idem.identity_fields(bytea) IS
    'The entries of idem.operations.identity_digests: each identity field''s JSON Pointer and digest, in RFC 8785 member order.';

REVOKE ALL ON FUNCTION idem.identity_fields(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.identity_fields(bytea) TO idem_app, idem_operator;
