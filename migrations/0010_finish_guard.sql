-- 0010: the record of a local effect is finished under a guard, and an operator may record
-- the resolution of a record its effect left pending.
--
-- A call's effect runs inside the transaction that claimed the key, and the statement that
-- finishes the record travels with COMMIT. An effect that changed the tenant setting
-- (SET LOCAL idem.tenant, set_config('idem.tenant', ..., true), in a function or a DO block
-- too), or changed or removed the claimed row, made that statement finish no row under
-- the tenant policy: the effect's writes committed and the record stayed pending. The
-- finishing statement now calls idem.finish_guard() with the call's tenant and the number
-- of rows it finished; the function raises unless the tenant is still the call's and
-- exactly one claimed row was finished, so that the COMMIT behind it rolls back: the call
-- ends effect_failed and nothing of it is kept.
--
-- A local record still pending long after its claim (from an earlier version, or any other
-- cause) is listed by idem-reconcile as kind stalled_pending and resolved with --as
-- completed or --as failed; its effect may have committed, so it is never run again.
-- The resolution's note is kept as a resolved item of that kind, which the operator's
-- role inserts (it inserts nothing else).

CREATE FUNCTION idem.finish_guard(call_tenant text, finished bigint)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    now_tenant text := current_setting('idem.tenant', true);
BEGIN
    IF now_tenant IS DISTINCT FROM call_tenant THEN
        RAISE EXCEPTION 'the effect changed idem.tenant from % to %; nothing of the call is kept',
            quote_literal(call_tenant), coalesce(quote_literal(now_tenant), 'no tenant')
            USING ERRCODE = 'IDEM3',
                  HINT = 'An effect runs as the call''s tenant: it must not set idem.tenant.';
    END IF;
    IF finished <> 1 THEN
        RAISE EXCEPTION 'the effect changed or removed the operation''s claimed record; nothing of the call is kept'
            USING ERRCODE = 'IDEM4',
                  HINT = 'An effect must not write idem.operations.';
    END IF;
    RETURN 1;
END
$$;

COMMENT ON FUNCTION idem.finish_guard(text, bigint) IS
    'Called by the statement that finishes a local effect''s record, in the same round trip as COMMIT: raises IDEM3 when the effect changed idem.tenant, IDEM4 when not exactly one claimed row was finished, so that the transaction (the effect''s writes with it) rolls back instead of committing without its record.';

REVOKE ALL ON FUNCTION idem.finish_guard(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.finish_guard(text, bigint) TO idem_app;

CREATE POLICY operator_record_stalled ON idem.reconciliation_items FOR INSERT TO idem_operator
    WITH CHECK (kind = 'stalled_pending' AND resolved_at IS NOT NULL);
GRANT INSERT ON idem.reconciliation_items TO idem_operator;

COMMENT ON COLUMN idem.reconciliation_items.kind IS
    'What happened, an open set: expired (a retry after the retention window: it hit a tombstone, or its UUIDv7 was older than key memory); outcome_unknown (an external dispatch whose result is not known); outbox_exhausted (an outbox item spent its attempts); lease_lost (an attempt reported a dispatch after its lease had been taken over: the provider may have acted twice); stalled_pending (a local record left pending after its transaction ended: its effect may have committed).';
