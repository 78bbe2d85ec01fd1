-- 0009: idem's roles may read the ledger idem.schema_migrations.
--
-- A server calls idem_migrate_check() at start-up (and idem-demo idem_migrate_up()) as a
-- member of idem_app, and both read the ledger: without this they fail with "permission
-- denied for table schema_migrations". The sweeper's and the operator's roles get it too,
-- for idem-migrate status and verify run as them. Read-only: the ledger is not tenant
-- data (no row-level security) and holds nothing secret (file names, checksums, when and
-- by which role each migration was applied); only the migrator writes it.
--
-- A ledger created after this migration is applied (baseline re-creating a lost one)
-- gets the same grant where it is created (lib/migrate_ledger.c).

GRANT SELECT ON idem.schema_migrations TO idem_app, idem_sweeper, idem_operator;
