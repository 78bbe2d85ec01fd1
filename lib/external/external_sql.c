/* The SQL of external effects, in one place. Every statement names the tenant. A lease is
 * judged on the database's clock (now()); the holder proves itself with the claim token it
 * wrote. Each report is one statement: the record, the attempt's history row, the outbox
 * item and any reconciliation item change together or not at all. */
#include "external_internal.h"

/* A reconciliation item (tenant, operation_id, kind, tool, fingerprint) is opened, or
 * reopened and counted once more (as reconcile.c records them). last_seen is the new row's
 * default, now(): Citus refuses a function that is not immutable in DO UPDATE SET. */
#define ITEM_UPSERT                                                                                \
    " ON CONFLICT (tenant, operation_id, kind) DO UPDATE SET tool = EXCLUDED.tool,"                \
    " fingerprint = EXCLUDED.fingerprint, fingerprint_matches = true,"                             \
    " last_seen = EXCLUDED.last_seen,"                                                             \
    " count = r.count + 1, resolved_at = NULL, resolved_by = NULL"

/* The attempt that held the lease: $1 tenant, $2 operation_id, $3 its token. */
#define HOLDER                                                                                     \
    " o.tenant = $1 AND o.operation_id = $2 AND o.claim_token = $3::uuid"                          \
    " AND o.state = 'pending' AND o.lease_expires_at IS NOT NULL"

/* An attempt's own history row (its tenant, operation and number are matched in front of
 * this), unless it has reported already; a row closed as lease_expired still takes what its
 * attempt reports late. */
#define OWN_ROW " AND (a.ended_at IS NULL OR a.outcome = 'lease_expired')"

/* Microseconds since the epoch of timestamptz column C, with immutable operators only: Citus
 * allows no other functions in the RETURNING of a statement it routes to a shard. */
#define EPOCH_US(c)                                                                                \
    " (extract(epoch FROM " c " - '1970-01-01 00:00:00+00'::timestamptz) * 1000000)::int8"

/* The claim is four statements of one transaction, each of which Citus routes to the key's
 * shard (a statement that joined them with CTEs or INSERT ... SELECT would be planned on the
 * coordinator, which writes the shards with COPY, refused under row-level security):
 * claim, forget, lapse, start. The key is taken when the claim returns a row and forget
 * deletes none.
 *
 * Claim the key, or take over a pending one whose lease has lapsed (same fingerprint, an
 * external record): $1 tenant, $2 operation_id, $3 tool, $4 payload_version, $5 fingerprint
 * (binary), $6 trace_id, $7 token, $8 retention and $9 key memory in seconds (the tool's
 * windows, fixed here), $10 the downstream key for a new record, $11 lease in ms. How long
 * it waits for another transaction's uncommitted claim of the key is the lock timeout that
 * a SET LOCAL in front of it sets (external_begin.c). A row that is not ours to take is
 * locked by ON CONFLICT but returns nothing. The lease is judged against
 * EXCLUDED.created_at, which is now() (the column's default): Citus refuses now() itself in
 * ON CONFLICT's WHERE. A new record keeps $10, a record taken over its own downstream key. */
const idem__stmt idem__external_stmt_claim = {
    "idem_external_claim",
    "INSERT INTO idem.operations AS o (tenant, operation_id, tool, payload_version,"
    " fingerprint, state, trace_id, claim_token, expires_at, forget_at, downstream_key,"
    " attempts, lease_expires_at)"
    " VALUES ($1, $2, $3, $4::int4, $5, 'pending', $6, $7::uuid,"
    " now() + make_interval(secs => $8::int8), now() + make_interval(secs => $9::int8),"
    " $10, 1, now() + make_interval(secs => $11::float8 / 1000))"
    " ON CONFLICT (tenant, operation_id) DO UPDATE"
    " SET claim_token = EXCLUDED.claim_token,"
    " lease_expires_at = EXCLUDED.lease_expires_at, attempts = o.attempts + 1"
    " WHERE o.state = 'pending' AND o.attempts IS NOT NULL"
    " AND o.fingerprint = EXCLUDED.fingerprint"
    " AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= EXCLUDED.created_at)"
    " RETURNING o.attempts, o.downstream_key," EPOCH_US("o.lease_expires_at"),
    11};

