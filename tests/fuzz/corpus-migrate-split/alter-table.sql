ALTER TABLE IF EXISTS ONLY "s,1".t *
    ADD COLUMN a numeric(10, 2) DEFAULT 1, -- a, comment
    ADD COLUMN b text[] DEFAULT ARRAY['x', $q$y,z$q$],
    DROP CONSTRAINT c,
    ADD CONSTRAINT c CHECK (a > 0 AND b <> '{}');
ALTER TABLE t ADD x int;
