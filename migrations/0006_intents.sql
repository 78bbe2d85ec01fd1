-- 0006: durable intents. When the agent runtime approves an action, idem records it with
-- the operation ID every attempt will use, so that a worker that restarts resumes the
-- action under the same key instead of inventing a new one (include/idem/intent.h).
--
-- Approving is idempotent on the caller's approval reference (a message ID, say): the
-- same reference gives the same intent and the same operation ID. An intent moves
-- approved -> attempted -> done, or needs_reconciliation (its operation ended expired or
-- outcome_unknown), or cancelled (only before any effect began). Recovery claims
-- unfinished intents, oldest first, with a lease, so that two restarted workers never
-- resume the same one at once.

CREATE TABLE idem.intents (
    tenant            text        NOT NULL,
    operation_id      text        NOT NULL,
    approval_ref      text        NOT NULL,
    tool              text        NOT NULL,
    payload_version   integer     NOT NULL,
    arguments         text        NOT NULL,
    fingerprint       bytea       NOT NULL,
    approved_by       text        NOT NULL,
    approved_at       timestamptz NOT NULL DEFAULT now(),
    state             text        NOT NULL DEFAULT 'approved',
    attempts          integer     NOT NULL DEFAULT 0,
    effect_attempt    integer,
    effect_started_at timestamptz,
    result_status     text,
    result_attempt    integer,
    last_error        text,
    lease_owner       text,
    lease_until       timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    cancelled_by      text,
    CONSTRAINT intents_pkey PRIMARY KEY (tenant, operation_id),
    CONSTRAINT intents_approval_ref_key UNIQUE (tenant, approval_ref),
    CONSTRAINT intents_state_known CHECK (state IN
        ('approved', 'attempted', 'done', 'needs_reconciliation', 'cancelled')),
    CONSTRAINT intents_fingerprint_size CHECK (octet_length(fingerprint) = 32),
    CONSTRAINT intents_finished CHECK (
        (state IN ('done', 'needs_reconciliation', 'cancelled')) = (finished_at IS NOT NULL)),
    CONSTRAINT intents_cancelled_before_effect CHECK (
        state <> 'cancelled' OR effect_started_at IS NULL),
    CONSTRAINT intents_lease_whole CHECK ((lease_owner IS NULL) = (lease_until IS NULL))
);

-- Recovery's scan: unfinished intents, oldest first, per tenant or across tenants.
CREATE INDEX intents_unfinished ON idem.intents (approved_at)
    WHERE state IN ('approved', 'attempted');
CREATE INDEX intents_unfinished_tenant ON idem.intents (tenant, approved_at)
    WHERE state IN ('approved', 'attempted');

COMMENT ON TABLE idem.intents IS
    'Approved actions with the operation ID that every attempt reuses, one row per (tenant, operation_id); idempotent on (tenant, approval_ref). A restarted worker finds the unfinished ones here (idem_intent_recover) and resumes them under the same key.';
COMMENT ON COLUMN idem.intents.tenant IS
    'Tenant of the action; first part of the key.';
COMMENT ON COLUMN idem.intents.operation_id IS
    'The operation ID made when the action was approved (a UUIDv7); the key of every attempt, local or external.';
COMMENT ON COLUMN idem.intents.approval_ref IS
    'The caller''s reference of the approval (a conversation''s message ID): approving again with it gives this intent.';
COMMENT ON COLUMN idem.intents.tool IS
    'The write tool to call.';
COMMENT ON COLUMN idem.intents.payload_version IS
    'Version of the tool''s argument schema.';
COMMENT ON COLUMN idem.intents.arguments IS
    'The approved arguments, as RFC 8785 canonical JSON; every attempt sends exactly these.';
COMMENT ON COLUMN idem.intents.fingerprint IS
    'SHA-256 of tool, version and arguments (as idem.operations.fingerprint): a second approval with the same reference and other arguments is refused.';
COMMENT ON COLUMN idem.intents.approved_by IS
    'Who approved the action (a user, a policy).';
COMMENT ON COLUMN idem.intents.approved_at IS
    'When the action was approved; recovery takes the oldest first.';
COMMENT ON COLUMN idem.intents.state IS
    'approved: not attempted yet; attempted: an attempt started and did not finish (it may be running, or its worker died: recovery resumes it); done: the operation answered created, replayed or rejected; needs_reconciliation: it answered expired, outcome_unknown or conflict (a reconciliation item of kind intent is open); cancelled: withdrawn before any effect began, never executed.';
COMMENT ON COLUMN idem.intents.attempts IS
    'Attempts started so far, over every worker; attempt N is sent to the store as idem_request.attempt = N.';
COMMENT ON COLUMN idem.intents.effect_attempt IS
    'The attempt whose effect began last: set in the local effect''s own transaction (so it commits with the effect), or before an external dispatch. After a crash it names the attempt that produced the result.';
COMMENT ON COLUMN idem.intents.effect_started_at IS
    'When an effect began (committed with a local effect; before an external dispatch). Once set, the intent can no longer be cancelled.';
COMMENT ON COLUMN idem.intents.result_status IS
    'The status of the operation when the intent finished (created, replayed, rejected, expired, outcome_unknown, conflict), or of the last attempt while it is attempted.';
COMMENT ON COLUMN idem.intents.result_attempt IS
    'The attempt that produced the result: the one whose effect committed (effect_attempt) when known, else the one that finished the intent.';
COMMENT ON COLUMN idem.intents.last_error IS
    'The last attempt''s error, when it did not finish the intent.';
COMMENT ON COLUMN idem.intents.lease_owner IS
    'Token of the worker that holds the intent (executing it, or recovered it); NULL when free.';
COMMENT ON COLUMN idem.intents.lease_until IS
    'When that lease lapses, on the database''s clock; after it another worker may take the intent.';
COMMENT ON COLUMN idem.intents.updated_at IS
    'When the intent last changed.';
COMMENT ON COLUMN idem.intents.finished_at IS
    'When it became done, needs_reconciliation or cancelled; NULL while unfinished.';
COMMENT ON COLUMN idem.intents.cancelled_by IS
    'Who cancelled it; NULL unless cancelled.';