/* A key that had no record is not claimed when its UUIDv7 time ($4 ms; NULL for other IDs)
 * is older than the key memory plus the clock skew allowance ($5 s) on the database's
 * clock, or further ahead of it than the allowance ($6 s): the record the claim has just
 * made (it alone has the downstream key $3) is deleted again, and returns the database's
 * clock (its created_at, in microseconds), by which the caller tells the two apart: a key
 * too old makes the lookup answer expired, as the store's claim does; one dated ahead is
 * invalid at once. A record taken over is kept whatever the key's age. $1 tenant, $2
 * operation_id. */
const idem__stmt idem__external_stmt_forget = {
    "idem_external_forget",
    "DELETE FROM idem.operations WHERE tenant = $1 AND operation_id = $2"
    " AND downstream_key = $3"
    " AND (to_timestamp($4::int8 / 1000.0) < now() - make_interval(secs => $5::int8)"
    " OR to_timestamp($4::int8 / 1000.0) > now() + make_interval(secs => $6::int8))"
    " RETURNING" EPOCH_US("created_at"),
    6};

/* Once the key is this attempt's (claim token $3): the lapsed attempt's history row is
 * closed, then this attempt's opened. */
const idem__stmt idem__external_stmt_lapse = {
    "idem_external_lapse",
    "UPDATE idem.external_attempts a SET ended_at = now(), outcome = 'lease_expired'"
    " WHERE a.tenant = $1 AND a.operation_id = $2 AND a.ended_at IS NULL"
    " AND EXISTS (SELECT FROM idem.operations o"
    " WHERE o.tenant = $1 AND o.operation_id = $2 AND o.claim_token = $3::uuid)",
    3};

const idem__stmt idem__external_stmt_start = {
    "idem_external_start",
    "INSERT INTO idem.external_attempts (tenant, operation_id, attempt)"
    " SELECT tenant, operation_id, attempts FROM idem.operations"
    " WHERE tenant = $1 AND operation_id = $2 AND claim_token = $3::uuid",
    3};

/* After a lost reply to the claim: whether this token holds the key. */
const idem__stmt idem__external_stmt_mine = {
    "idem_external_mine",
    "SELECT o.attempts, o.downstream_key,"
    " (extract(epoch FROM o.lease_expires_at) * 1000000)::int8"
    " FROM idem.operations o WHERE" HOLDER,
    3};

/* After a lost reply to a report: where the record stands for this token (state, whether the
 * token is the holder's, whether a lease is held). */
const idem__stmt idem__external_stmt_held = {
    "idem_external_held",
    "SELECT state, claim_token = $3::uuid, lease_expires_at IS NOT NULL FROM idem.operations"
    " WHERE tenant = $1 AND operation_id = $2",
    3};

/* Complete, or fail for good: $4 'completed' or 'failed', $5 the receipt (binary), $6
 * provider_ref, $7 the attempt's number, $8 error text. Returns how many records changed
 * (0: the lease was lost; the attempt's row is written all the same). */
const idem__stmt idem__external_stmt_finish = {
    "idem_external_finish",
    "WITH done AS (UPDATE idem.operations o SET state = $4, response = $5,"
    " completed_at = now(), provider_ref = $6, lease_expires_at = NULL," IDEM__WINDOWS_FROM_NOW
    " WHERE" HOLDER " RETURNING 1),"
    " reported AS (UPDATE idem.external_attempts a"
    " SET ended_at = now(), outcome = $4, provider_ref = $6, error = $8"
    " WHERE a.tenant = $1 AND a.operation_id = $2 AND a.attempt = $7::int4" OWN_ROW "),"
    " box AS (UPDATE idem.outbox b SET state = $4, updated_at = now(), last_error = $8"
    " FROM done WHERE b.tenant = $1 AND b.operation_id = $2)"
    " SELECT count(*) FROM done",
    8};

/* Outcome unknown: $4 provider_ref, $5 the attempt's number, $6 error text. The record, its
 * outbox item and a reconciliation item change together. */
