-- 0004: external effects. An email, a payment or another service's API cannot join the
-- local transaction, so such an operation is recorded before it is dispatched: pending,
-- with the downstream idempotency key the provider receives on every attempt and a lease
-- that one attempt at a time holds. Each attempt is recorded. The operation ends
-- completed, failed, or outcome_unknown (the dispatch happened and its result is not
-- known), which goes to reconciliation and is never dispatched again by itself.
--
-- An outbox lets a local effect enqueue external work in its own transaction: the item's
-- operation record (pending, with its own downstream key) and its arguments commit with
-- the effect, and a worker claims due items and dispatches them through the same
-- protocol.
--
-- Local operations leave every new column NULL. On a large table this migration holds an
-- exclusive lock on idem.operations while it checks the new constraints (a full scan):
-- apply it at a quiet time.

ALTER TABLE idem.operations
    ADD COLUMN downstream_key text,
    ADD COLUMN attempts integer,
    ADD COLUMN lease_expires_at timestamptz,
    ADD COLUMN provider_ref text,
    DROP CONSTRAINT operations_state_known,
    DROP CONSTRAINT operations_record_consistent,
    ADD CONSTRAINT operations_state_known
        CHECK (state IN ('pending', 'completed', 'failed', 'expired', 'outcome_unknown')),
    ADD CONSTRAINT operations_record_consistent CHECK (
        octet_length(fingerprint) = 32
        AND (state IN ('pending', 'expired', 'outcome_unknown')) = (response IS NULL)
        AND (state IN ('pending', 'outcome_unknown')) = (completed_at IS NULL)
        AND (state = 'expired') = (expired_at IS NOT NULL)),
    ADD CONSTRAINT operations_external_consistent CHECK (
        (downstream_key IS NULL) = (attempts IS NULL)
        AND (lease_expires_at IS NULL OR state = 'pending')
        AND (state <> 'outcome_unknown' OR downstream_key IS NOT NULL));

COMMENT ON COLUMN idem.operations.state IS
    'pending: claimed, effect not recorded yet (an external effect: before or during dispatch); completed: effect committed, receipt stored; failed: the effect''s final failure, stored and replayed; expired: a tombstone, past retention, receipt dropped (a retry answers expired and is recorded in idem.reconciliation_items); outcome_unknown: an external dispatch happened and its result is not known: every call answers outcome_unknown until someone resolves it (idem-reconcile resolve --as).';
COMMENT ON COLUMN idem.operations.response IS
    'The receipt: exact bytes returned to the first caller and to every replay. NULL while pending or outcome_unknown, and in a tombstone.';
COMMENT ON COLUMN idem.operations.completed_at IS
    'When the receipt was stored; NULL while pending or outcome_unknown.';
COMMENT ON COLUMN idem.operations.claim_token IS
    'Random token of the attempt that claimed the key; lets an attempt whose COMMIT reply was lost recognise its own row. For an external effect: the token of the attempt that holds (or last held) the lease; only that attempt may complete, fail, extend or release it.';
COMMENT ON COLUMN idem.operations.downstream_key IS
    'External effects: the idempotency key passed to the provider, made once when the key is claimed and the same on every attempt. NULL for a local effect.';
COMMENT ON COLUMN idem.operations.attempts IS
    'External effects: dispatch attempts started so far (leases taken); see idem.external_attempts. NULL for a local effect.';
COMMENT ON COLUMN idem.operations.lease_expires_at IS
    'External effects: when the lease of the attempt holding the key ends, on the database''s clock. Until then every other call answers in_progress; after it the next call resumes as a new attempt with the same downstream key. NULL when no attempt holds the key.';
COMMENT ON COLUMN idem.operations.provider_ref IS
    'External effects: the provider''s reference for the effect (a message or payment ID), from the attempt that completed it or from the reconciliation that resolved it.';

CREATE TABLE idem.external_attempts (
    tenant       text        NOT NULL,
    operation_id text        NOT NULL,
    attempt      integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    ended_at     timestamptz,
    outcome      text,
    provider_ref text,
    error        text,
    CONSTRAINT external_attempts_pkey PRIMARY KEY (tenant, operation_id, attempt),
    CONSTRAINT external_attempts_operation FOREIGN KEY (tenant, operation_id)
        REFERENCES idem.operations (tenant, operation_id) ON DELETE CASCADE,
    CONSTRAINT external_attempts_outcome_known CHECK (outcome IN
        ('completed', 'failed', 'retry', 'released', 'unknown', 'lease_expired')),
    CONSTRAINT external_attempts_ended CHECK ((ended_at IS NULL) = (outcome IS NULL))
);

