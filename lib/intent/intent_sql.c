/* The SQL of durable intents, in one place. Every statement that names a tenant runs after
 * the tenant's commands (tenant.h), in a transaction of its own in the same pipeline, so that
 * row-level security sees the tenant; recovery across tenants runs without it. Leases are
 * judged on the database's clock. */
#include "intent_internal.h"

/* Microseconds since the Unix epoch of a timestamptz, as int8; through an interval, whose
 * extract() is immutable (a timestamptz's is stable, which Citus refuses in a distributed
 * statement's RETURNING). */
#define US(x) "(extract(epoch FROM " x " - '1970-01-01 00:00:00+00'::timestamptz) * 1000000)::int8"

/* An intent row, in the order of enum intent_col. */
#define COLS                                                                                       \
    " i.tenant, i.operation_id, i.approval_ref, i.tool, i.payload_version, i.arguments,"           \
    " encode(i.fingerprint, 'hex') AS fingerprint_hex, i.approved_by,"                             \
    " " US("i.approved_at") " AS approved_at_us, i.state, i.attempts, i.result_status,"            \
                            " i.result_attempt, i.last_error, i.lease_owner, " US(                 \
                                "i.lease_until") " AS lease_until_us"

#define KEY " i.tenant = $1 AND i.operation_id = $2"

/* A lease that no one holds, or that has lapsed. */
#define LEASE_FREE " (i.lease_until IS NULL OR i.lease_until <= now())"

/* Unfinished: recovery's states. */
#define UNFINISHED " i.state IN ('approved', 'attempted')"

/* Record an approval, or return the intent its reference already names (then is_new is
 * false): $1 tenant, $2 operation_id, $3 approval_ref, $4 tool, $5 payload_version, $6
 * canonical arguments, $7 fingerprint (binary), $8 approved_by. Under READ COMMITTED, an
 * approval committed by another transaction after this statement's snapshot is found by
 * neither part: the caller runs it again. */
const idem__stmt idem__intent_stmt_approve = {
    "idem_intent_approve",
    "WITH ins AS (INSERT INTO idem.intents AS i (tenant, operation_id, approval_ref, tool,"
    " payload_version, arguments, fingerprint, approved_by)"
    " VALUES ($1, $2, $3, $4, $5::int4, $6, $7, $8) ON CONFLICT DO NOTHING"
    " RETURNING" COLS ", true AS is_new)"
    " SELECT * FROM ins UNION ALL"
    " SELECT" COLS ", false FROM idem.intents i"
    " WHERE i.tenant = $1 AND i.approval_ref = $3 AND NOT EXISTS (SELECT FROM ins)",
    8};

/* $1 tenant, $2 operation_id. */
const idem__stmt idem__intent_stmt_get = {"idem_intent_get",
                                          "SELECT" COLS " FROM idem.intents i WHERE" KEY, 2};

/* Start an attempt: count it and take (or keep) the lease. $1 tenant, $2 operation_id, $3
 * the worker's lease token, $4 lease in seconds, or NULL to keep the lease's end (a
 * recovered intent, whose token $3 is the recovery's). A finished intent keeps its state
 * (its execution replays); a cancelled one, or one another worker holds, is not changed.
 * least() skips the NULL of the side not chosen (Citus refuses now() inside CASE). */
const idem__stmt idem__intent_stmt_start = {
    "idem_intent_start",
    "UPDATE idem.intents i SET attempts = i.attempts + 1,"
    " state = CASE WHEN i.state = 'approved' THEN 'attempted' ELSE i.state END,"
    " lease_owner = $3, lease_until = least(now() + make_interval(secs => $4::int8),"
    " CASE WHEN $4::int8 IS NULL THEN i.lease_until END),"
    " updated_at = now()"
    " WHERE" KEY " AND i.state <> 'cancelled' AND (" LEASE_FREE " OR i.lease_owner = $3)"
    " RETURNING" COLS,
    4};

/* The effect begins: inside a local effect's own transaction (so that it commits with the
 * effect), or before an external dispatch. $1 tenant, $2 operation_id, $3 the attempt. No
 * row: the intent was cancelled, and the effect must not run. A cancel waiting for this
 * row re-reads it after this commits, and finds the effect begun. The first start is kept
 * with least() (which skips a NULL), not coalesce(): Citus refuses now() inside CASE and
 * COALESCE in a distributed UPDATE. */
const idem__stmt idem__intent_stmt_mark = {
    "idem_intent_mark",
    "UPDATE idem.intents i SET effect_attempt = $3::int4,"
    " effect_started_at = least(i.effect_started_at, now()), updated_at = now()"
    " WHERE" KEY " AND i.state <> 'cancelled' RETURNING 1",
    3};

/* A reconciliation item of kind 'intent' is opened, or reopened and counted once more (as
 * reconcile.c records them). */