const idem__stmt idem__external_stmt_unknown = {
    "idem_external_unknown",
    "WITH done AS (UPDATE idem.operations o SET state = 'outcome_unknown',"
    " provider_ref = coalesce($4, o.provider_ref), lease_expires_at = NULL"
    " WHERE" HOLDER " RETURNING o.tool, o.fingerprint),"
    " reported AS (UPDATE idem.external_attempts a"
    " SET ended_at = now(), outcome = 'unknown', provider_ref = $4, error = $6"
    " WHERE a.tenant = $1 AND a.operation_id = $2 AND a.attempt = $5::int4" OWN_ROW "),"
    " box AS (UPDATE idem.outbox b SET state = 'outcome_unknown', updated_at = now(),"
    " last_error = $6 FROM done WHERE b.tenant = $1 AND b.operation_id = $2),"
    " item AS (INSERT INTO idem.reconciliation_items AS r"
    " (tenant, operation_id, kind, tool, fingerprint, fingerprint_matches)"
    " SELECT $1, $2, 'outcome_unknown', tool, fingerprint, true FROM done" ITEM_UPSERT ")"
    " SELECT count(*) FROM done",
    6};

/* Release the lease (a transient failure, or no dispatch): $4 the attempt's outcome ('retry'
 * or 'released'; a release that found the lease lost writes nothing), $5 error text, $6 the
 * attempt's number, $7 the outbox backoff in ms. An outbox item is due again after the
 * backoff, or, with its attempts spent, exhausted and moved to reconciliation. Returns how
 * many records changed and the item's new state. */
const idem__stmt idem__external_stmt_release = {
    "idem_external_release",
    "WITH freed AS (UPDATE idem.operations o SET lease_expires_at = NULL"
    " WHERE" HOLDER " RETURNING o.attempts, o.tool, o.fingerprint),"
    " reported AS (UPDATE idem.external_attempts a"
    " SET ended_at = now(), outcome = $4, error = $5"
    " WHERE a.tenant = $1 AND a.operation_id = $2 AND a.attempt = $6::int4" OWN_ROW
    " AND ($4 = 'retry' OR EXISTS (SELECT FROM freed))),"
    " box AS (UPDATE idem.outbox b SET state = CASE WHEN freed.attempts >= b.max_attempts"
    " THEN 'exhausted' ELSE 'queued' END,"
    " next_attempt_at = now() + make_interval(secs => $7::float8 / 1000),"
    " last_error = coalesce($5, b.last_error), updated_at = now() FROM freed"
    " WHERE b.tenant = $1 AND b.operation_id = $2 AND b.state = 'queued'"
    " RETURNING b.state),"
    " item AS (INSERT INTO idem.reconciliation_items AS r"
    " (tenant, operation_id, kind, tool, fingerprint, fingerprint_matches)"
    " SELECT $1, $2, '" IDEM__RECONCILE_OUTBOX_EXHAUSTED "', freed.tool, freed.fingerprint, true"
    " FROM freed, box WHERE box.state = 'exhausted'" ITEM_UPSERT ")"
    " SELECT (SELECT count(*) FROM freed), coalesce((SELECT state FROM box), '')",
    7};

/* A heartbeat: $4 lease in ms. */
const idem__stmt idem__external_stmt_extend = {
    "idem_external_extend",
    "UPDATE idem.operations o"
    " SET lease_expires_at = now() + make_interval(secs => $4::float8 / 1000)"
    " WHERE" HOLDER " RETURNING" EPOCH_US("o.lease_expires_at"),
    4};

/* Claim due outbox items: $1 tenant, $2 tool or NULL, $3 limit, $4 lease in ms. Each item
 * due and not held is locked (skipping those another worker holds); one with attempts left
 * gets a lease, its lapsed attempt closed and its next attempt opened, and is due again when
 * that lease ends (a crashed worker's item comes back); one with none left is exhausted
 * and moved to reconciliation. $5 is a fresh UUIDv7 of the caller's (74 random bits): each item's
 * claim token is md5($5 || operation_id) as a UUID, immutable, where gen_random_uuid() in the
 * UPDATE is a volatile function that Citus refuses there. Citus plans this statement step by
 * step through the coordinator (its CTEs insert rows selected from other CTEs); each step
 * runs on the tenant's shard, and both INSERTs have ON CONFLICT, which Citus carries out on
 * the shard rather than by COPY (refused under row-level security). */
