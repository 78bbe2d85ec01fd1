-- 0017: the CHECK constraint of idem.operations reads the row whole. Same rules, same
-- name, cheaper writes.
--
-- operations_consistent (0008) calls idem.operation_consistent() with eight expressions of
-- the row's columns. PostgreSQL reads a constraint's stored expression back into a tree,
-- and prepares it, in every statement that writes the table: eight argument expressions
-- are most of that work. Counted in a single-user backend, a declared effect's transaction
-- (the tool's INSERT and the record) costs the server about 557,000 instructions with that
-- constraint, 521,000 with the one below (and 485,000 with none at all): every claim,
-- record, finishing UPDATE and tombstone pays the same part less.
--
-- idem.operation_row_consistent() states the rules of 0008 (with 0014's body) on the row:
-- a known state; a 32-byte fingerprint; a receipt exactly for completed and failed
-- records; completed_at except while pending or outcome_unknown; expired_at exactly for
-- tombstones; downstream_key and attempts together; a lease only while pending;
-- outcome_unknown only with a downstream key. For every row both functions give the same
-- answer, so no row that stands is refused.
--
-- Citus: a shard is a table of its own, whose row is not of type idem.operations, and a
-- constraint naming the row whole cannot be created on it. On a database with the citus
-- extension this migration leaves 0008's constraint as it is; `idem-migrate distribute`
-- puts 0008's form back (idem.operations_check_per_field()) before it distributes a
-- schema migrated without Citus.
--
-- Outside Citus the new constraint is checked against every row under an exclusive lock
-- on idem.operations (a full scan): calls wait meanwhile. On a large table, apply it at a
-- quiet time.

CREATE FUNCTION idem.operation_row_consistent(r idem.operations)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    -- A downstream key and its attempts go together; a fingerprint is 32 bytes.
    IF (r.downstream_key IS NULL) <> (r.attempts IS NULL) OR octet_length(r.fingerprint) <> 32 THEN
        RETURN false;
    END IF;
    -- A receipt exactly for completed and failed records; completed_at except while pending
    -- or outcome_unknown; expired_at exactly for tombstones; a lease only while pending;
    -- outcome_unknown only with a downstream key; no other state.
    CASE r.state
    WHEN 'completed', 'failed' THEN
        RETURN r.response IS NOT NULL AND r.completed_at IS NOT NULL AND r.expired_at IS NULL
            AND r.lease_expires_at IS NULL;
    WHEN 'pending' THEN
        RETURN r.response IS NULL AND r.completed_at IS NULL AND r.expired_at IS NULL;
    WHEN 'expired' THEN
        RETURN r.response IS NULL AND r.completed_at IS NOT NULL AND r.expired_at IS NOT NULL
            AND r.lease_expires_at IS NULL;
    WHEN 'outcome_unknown' THEN
        RETURN r.response IS NULL AND r.completed_at IS NULL AND r.expired_at IS NULL
            AND r.lease_expires_at IS NULL AND r.downstream_key IS NOT NULL;
    ELSE
        RETURN false;
    END CASE;
END
$$;

COMMENT ON FUNCTION idem.operation_row_consistent(idem.operations) IS
    'The rules of a row of idem.operations (those of idem.operation_consistent(), on the row whole), for its CHECK constraint operations_consistent outside Citus.';

-- Back to 0008's form of the constraint, for a table about to become a Citus distributed
-- table (idem-migrate distribute calls it; nothing else needs to). Does nothing when the
-- constraint already has that form.
CREATE FUNCTION idem.operations_check_per_field()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_constraint
               WHERE conrelid = 'idem.operations'::regclass
                 AND conname = 'operations_consistent'
                 AND pg_get_constraintdef(oid) LIKE '%operation_row_consistent%') THEN
        ALTER TABLE idem.operations
            DROP CONSTRAINT operations_consistent,
            ADD CONSTRAINT operations_consistent CHECK (idem.operation_consistent(
                state, octet_length(fingerprint), response IS NULL, completed_at IS NULL,
                expired_at IS NULL, downstream_key IS NULL, attempts IS NULL,
                lease_expires_at IS NULL));
    END IF;
END
$$;

COMMENT ON FUNCTION idem.operations_check_per_field() IS
    'Puts back migration 0008''s form of the CHECK constraint operations_consistent (the same rules, one argument per column), which a Citus shard can hold; idem-migrate distribute calls it before distributing idem.operations.';

REVOKE ALL ON FUNCTION idem.operations_check_per_field() FROM PUBLIC;

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        ALTER TABLE idem.operations
            DROP CONSTRAINT operations_consistent,
            ADD CONSTRAINT operations_consistent
                CHECK (idem.operation_row_consistent(operations));
    END IF;
END
$$;
