-- idem-roles.sql: the group roles that idem's schema grants to (migration 0007), for a
-- cluster whose migrator may not create roles. A superuser (or a role with CREATEROLE)
-- runs it once per cluster, before `idem-migrate up`:
--
--     psql -v ON_ERROR_STOP=1 -d postgres -f tools/idem-roles.sql
--
-- It only creates the roles that are missing; running it again changes nothing. The roles
-- cannot log in: grant them to login roles, then (migrations/README.md, "Security"):
--
--     GRANT idem_app TO my_server;            -- the application, linked with libidem
--     GRANT idem_sweeper TO my_sweeper;       -- idem-sweep
--     GRANT idem_operator TO my_operator;     -- idem-reconcile
--     GRANT idem_sweeper, idem_operator TO my_sweeper;  -- idem-sweep --config (resolvers)
--
-- The grants are the migrations' (0007 and later, migrations/README.md), not this script's.
--
-- Membership must be inherited (the default, INHERIT): idem's policies and grants name the
-- group roles, and apply to their members.

DO $roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['idem_app', 'idem_operator', 'idem_sweeper'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$roles$;

COMMENT ON ROLE idem_app IS
    'idem: the application (libidem). DML on idem''s tables, only for the tenant set in each transaction (row-level security); no DDL.';
COMMENT ON ROLE idem_sweeper IS
    'idem: idem-sweep. Expires records into tombstones and purges tombstones across tenants; reads no receipt, inserts no operation.';
COMMENT ON ROLE idem_operator IS
    'idem: idem-reconcile. Reads and resolves operations and reconciliation items across tenants; inserts only the resolved stalled_pending items and the providers'' answers it asks for (idem.external_probes, in the question''s tenant); deletes nothing.';
