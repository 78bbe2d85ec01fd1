-- 0001: the operations table, one row per (tenant, operation_id).
--
-- idem-migrate creates the schema "idem" and its ledger (idem.schema_migrations)
-- before the first migration runs; every migration runs in that schema's namespace.
--
-- The library checks tenant, operation_id, tool, payload_version and trace_id before it
-- writes (include/idem/validate.h). The CHECKs here guard only the record's own
-- consistency, and are few on purpose: PostgreSQL evaluates every CHECK on every write,
-- and on this table each call writes twice (claim, then receipt).

CREATE TABLE idem.operations (
    tenant          text        NOT NULL,
    operation_id    text        NOT NULL,
    tool            text        NOT NULL,
    payload_version integer     NOT NULL,
    fingerprint     bytea       NOT NULL,
    state           text        NOT NULL,
    response        bytea,
    trace_id        text,
    claim_token     uuid        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    expires_at      timestamptz NOT NULL,
    CONSTRAINT operations_pkey PRIMARY KEY (tenant, operation_id),
    CONSTRAINT operations_state_known CHECK (state IN ('pending', 'completed', 'failed')),
    CONSTRAINT operations_record_consistent CHECK (
        octet_length(fingerprint) = 32
        AND (state = 'pending') = (response IS NULL)
        AND (state = 'pending') = (completed_at IS NULL))
);

COMMENT ON TABLE idem.operations IS
    'One row per idempotency key (tenant, operation_id): the request''s fingerprint and the receipt returned to its first caller, replayed byte for byte to every retry.';
COMMENT ON COLUMN idem.operations.tenant IS
    'Tenant the caller authorized before calling; first part of the key. Never shared across tenants.';
COMMENT ON COLUMN idem.operations.operation_id IS
    'Caller-allocated ID of one approved action (UUIDv7 from idem_uuid_v7 or any valid ID); second part of the key.';
COMMENT ON COLUMN idem.operations.tool IS
    'Name of the write tool that was called.';
COMMENT ON COLUMN idem.operations.payload_version IS
    'Version of the tool''s argument schema, part of the fingerprint.';
COMMENT ON COLUMN idem.operations.fingerprint IS
    'SHA-256 of the RFC 8785 canonical JSON {"arguments":...,"tool":...,"version":...}; a retry with another fingerprint is a conflict.';
COMMENT ON COLUMN idem.operations.state IS
    'pending: claimed, effect not recorded yet; completed: effect committed, receipt stored; failed: the effect''s final failure, stored and replayed.';
COMMENT ON COLUMN idem.operations.response IS
    'The receipt: exact bytes returned to the first caller and to every replay. NULL while pending.';
COMMENT ON COLUMN idem.operations.trace_id IS
    'Provider tool-call ID of the first attempt, for tracing only; never part of the key.';
COMMENT ON COLUMN idem.operations.claim_token IS
    'Random token of the attempt that claimed the key; lets an attempt whose COMMIT reply was lost recognise its own row.';
COMMENT ON COLUMN idem.operations.created_at IS
    'When the key was first claimed.';
COMMENT ON COLUMN idem.operations.completed_at IS
    'When the receipt was stored; NULL while pending.';
COMMENT ON COLUMN idem.operations.expires_at IS
    'End of the retention window; after it the sweeper turns the row into a tombstone.';
