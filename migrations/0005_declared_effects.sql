-- 0005: declared effects (idem_store_execute_declared): a tool's one SQL statement and its
-- record in one statement of the store's, so that a new key costs one round trip.
--
-- That statement writes the record only when the key is free and the tool's statement
-- returned exactly one row; otherwise it calls this function, which raises, so that the
-- COMMIT sent behind it in the same round trip is never carried out and nothing of the
-- tool's statement is kept.

CREATE FUNCTION idem.declared_result(response bytea, effect_rows bigint)
RETURNS bytea
LANGUAGE plpgsql
AS $$
BEGIN
    IF response IS NOT NULL THEN
        RETURN response;
    END IF;
    IF effect_rows <> 1 THEN
        RAISE EXCEPTION 'the declared statement returned % rows; it must return exactly one', effect_rows
            USING ERRCODE = 'IDEM2';
    END IF;
    RAISE EXCEPTION 'the key already has a record' USING ERRCODE = 'IDEM1';
END
$$;

COMMENT ON FUNCTION idem.declared_result(bytea, bigint) IS
    'Used by declared effects: returns the stored receipt, or raises IDEM1 (the key already has a record: the call answers from it) or IDEM2 (the declared statement did not return exactly one row: effect_failed, nothing stored).';