#define ITEM_UPSERT                                                                                \
    " ON CONFLICT (tenant, operation_id, kind) DO UPDATE SET tool = EXCLUDED.tool,"                \
    " fingerprint = EXCLUDED.fingerprint, fingerprint_matches = true,"                             \
    " last_seen = EXCLUDED.last_seen,"                                                             \
    " count = r.count + 1, resolved_at = NULL, resolved_by = NULL"

/* End the execution: $1 tenant, $2 operation_id, $3 the lease token, $4 the new state
 * ('done', 'needs_reconciliation', or 'attempted' to leave it for recovery), $5 the
 * status, $6 the attempt, $7 error text. An unfinished intent moves; a finished one (an
 * execution that replayed) only gives its lease back. The attempt that produced the
 * result is the one whose effect began, when one did. Returns how many intents moved.
 * finished_at keeps now() outside the CASE (Citus refuses it inside). */
const idem__stmt idem__intent_stmt_finish = {
    "idem_intent_finish",
    "WITH moved AS (UPDATE idem.intents i SET state = $4, result_status = $5,"
    " result_attempt = CASE WHEN $4 = 'attempted' THEN NULL"
    " ELSE coalesce(i.effect_attempt, $6::int4) END,"
    " last_error = $7,"
    " finished_at = now() + CASE WHEN $4 = 'attempted' THEN NULL ELSE interval '0' END,"
    " lease_owner = NULL, lease_until = NULL, updated_at = now()"
    " WHERE" KEY " AND i.lease_owner = $3 AND" UNFINISHED " RETURNING i.tool, i.fingerprint),"
    " released AS (UPDATE idem.intents i SET lease_owner = NULL, lease_until = NULL"
    " WHERE" KEY " AND i.lease_owner = $3 AND NOT" UNFINISHED "),"
    " item AS (INSERT INTO idem.reconciliation_items AS r"
    " (tenant, operation_id, kind, tool, fingerprint, fingerprint_matches)"
    " SELECT $1, $2, '" IDEM__RECONCILE_INTENT "', tool, fingerprint, true FROM moved"
    " WHERE $4 = 'needs_reconciliation'" ITEM_UPSERT ")"
    " SELECT count(*) FROM moved",
    7};

/* Cancel an intent no effect of which has begun: $1 tenant, $2 operation_id, $3 by. */
const idem__stmt idem__intent_stmt_cancel = {
    "idem_intent_cancel",
    "UPDATE idem.intents i SET state = 'cancelled', cancelled_by = $3, finished_at = now(),"
    " lease_owner = NULL, lease_until = NULL, updated_at = now()"
    " WHERE" KEY " AND" UNFINISHED " AND i.effect_started_at IS NULL RETURNING" COLS,
    3};

/* Claim unfinished intents with no live lease, oldest first: $1 tenant (NULL: every
 * tenant), $2 the lease token, $3 lease in seconds, $4 how many. Rows that another
 * recovery has locked are skipped; a row whose lease was taken meanwhile is re-read under
 * its lock and left out. With a tenant the statement says `i.tenant = $1` as such, so
 * that Citus routes it to the tenant's shard (it refuses FOR UPDATE across shards). */
#define RECOVER(tenant, also)                                                                      \
    "WITH picked AS (SELECT i.tenant, i.operation_id FROM idem.intents i"                          \
    " WHERE " tenant " AND" UNFINISHED " AND" LEASE_FREE                                           \
    " ORDER BY i.approved_at, i.tenant, i.operation_id LIMIT $4::int8"                             \
    " FOR UPDATE SKIP LOCKED),"                                                                    \
    " taken AS (UPDATE idem.intents i SET lease_owner = $2,"                                       \
    " lease_until = now() + make_interval(secs => $3::int8), updated_at = now()"                   \
    " FROM picked p WHERE i.tenant = p.tenant AND i.operation_id = p.operation_id" also            \
    " RETURNING" COLS ")"                                                                          \
    " SELECT * FROM taken ORDER BY approved_at_us, tenant, operation_id"
const idem__stmt idem__intent_stmt_recover = {"idem_intent_recover",
                                              RECOVER("$1::text IS NULL", ""), 4};
const idem__stmt idem__intent_stmt_recover_tenant = {
    "idem_intent_recover_tenant", RECOVER("i.tenant = $1", " AND i.tenant = $1"), 4};

/* On Citus, recovery across tenants starts here: the tenants of the $1 oldest intents that
 * recovery would claim, one row per intent, read across the shards without locking them;
 * each tenant's are then claimed with idem__intent_stmt_recover_tenant. */
const idem__stmt idem__intent_stmt_recover_due = {
    "idem_intent_recover_due",
    "SELECT i.tenant FROM idem.intents i WHERE" UNFINISHED " AND" LEASE_FREE
    " ORDER BY i.approved_at, i.tenant, i.operation_id LIMIT $1::int8",
    1};
