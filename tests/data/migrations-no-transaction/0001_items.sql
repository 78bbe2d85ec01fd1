-- Test migration: a table with rows, indexed by the next (no-transaction) migration.
CREATE TABLE idem.items (
    tenant text   NOT NULL,
    id     bigint NOT NULL,
    label  text   NOT NULL,
    CONSTRAINT items_pkey PRIMARY KEY (tenant, id)
);
INSERT INTO idem.items SELECT 't', g, 'label ' || g FROM generate_series(1, 100) g;
