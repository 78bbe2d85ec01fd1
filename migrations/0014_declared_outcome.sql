-- 0014: a declared effect's failures are told apart by a function the statement calls only
-- when the call fails; the rules of a row of idem.operations are checked with less work.
--
-- A declared effect's statement (lib/store_declared.c) writes the record beside the tool's
-- statement and ends with a check that raises unless the tool's statement returned exactly
-- one row and the record was written with its receipt, so that the COMMIT sent behind it
-- in the same round trip is never carried out. Until now that check told the failures apart
-- in the statement itself: whether a key dated ahead has a record (a look at
-- idem.operations), the size of a refused receipt (a second reading of the tool's rows).
-- PostgreSQL prepares every part of a statement each time it runs it, whether that part is
-- evaluated or not: those parts cost every successful call about a tenth of the server's
-- work for a new key. Now the statement leaves a refused receipt's size in the record it
-- writes (a byte 0, never the first byte of JSON text, then the size in decimal; nothing
-- for SQL NULL) and calls the function below only on failure; a key outside its window of
-- time writes no record, like a key that has one, and the lookup that follows tells them
-- apart (one more round trip, for those keys only).
--
-- idem.declared_result() (0005) stays for the libraries that call it.
--
-- idem.operation_consistent() (0008), which the CHECK constraint operations_consistent
-- calls on every write of idem.operations, keeps its rules and its signature: the same
-- arguments give the same answer, so the constraint and every row stand as they are
-- (nothing is rechecked or rewritten). PL/pgSQL prepares an expression anew in every
-- transaction that evaluates it; the new body evaluates a few small ones, chosen by the
-- state, instead of one that names every rule, and costs a write about a quarter less.

CREATE FUNCTION idem.declared_outcome(receipt bytea, effect_rows bigint,
                                      not_before timestamptz)
RETURNS bytea
LANGUAGE plpgsql
AS $$
BEGIN
    -- No record, and the key's UUIDv7 dated further ahead than the clock skew allowance
    -- (not_before is its time less the allowance): the lookup that follows says invalid,
    -- or answers from a record if one was made meanwhile, whatever the tool's rows.
    IF (receipt IS NULL AND now() < not_before) OR (effect_rows = 1 AND receipt IS NULL) THEN
        RAISE EXCEPTION 'the key already has a record, or its UUIDv7 is outside its window'
            USING ERRCODE = 'IDEM1';
    END IF;
    IF effect_rows <> 1 THEN
        RAISE EXCEPTION 'the declared statement returned % rows; it must return exactly one',
            effect_rows USING ERRCODE = 'IDEM2';
    END IF;
    IF octet_length(receipt) > 0 AND get_byte(receipt, 0) <> 0 THEN
        RETURN receipt;
    END IF;
    -- A refused receipt, as a negative count: -1 for SQL NULL, -N for N bytes over
    -- max_response_bytes.
    RAISE EXCEPTION 'the declared statement returned % rows; it must return exactly one',
        CASE WHEN octet_length(receipt) <= 1 THEN -1
             ELSE -convert_from(substr(receipt, 2), 'UTF8')::bigint END
        USING ERRCODE = 'IDEM2';
END
$$;

COMMENT ON FUNCTION idem.declared_outcome(bytea, bigint, timestamptz) IS
    'Used by declared effects, only when a call fails: raises IDEM1 (no record was written: the key already has one, or its UUIDv7 is outside its window, which starts at not_before; the lookup that follows answers) or IDEM2 (effect_failed, nothing stored: the declared statement did not return exactly one row, or returned a receipt refused as SQL NULL or over max_response_bytes; the count in the message says which). Returns a receipt it was given whole.';

REVOKE ALL ON FUNCTION idem.declared_outcome(bytea, bigint, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.declared_outcome(bytea, bigint, timestamptz) TO idem_app;

CREATE OR REPLACE FUNCTION idem.operation_consistent(state text, fingerprint_bytes integer,
                                                     no_response boolean, not_completed boolean,
                                                     not_expired boolean, no_downstream_key boolean,
                                                     no_attempts boolean, no_lease boolean)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    -- A downstream key and its attempts go together; a fingerprint is 32 bytes.
    IF no_downstream_key <> no_attempts OR fingerprint_bytes <> 32 THEN
        RETURN false;
    END IF;
    -- A receipt exactly for completed and failed records; completed_at except while pending
    -- or outcome_unknown; expired_at exactly for tombstones; a lease only while pending;
    -- outcome_unknown only with a downstream key; no other state.
    CASE state
    WHEN 'completed', 'failed' THEN
        RETURN NOT no_response AND NOT not_completed AND not_expired AND no_lease;
    WHEN 'pending' THEN
        RETURN no_response AND not_completed AND not_expired;
    WHEN 'expired' THEN
        RETURN no_response AND NOT not_completed AND NOT not_expired AND no_lease;
    WHEN 'outcome_unknown' THEN
        RETURN no_response AND not_completed AND not_expired AND no_lease
            AND NOT no_downstream_key;
    ELSE
        RETURN false;
    END CASE;
END
$$;
