-- 0018: a declared effect's statement hands its record's marker as it is to a function
-- that reads it, idem.declared_outcome_marker().
--
-- The statement (lib/store/store_declared.c) ends with a check that returns the receipt
-- the record was written with, or calls a function that raises, so that the COMMIT sent
-- behind it in the same round trip is never carried out. A record written with a marker
-- instead of a receipt (a byte 0, then 'n' and the count of the tool's rows when the
-- statement did not return exactly one, or the size of a receipt over max_response_bytes,
-- or nothing for SQL NULL) told idem.declared_outcome() (0014, 0016) the count through an
-- expression of the statement's own. PostgreSQL prepares every part of a statement each
-- time it runs it, evaluated or not: that expression cost every successful call some
-- 8,000 instructions of the server's. The function below reads the marker itself and
-- answers through idem.declared_outcome(): the same SQLSTATEs, messages and fields.
--
-- idem.declared_outcome() stays as 0016 made it, for the libraries that call it.

CREATE FUNCTION idem.declared_outcome_marker(receipt bytea, not_before timestamptz)
RETURNS bytea
LANGUAGE plpgsql
AS $$
BEGIN
    -- No record (NULL): the key has one, or is outside its window; 0016's function says so
    -- for a count of one.
    RETURN idem.declared_outcome(
        receipt,
        CASE WHEN substr(receipt, 2, 1) = 'n'::bytea
             THEN convert_from(substr(receipt, 3), 'UTF8')::bigint ELSE 1 END,
        not_before);
END
$$;

COMMENT ON FUNCTION idem.declared_outcome_marker(bytea, timestamptz) IS
    'Used by declared effects, only when a call fails: reads the marker a record was written with instead of a receipt (a byte 0, then ''n'' and the count of the statement''s rows, or the size of a refused receipt, or nothing for SQL NULL; NULL for no record) and raises as idem.declared_outcome(bytea, bigint, timestamptz) does. Returns a receipt it was given whole.';

REVOKE ALL ON FUNCTION idem.declared_outcome_marker(bytea, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.declared_outcome_marker(bytea, timestamptz) TO idem_app;
