-- 0007: tenant isolation enforced by PostgreSQL (row-level security) and least-privilege
-- roles.
--
-- Every table of schema idem that has a tenant column admits only the rows of the tenant
-- set for the current transaction: the library sends set_config('idem.tenant', <tenant>,
-- true) in the same round trip as each transaction's first statements. A session that
-- sets no tenant sees nothing and can write nothing. FORCE makes the tables' owner (the
-- migrator) subject to the policies too; superusers and BYPASSRLS roles are not.
--
-- The roles are cluster-wide group roles without LOGIN; a DBA grants them to login roles
-- (GRANT idem_app TO my_server):
--   idem_app       the application (libidem): DML on idem's tables, inside its tenant
--   idem_sweeper   idem-sweep: expires and purges across tenants; reads no receipt, inserts
--                  no operation
--   idem_operator  idem-reconcile: reads and resolves across tenants; inserts and deletes
--                  nothing
-- The migration creates them when they are missing and the migrator may (superuser or
-- CREATEROLE); otherwise a superuser runs tools/idem-roles.sql first.
--
-- A LATER MIGRATION THAT ADDS A TABLE WITH A TENANT COLUMN MUST ISOLATE IT TOO, in the same
-- migration: SELECT idem.isolate_tenants('idem.<table>'); (and grant the sweeper and
-- operator what they need of it beyond that).

DO $roles$
DECLARE
    missing text[];
    r text;
BEGIN
    SELECT array_agg(n ORDER BY n) INTO missing
        FROM unnest(ARRAY['idem_app', 'idem_operator', 'idem_sweeper']) AS n
        WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = n);
    IF missing IS NULL THEN
        RETURN;
    END IF;
    IF NOT (SELECT rolsuper OR rolcreaterole FROM pg_catalog.pg_roles
            WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'roles % do not exist, and role % may not create them',
            array_to_string(missing, ', '), current_user
            USING ERRCODE = '42501',
                  HINT = 'A superuser runs tools/idem-roles.sql once per cluster '
                         '(psql -f tools/idem-roles.sql), then idem-migrate up again.';
    END IF;
    FOREACH r IN ARRAY missing LOOP
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- another database of this cluster created it meanwhile
        END;
    END LOOP;
END
$roles$;

CREATE FUNCTION idem.isolate_tenants(tbl regclass)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    p name;
BEGIN
    -- Called again on a table, it replaces its policies.
    FOR p IN SELECT polname FROM pg_catalog.pg_policy WHERE polrelid = tbl
             AND polname IN ('tenant_isolation', 'operator_read', 'operator_resolve') LOOP
        EXECUTE format('DROP POLICY %I ON %s', p, tbl);
    END LOOP;
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format('CREATE POLICY tenant_isolation ON %s'
                   ' USING (tenant = current_setting(''idem.tenant'', true))'
                   ' WITH CHECK (tenant = current_setting(''idem.tenant'', true))', tbl);
    EXECUTE format('CREATE POLICY operator_read ON %s FOR SELECT TO idem_operator'
                   ' USING (true)', tbl);
    EXECUTE format('CREATE POLICY operator_resolve ON %s FOR UPDATE TO idem_operator'
                   ' USING (true) WITH CHECK (true)', tbl);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO idem_app', tbl);
    EXECUTE format('GRANT SELECT, UPDATE ON %s TO idem_operator', tbl);
END
$$;

REVOKE ALL ON FUNCTION idem.isolate_tenants(regclass) FROM PUBLIC;

COMMENT ON FUNCTION idem.isolate_tenants(regclass) IS
    'Row-level security for a table of tenant data (column tenant): ENABLE and FORCE, policy tenant_isolation (only the rows of current_setting(''idem.tenant'')), idem_operator may read and update every tenant''s rows, idem_app gets DML through the policy. Every migration that adds such a table calls it.';

DO $tables$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_catalog.pg_class c
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
             WHERE n.nspname = 'idem' AND c.relkind IN ('r', 'p') AND a.attname = 'tenant'
             AND NOT a.attisdropped
             ORDER BY c.relname LOOP
        PERFORM idem.isolate_tenants(t);
    END LOOP;
END
$tables$;

GRANT USAGE ON SCHEMA idem TO idem_app, idem_sweeper, idem_operator;
GRANT EXECUTE ON FUNCTION idem.declared_result(bytea, bigint) TO idem_app;

-- The sweeper: tombstones (UPDATE to state expired, receipt and trace ID dropped) and
-- purges tombstones, across tenants. It reads no receipt (no SELECT on response, trace_id,
-- provider_ref), writes nothing but a tombstone, and inserts nothing.
CREATE POLICY sweeper_read ON idem.operations FOR SELECT TO idem_sweeper USING (true);
CREATE POLICY sweeper_expire ON idem.operations FOR UPDATE TO idem_sweeper
    USING (true) WITH CHECK (state = 'expired' AND response IS NULL);
CREATE POLICY sweeper_purge ON idem.operations FOR DELETE TO idem_sweeper
    USING (state = 'expired');
CREATE POLICY sweeper_read ON idem.reconciliation_items FOR SELECT TO idem_sweeper
    USING (true);
-- ctid: each batch finds the rows it locked again by their ctid (lib/sweep.c).
GRANT SELECT (ctid, tenant, operation_id, tool, payload_version, fingerprint, state,
              created_at, completed_at, expires_at, forget_at, expired_at)
    ON idem.operations TO idem_sweeper;
GRANT UPDATE (state, response, trace_id, expired_at, expires_at)
    ON idem.operations TO idem_sweeper;
GRANT DELETE ON idem.operations TO idem_sweeper;
GRANT SELECT (tenant, kind, count, resolved_at) ON idem.reconciliation_items TO idem_sweeper;