const idem__stmt idem__external_stmt_outbox_claim = {
    "idem_external_outbox_claim",
    "WITH due AS (SELECT b.operation_id, b.max_attempts, o.attempts FROM idem.outbox b"
    " JOIN idem.operations o ON o.tenant = b.tenant AND o.operation_id = b.operation_id"
    " WHERE b.tenant = $1 AND b.state = 'queued' AND b.next_attempt_at <= now()"
    " AND ($2::text IS NULL OR b.tool = $2) AND o.state = 'pending'"
    " AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now())"
    " ORDER BY b.next_attempt_at LIMIT $3::int8 FOR UPDATE OF b, o SKIP LOCKED),"
    " leased AS (UPDATE idem.operations o SET claim_token = md5($5 || o.operation_id)::uuid,"
    " lease_expires_at = now() + make_interval(secs => $4::float8 / 1000),"
    " attempts = o.attempts + 1 FROM due"
    " WHERE o.tenant = $1 AND o.operation_id = due.operation_id"
    " AND due.attempts < due.max_attempts"
    " RETURNING o.operation_id, o.claim_token, o.attempts, o.downstream_key,"
    " o.lease_expires_at, o.fingerprint),"
    " spent AS (UPDATE idem.outbox b SET state = 'exhausted', updated_at = now() FROM due"
    " WHERE b.tenant = $1 AND b.operation_id = due.operation_id"
    " AND due.attempts >= due.max_attempts RETURNING b.operation_id, b.tool),"
    " spent_items AS (INSERT INTO idem.reconciliation_items AS r"
    " (tenant, operation_id, kind, tool, fingerprint, fingerprint_matches)"
    " SELECT $1, s.operation_id, '" IDEM__RECONCILE_OUTBOX_EXHAUSTED
    "', s.tool, o.fingerprint, true"
    " FROM spent s JOIN idem.operations o"
    " ON o.tenant = $1 AND o.operation_id = s.operation_id" ITEM_UPSERT "),"
    " lapsed AS (UPDATE idem.external_attempts a"
    " SET ended_at = now(), outcome = 'lease_expired' FROM due"
    " WHERE a.tenant = $1 AND a.operation_id = due.operation_id AND a.ended_at IS NULL),"
    " started AS (INSERT INTO idem.external_attempts (tenant, operation_id, attempt)"
    " SELECT $1, operation_id, attempts FROM leased"
    " ON CONFLICT (tenant, operation_id, attempt) DO NOTHING),"
    " rescheduled AS (UPDATE idem.outbox b SET next_attempt_at = l.lease_expires_at,"
    " updated_at = now() FROM leased l"
    " WHERE b.tenant = $1 AND b.operation_id = l.operation_id)"
    " SELECT l.operation_id, l.claim_token::text, l.attempts, l.downstream_key,"
    " (extract(epoch FROM l.lease_expires_at) * 1000000)::int8,"
    " encode(l.fingerprint, 'hex'), b.tool, b.payload_version, b.arguments"
    " FROM leased l JOIN idem.outbox b ON b.tenant = $1 AND b.operation_id = l.operation_id"
    " ORDER BY b.next_attempt_at, l.operation_id",
    5};

/* Enqueue from inside an effect: $1 tenant, $2 the item's operation_id, $3 tool, $4
 * payload_version, $5 fingerprint (hex), $6 retention and $11 key memory in seconds (the
 * item's tool's windows), $7 downstream key, $8 the enqueuing operation's ID, $9 canonical
 * arguments, $10 max_attempts. Both INSERTs have VALUES, so that Citus routes each to the
 * tenant's shard (an INSERT ... SELECT from the CTE would be written through the coordinator
 * with COPY, which row-level security refuses); if the record's INSERT fails, so does the
 * statement. */
const char idem__external_sql_enqueue[] =
    "WITH op AS (INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"
    " fingerprint, state, claim_token, expires_at, forget_at, downstream_key, attempts)"
    " VALUES ($1, $2, $3, $4::int4, decode($5, 'hex'), 'pending', gen_random_uuid(),"
    " now() + make_interval(secs => $6::int8), now() + make_interval(secs => $11::int8),"
    " $7, 0) RETURNING 1)"
    " INSERT INTO idem.outbox (tenant, operation_id, parent_operation_id, tool, payload_version,"
    " arguments, max_attempts) VALUES ($1, $2, $8, $3, $4::int4, $9, $10::int4)";