COMMENT ON TABLE idem.external_attempts IS
    'Attempt history of external effects: one row per lease taken on an operation, from its start to what the attempt reported. Deleted with its operation record (when the sweeper forgets the key).';
COMMENT ON COLUMN idem.external_attempts.tenant IS
    'Tenant of the operation; first part of the key.';
COMMENT ON COLUMN idem.external_attempts.operation_id IS
    'Operation ID of the operation; second part of the key.';
COMMENT ON COLUMN idem.external_attempts.attempt IS
    'Attempt number, from 1; third part of the key.';
COMMENT ON COLUMN idem.external_attempts.started_at IS
    'When the attempt took the lease.';
COMMENT ON COLUMN idem.external_attempts.ended_at IS
    'When the attempt reported its outcome, or when its lease was found lapsed and taken over; NULL while it runs.';
COMMENT ON COLUMN idem.external_attempts.outcome IS
    'completed: the provider did it; failed: the provider''s final refusal; retry: a transient failure, nothing done, lease released; released: lease given back without a dispatch; unknown: dispatched, result not known; lease_expired: the lease lapsed with nothing reported and a later attempt took over. NULL while the attempt runs.';
COMMENT ON COLUMN idem.external_attempts.provider_ref IS
    'The provider''s reference the attempt reported, if any.';
COMMENT ON COLUMN idem.external_attempts.error IS
    'What went wrong, as the attempt reported it (failed, retry, unknown).';

CREATE TABLE idem.outbox (
    tenant              text        NOT NULL,
    operation_id        text        NOT NULL,
    parent_operation_id text,
    tool                text        NOT NULL,
    payload_version     integer     NOT NULL,
    arguments           text        NOT NULL,
    state               text        NOT NULL DEFAULT 'queued',
    max_attempts        integer     NOT NULL,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    last_error          text,
    CONSTRAINT outbox_pkey PRIMARY KEY (tenant, operation_id),
    CONSTRAINT outbox_operation FOREIGN KEY (tenant, operation_id)
        REFERENCES idem.operations (tenant, operation_id) ON DELETE CASCADE,
    CONSTRAINT outbox_state_known CHECK (state IN
        ('queued', 'completed', 'failed', 'outcome_unknown', 'exhausted')),
    CONSTRAINT outbox_max_attempts_positive CHECK (max_attempts > 0)
);

CREATE INDEX outbox_due ON idem.outbox (tenant, next_attempt_at) WHERE state = 'queued';

COMMENT ON TABLE idem.outbox IS
    'External work enqueued by a local effect in its own transaction, one row per item; the item''s operation record (pending, with its downstream key) is in idem.operations under the same key. Workers claim due items with FOR UPDATE SKIP LOCKED.';
COMMENT ON COLUMN idem.outbox.tenant IS
    'Tenant of the effect that enqueued the item; first part of the key.';
COMMENT ON COLUMN idem.outbox.operation_id IS
    'The item''s own operation ID (a UUIDv7 made at enqueue); second part of the key.';
COMMENT ON COLUMN idem.outbox.parent_operation_id IS
    'The operation whose effect enqueued the item.';
COMMENT ON COLUMN idem.outbox.tool IS
    'The external tool to call (part of the item''s fingerprint).';
COMMENT ON COLUMN idem.outbox.payload_version IS
    'Version of the tool''s argument schema (part of the fingerprint).';
COMMENT ON COLUMN idem.outbox.arguments IS
    'The arguments, as RFC 8785 canonical JSON.';
COMMENT ON COLUMN idem.outbox.state IS
    'queued: due at next_attempt_at; completed, failed, outcome_unknown: as its operation; exhausted: max_attempts spent, moved to reconciliation (kind outbox_exhausted).';
COMMENT ON COLUMN idem.outbox.max_attempts IS
    'Attempts after which the item is no longer dispatched and goes to reconciliation.';
COMMENT ON COLUMN idem.outbox.next_attempt_at IS
    'When the item is next due: now at enqueue, then after each transient failure an exponential backoff with jitter; while an attempt holds the lease, the lease''s end.';
COMMENT ON COLUMN idem.outbox.created_at IS
    'When the item was enqueued.';
COMMENT ON COLUMN idem.outbox.updated_at IS
    'When the item last changed.';
COMMENT ON COLUMN idem.outbox.last_error IS
    'The latest attempt''s error, if it failed.';

COMMENT ON COLUMN idem.reconciliation_items.kind IS
    'What happened, an open set: expired (a retry after the retention window: it hit a tombstone, or its UUIDv7 was older than key memory); outcome_unknown (an external dispatch whose result is not known); outbox_exhausted (an outbox item spent its attempts); lease_lost (an attempt reported a dispatch after its lease had been taken over: the provider may have acted twice).';
