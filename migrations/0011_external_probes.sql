-- 0011: what providers answered when asked about an external operation whose outcome was
-- unknown. An application registers a resolver per tool (include/idem/external.h): a
-- retry that meets outcome_unknown, or a worker's idem_external_probe(), asks the provider
-- about the downstream key, and every answer is kept here, whether or not it changed the
-- record. A definite answer changes the record once, however many ask at the same time:
-- done (completed, the provider's result its receipt), failed (failed: later calls are
-- rejected), or not done (pending again, dispatched once more with the same downstream
-- key); its open outcome_unknown item is resolved, naming the resolver. An unknown answer
-- changes nothing and keeps its reason.

CREATE TABLE idem.external_probes (
    tenant       text        NOT NULL,
    operation_id text        NOT NULL,
    probe_id     uuid        NOT NULL,
    answered_at  timestamptz NOT NULL DEFAULT now(),
    took_ms      integer     NOT NULL,
    asked_by     text        NOT NULL,
    resolver     text        NOT NULL,
    answer       text        NOT NULL,
    provider_ref text,
    result       text,
    reason       text,
    changed      boolean     NOT NULL,
    CONSTRAINT external_probes_pkey PRIMARY KEY (tenant, operation_id, probe_id),
    CONSTRAINT external_probes_operation FOREIGN KEY (tenant, operation_id)
        REFERENCES idem.operations (tenant, operation_id) ON DELETE CASCADE,
    CONSTRAINT external_probes_asked_by_known CHECK (asked_by IN ('retry', 'probe')),
    CONSTRAINT external_probes_answer_known CHECK (answer IN
        ('done', 'failed', 'not_done', 'unknown')),
    CONSTRAINT external_probes_took_ms_positive CHECK (took_ms >= 0),
    CONSTRAINT external_probes_changed_definite CHECK (NOT changed OR answer <> 'unknown')
);

SELECT idem.isolate_tenants('idem.external_probes');

COMMENT ON TABLE idem.external_probes IS
    'Answers of providers about external operations whose outcome was unknown, one row per question asked by a resolver (include/idem/external.h), oldest first by probe_id (a UUIDv7). Deleted with its operation record.';
COMMENT ON COLUMN idem.external_probes.tenant IS
    'Tenant of the operation; first part of the key.';
COMMENT ON COLUMN idem.external_probes.operation_id IS
    'Operation ID of the operation; second part of the key.';
COMMENT ON COLUMN idem.external_probes.probe_id IS
    'A UUIDv7 made when the question was asked: its order is the order the questions were asked in.';
COMMENT ON COLUMN idem.external_probes.answered_at IS
    'When the answer was recorded, on the database''s clock.';
COMMENT ON COLUMN idem.external_probes.took_ms IS
    'How long the resolver took to answer (or was waited for, when it gave no answer in time).';
COMMENT ON COLUMN idem.external_probes.asked_by IS
    'retry: a call of idem_external_begin() that met outcome_unknown; probe: idem_external_probe(), from an application''s worker.';
COMMENT ON COLUMN idem.external_probes.resolver IS
    'The name of the resolver that asked the provider (idem_external_resolver.name).';
COMMENT ON COLUMN idem.external_probes.answer IS
    'done: the provider did it; failed: it refused for good; not_done: it has no record of the key (safe to dispatch again with the same key); unknown: no usable answer (the resolver said so, failed, gave no answer in time or an answer that cannot be used; reason says which).';
COMMENT ON COLUMN idem.external_probes.provider_ref IS
    'The provider''s reference the resolver reported, if any.';
COMMENT ON COLUMN idem.external_probes.result IS
    'done and failed: the provider''s result as RFC 8785 canonical JSON (the receipt, when the answer changed the record).';
COMMENT ON COLUMN idem.external_probes.reason IS
    'Why the answer is unknown, or what the resolver said with a definite one.';
COMMENT ON COLUMN idem.external_probes.changed IS
    'Whether this answer changed the record (only one answer does); false when another had already settled it, or for an unknown answer.';
