-- 0008: the operations table's three CHECK constraints become one, whose rules live in a
-- function. Same rules, cheaper writes.
--
-- PostgreSQL keeps a CHECK constraint as the text of its expression tree and reads that
-- text back into a tree in every statement that writes the table (ExecConstraints). The
-- three constraints of 0001, 0003 and 0004 were 4.8 kB of such text, arrays of state
-- names included, read by every claim, record and finishing UPDATE: in a profile of the
-- create path, about 5 % of the backend's time. The constraint below is a short call; the
-- function's body is compiled once per connection.
--
-- The rules are those of the constraints it replaces: a known state; a 32-byte
-- fingerprint; a receipt exactly for completed and failed records; completed_at except
-- while pending or outcome_unknown; expired_at exactly for tombstones; downstream_key and
-- attempts together; a lease only while pending; outcome_unknown only for an external
-- effect (with a downstream key).
--
-- On a large table this migration holds an exclusive lock on idem.operations while it
-- checks the new constraint (a full scan): calls wait meanwhile. Apply it at a quiet time.

CREATE FUNCTION idem.operation_consistent(state text, fingerprint_bytes integer,
                                          no_response boolean, not_completed boolean,
                                          not_expired boolean, no_downstream_key boolean,
                                          no_attempts boolean, no_lease boolean)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN state IN ('pending', 'completed', 'failed', 'expired', 'outcome_unknown')
        AND fingerprint_bytes = 32
        AND (state IN ('pending', 'expired', 'outcome_unknown')) = no_response
        AND (state IN ('pending', 'outcome_unknown')) = not_completed
        AND (state = 'expired') = NOT not_expired
        AND no_downstream_key = no_attempts
        AND (no_lease OR state = 'pending')
        AND (state <> 'outcome_unknown' OR NOT no_downstream_key);
END
$$;

COMMENT ON FUNCTION idem.operation_consistent(text, integer, boolean, boolean, boolean, boolean,
                                              boolean, boolean) IS
    'The rules of a row of idem.operations, for its CHECK constraint operations_consistent (one short call instead of three long expressions that every write re-reads).';

ALTER TABLE idem.operations
    DROP CONSTRAINT operations_state_known,
    DROP CONSTRAINT operations_record_consistent,
    DROP CONSTRAINT operations_external_consistent,
    ADD CONSTRAINT operations_consistent CHECK (idem.operation_consistent(
        state, octet_length(fingerprint), response IS NULL, completed_at IS NULL,
        expired_at IS NULL, downstream_key IS NULL, attempts IS NULL, lease_expires_at IS NULL));
