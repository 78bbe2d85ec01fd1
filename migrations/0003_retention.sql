-- 0003: retention. Records expire into tombstones, tombstones are forgotten later, and
-- late retries are recorded for reconciliation.
--
-- A tombstone is a row of idem.operations with state 'expired': the key, tool,
-- fingerprint and timestamps stay, the receipt and trace ID are dropped. Keeping it in
-- the same table means the store's claim (INSERT ... ON CONFLICT DO NOTHING) meets a
-- tombstone exactly as it meets a record, so no race between the sweeper and a call can
-- run an expired key's effect again.
--
-- One index on expires_at drives both passes of the sweeper (idem-sweep): for a record it
-- is the end of retention; when the sweeper tombstones a record it moves expires_at to
-- forget_at, the end of key memory, after which the tombstone itself is deleted.
--
-- On a large table this migration holds an exclusive lock while it checks the new
-- constraints and builds the index (a full scan each): calls wait meanwhile. Apply it at
-- a quiet time.

ALTER TABLE idem.operations
    ADD COLUMN forget_at timestamptz,
    ADD COLUMN expired_at timestamptz,
    DROP CONSTRAINT operations_state_known,
    DROP CONSTRAINT operations_record_consistent,
    ADD CONSTRAINT operations_state_known
        CHECK (state IN ('pending', 'completed', 'failed', 'expired')),
    ADD CONSTRAINT operations_record_consistent CHECK (
        octet_length(fingerprint) = 32
        AND (state IN ('pending', 'expired')) = (response IS NULL)
        AND (state = 'pending') = (completed_at IS NULL)
        AND (state = 'expired') = (expired_at IS NOT NULL));

CREATE INDEX operations_expires_at ON idem.operations (expires_at);

COMMENT ON COLUMN idem.operations.state IS
    'pending: claimed, effect not recorded yet; completed: effect committed, receipt stored; failed: the effect''s final failure, stored and replayed; expired: a tombstone, past retention, receipt dropped (a retry answers expired and is recorded in idem.reconciliation_items).';
COMMENT ON COLUMN idem.operations.response IS
    'The receipt: exact bytes returned to the first caller and to every replay. NULL while pending, and in a tombstone.';
COMMENT ON COLUMN idem.operations.expires_at IS
    'For a record: the end of its retention window, after which the sweeper turns it into a tombstone. For a tombstone: its forget_at; the sweeper deletes it twice the clock-skew allowance later. Indexed: drives both passes of the sweeper.';
COMMENT ON COLUMN idem.operations.forget_at IS
    'End of key memory, set when the key is claimed from the tool''s key-memory window: until then a retry is recognised (a record, then a tombstone). NULL for rows claimed before migration 0003: the sweeper then uses expires_at plus its default key memory.';
COMMENT ON COLUMN idem.operations.expired_at IS
    'When the sweeper turned the record into a tombstone; NULL for a record.';

CREATE TABLE idem.reconciliation_items (
    tenant              text        NOT NULL,
    operation_id        text        NOT NULL,
    kind                text        NOT NULL,
    tool                text        NOT NULL,
    fingerprint         bytea       NOT NULL,
    fingerprint_matches boolean,
    first_seen          timestamptz NOT NULL DEFAULT now(),
    last_seen           timestamptz NOT NULL DEFAULT now(),
    count               bigint      NOT NULL DEFAULT 1,
    resolved_at         timestamptz,
    resolved_by         text,
    note                text,
    CONSTRAINT reconciliation_items_pkey PRIMARY KEY (tenant, operation_id, kind),
    CONSTRAINT reconciliation_items_resolution CHECK ((resolved_at IS NULL) = (resolved_by IS NULL))
);

COMMENT ON TABLE idem.reconciliation_items IS
    'What needs a human: one row per (tenant, operation_id, kind), e.g. a retry that arrived after its key''s retention window and was not executed. Listed and resolved with idem-reconcile.';
COMMENT ON COLUMN idem.reconciliation_items.tenant IS
    'Tenant of the key; first part of the key.';
COMMENT ON COLUMN idem.reconciliation_items.operation_id IS
    'Operation ID of the key; second part of the key.';
COMMENT ON COLUMN idem.reconciliation_items.kind IS
    'What happened, an open set: expired (a retry after the retention window: it hit a tombstone, or its UUIDv7 was older than key memory); later kinds such as outcome_unknown come from external effects.';
COMMENT ON COLUMN idem.reconciliation_items.tool IS
    'Tool named by the latest request.';
COMMENT ON COLUMN idem.reconciliation_items.fingerprint IS
    'Fingerprint of the latest request (SHA-256, see idem.operations.fingerprint).';
COMMENT ON COLUMN idem.reconciliation_items.fingerprint_matches IS
    'Whether the latest request''s fingerprint equals the tombstone''s (same arguments: most likely a plain late retry); NULL when there was nothing to compare with (the key was already forgotten).';
COMMENT ON COLUMN idem.reconciliation_items.first_seen IS
    'When the first such request arrived.';
COMMENT ON COLUMN idem.reconciliation_items.last_seen IS
    'When the latest such request arrived.';
COMMENT ON COLUMN idem.reconciliation_items.count IS
    'How many such requests arrived.';
COMMENT ON COLUMN idem.reconciliation_items.resolved_at IS
    'When someone resolved the item; NULL while open. A new request of the same kind reopens it.';
COMMENT ON COLUMN idem.reconciliation_items.resolved_by IS
    'Who resolved it (the database role, or the name given to idem-reconcile --by); NULL while open.';
COMMENT ON COLUMN idem.reconciliation_items.note IS
    'What the resolver found or did; kept when the item is reopened.';
