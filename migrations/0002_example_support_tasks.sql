-- 0002: the example write tool's table (support tasks, as in idem-demo).
--
-- This table belongs to the bundled example tool "create_support_task", used by
-- idem-demo, idem-bench and the test suite. A real deployment's own effects write to
-- their own tables; this one is small and harmless to keep.

CREATE TABLE idem.support_tasks (
    tenant       text        NOT NULL,
    task_id      bigint      GENERATED ALWAYS AS IDENTITY,
    subject      text        NOT NULL,
    status       text        NOT NULL DEFAULT 'open',
    operation_id text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT support_tasks_pkey PRIMARY KEY (tenant, task_id),
    CONSTRAINT support_tasks_subject_length CHECK (char_length(subject) BETWEEN 1 AND 200),
    CONSTRAINT support_tasks_status_known CHECK (status IN ('open', 'closed'))
);

COMMENT ON TABLE idem.support_tasks IS
    'Example tool only: support tasks created through idem by create_support_task.';
COMMENT ON COLUMN idem.support_tasks.tenant IS 'Tenant that owns the task.';
COMMENT ON COLUMN idem.support_tasks.task_id IS 'Task number, assigned at creation.';
COMMENT ON COLUMN idem.support_tasks.subject IS 'What the task is about (1-200 characters).';
COMMENT ON COLUMN idem.support_tasks.status IS 'Current state: open or closed; changes after creation, unlike the receipt.';
COMMENT ON COLUMN idem.support_tasks.operation_id IS 'The operation that created the task (for tracing; the key lives in idem.operations).';
COMMENT ON COLUMN idem.support_tasks.created_at IS 'When the task was created.';
