-- Test migration: CREATE INDEX CONCURRENTLY refuses to run in a transaction block (or
-- in a multi-statement query string), so this file opts out of the transaction:
-- idem:no-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS items_tenant_label ON idem.items (tenant, label);
CREATE INDEX CONCURRENTLY IF NOT EXISTS items_tenant_label_desc ON idem.items (tenant, label DESC);
