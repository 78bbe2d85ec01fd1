-- 0016: idem.declared_outcome() says which rule a declared effect broke in fields the
-- library reads, not in the words of its message.
--
-- 0014's function raises IDEM2 for three failures (the statement did not return exactly
-- one row; it returned SQL NULL; its receipt is over max_response_bytes) and tells them
-- apart only by a count inside its message. The same function now names the rule in the
-- error's constraint name (PG_DIAG_CONSTRAINT_NAME) and, for a receipt over the limit,
-- gives its size in bytes at the start of the DETAIL:
--
--   declared_one_row        the statement returned effect_rows rows (DETAIL: the count)
--   declared_receipt_json   the statement returned SQL NULL instead of JSON
--   declared_receipt_size   the receipt is over max_response_bytes (DETAIL: its bytes)
--
-- The SQLSTATEs, the signature and the grants stay as 0014 made them; the messages say
-- the same, in words a reader can take without the count. A library that reads the fields
-- still works against 0014's function: it then cannot tell the three apart and says so.

CREATE OR REPLACE FUNCTION idem.declared_outcome(receipt bytea, effect_rows bigint,
                                                 not_before timestamptz)
RETURNS bytea
LANGUAGE plpgsql
AS $$
BEGIN
    IF (receipt IS NULL AND now() < not_before) OR (effect_rows = 1 AND receipt IS NULL) THEN
        RAISE EXCEPTION 'the key already has a record, or its UUIDv7 is outside its window'
            USING ERRCODE = 'IDEM1';
    END IF;
    IF effect_rows <> 1 THEN
        RAISE EXCEPTION 'the declared statement returned % rows; it must return exactly one',
            effect_rows
            USING ERRCODE = 'IDEM2', CONSTRAINT = 'declared_one_row',
                  DETAIL = effect_rows::text || ' rows';
    END IF;
    IF octet_length(receipt) > 0 AND get_byte(receipt, 0) <> 0 THEN
        RETURN receipt;
    END IF;
    IF octet_length(receipt) <= 1 THEN
        RAISE EXCEPTION 'the declared statement returned SQL NULL instead of JSON'
            USING ERRCODE = 'IDEM2', CONSTRAINT = 'declared_receipt_json';
    END IF;
    RAISE EXCEPTION 'the declared statement''s receipt is over max_response_bytes'
        USING ERRCODE = 'IDEM2', CONSTRAINT = 'declared_receipt_size',
              DETAIL = convert_from(substr(receipt, 2), 'UTF8') || ' bytes';
END
$$;

COMMENT ON FUNCTION idem.declared_outcome(bytea, bigint, timestamptz) IS
    'Used by declared effects, only when a call fails: raises IDEM1 (no record was written: the key already has one, or its UUIDv7 is outside its window, which starts at not_before; the lookup that follows answers) or IDEM2 (effect_failed, nothing stored), naming the rule in the constraint name: declared_one_row (the statement did not return exactly one row; DETAIL starts with the count), declared_receipt_json (it returned SQL NULL), declared_receipt_size (the receipt is over max_response_bytes; DETAIL starts with its bytes). Returns a receipt it was given whole.';
