/* The store's SQL, in one place. Binary parameters carry the fingerprint and the receipt
 * as exact bytes; results are read in binary for the same reason. */
#include "exec.h"
#include "store_internal.h"

/* One row whether or not the key exists (its columns NULL when it does not), with the
 * database's clock: a key that is absent is judged against the key-memory horizon on
 * that clock, in the same round trip. Whether the receipt goes out canonical (a declared
 * record's since migration 0013; NULL: as stored) comes with it (store_record.c). */
const idem__stmt idem__store_stmt_lookup = {
    "idem_store_lookup",
    "SELECT o.fingerprint, o.state, o.response, o.receipt_canonical, now() FROM (SELECT) AS one"
    " LEFT JOIN idem.operations o ON o.tenant = $1 AND o.operation_id = $2",
    2};

/* The lookup that sets the tenant itself (tenant.h, idem__tenant_exec_either()): on plain
 * PostgreSQL one statement instead of [set_config; lookup]. The row is joined to the
 * setting's one row, which the nested loop reads first, so that it is read after the
 * setting is made. The key's tenant comes from that row too ($1 passed through it): the
 * index condition then has both key columns whatever the statistics say, for a role that
 * row-level security binds (the policy's `tenant = current_setting('idem.tenant')`) and for
 * one it does not (`tenant = one.tenant`), and a generic plan made on a new table does not
 * look up operation_id alone (test lookup_plans). A plain `o.tenant = $1` beside the
 * policy would do the same, but the planner then derives `current_setting(...) = $1` from
 * the two and checks it in a node of its own: 104,400 instructions of the server a lookup
 * against 98,600 (counted under cachegrind, as the application role). */
#define SETS_TENANT                                                                                \
    " FROM (SELECT $1::text AS tenant, set_config('idem.tenant', $1, true) AS setting) AS one"     \
    " LEFT JOIN idem.operations o ON o.tenant = one.tenant AND o.operation_id = $2"                \
    " AND one.setting IS NOT NULL"
const idem__stmt idem__store_stmt_lookup_as = {
    "idem_store_lookup_as",
    "SELECT o.fingerprint, o.state, o.response, o.receipt_canonical, now()" SETS_TENANT, 2};

/* A retry's first look (store_run.c): the lookup without the database's clock, which only
 * a key without a record needs; that key is looked up again with it (store_record.c), a
 * round trip more for a retry whose first attempt never reached the database. Every
 * column costs the server its output function's lookup on every run: 99,800 instructions
 * a replay against 103,600 with the clock (cachegrind, as the application role). */
#define REPLAY_COLUMNS "SELECT o.fingerprint, o.state, o.response, o.receipt_canonical"
const idem__stmt idem__store_stmt_replay = {
    "idem_store_replay",
    REPLAY_COLUMNS " FROM (SELECT) AS one"
                   " LEFT JOIN idem.operations o ON o.tenant = $1 AND o.operation_id = $2",
    2};
const idem__stmt idem__store_stmt_replay_as = {"idem_store_replay_as", REPLAY_COLUMNS SETS_TENANT,
                                               2};

/* After a lost COMMIT reply: the same, and whose claim the row is. */
const idem__stmt idem__store_stmt_resolve = {
    "idem_store_resolve",
    "SELECT o.fingerprint, o.state, o.response, o.receipt_canonical, now(), o.claim_token::text"
    " FROM (SELECT) AS one"
    " LEFT JOIN idem.operations o ON o.tenant = $1 AND o.operation_id = $2",
    2};

const idem__stmt idem__store_stmt_resolve_as = {
    "idem_store_resolve_as",
    "SELECT o.fingerprint, o.state, o.response, o.receipt_canonical, now(),"
    " o.claim_token::text" SETS_TENANT,
    2};

/* The claim. It waits only briefly on a live attempt's uncommitted claim of the same key
 * (the SET LOCAL in front of it makes its lock timeout IDEM__CLAIM_WAIT_MS), so that the
 * call answers in_progress at once and gives its connection back; the SET LOCAL after it
 * gives the effect's statements the rest of the call's deadline (store_write.c). Where
 * the key already has a record, it returns that record (fingerprint, state, response,
 * receipt_canonical) like the lookup, so that a first attempt needs no lookup in front of
 * it; otherwise one row with state 'claimed'. Every statement names the tenant: on Citus it
 * runs on one shard.
 *
 * Both deadlines are fixed here from the tool's windows: $8 retention, $9 key memory, in
 * seconds (interval text: a bare number is seconds, cheaper to prepare than make_interval()
 * with its seven arguments; the record statement below takes them the same way). The
 * key claims only while the database's clock is within $10 to $11 (store_claim.c: for a
 * UUIDv7 operation ID, its time less the clock skew allowance to its time plus the key
 * memory and the allowance; unbounded for other IDs). Outside it, with no record either,
 * the claim returns no row, and the call looks again: the lookup answers expired for a key
 * older than the key memory, and invalid for one dated further ahead than the allowance
 * (since once its tombstone were purged the horizon could never catch its late retry).
 * Every row ends with the database's now(), as the lookup's do. The server prepares every
 * part of the statement each time it runs it, evaluated or not: what only those rare keys
 * need is left to the lookup, at the cost of its round trip for them. */
#define CLAIM_INSERT                                                                               \
    "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"       \
    " state, trace_id, claim_token, expires_at, forget_at"
#define CLAIM_VALUES                                                                               \
    " $2, $3, $4::int4, $5, 'pending', $6, $7::uuid,"                                              \
    " now() + $8::interval, now() + $9::interval"
#define CLAIM_FRESH       " now() BETWEEN $10::timestamptz AND $11::timestamptz"
#define CLAIM_ON_CONFLICT " ON CONFLICT (tenant, operation_id) DO NOTHING RETURNING 1)"
#define CLAIM_TAKEN                                                                                \
    " UNION ALL"                                                                                   \
    " SELECT fingerprint, state, response, receipt_canonical, now() FROM idem.operations"          \
    " WHERE tenant = $1 AND operation_id = $2 AND NOT EXISTS (SELECT 1 FROM ins)"
#define CLAIM_SQL(insert, values)                                                                  \
    "WITH ins AS (" insert " SELECT $1," values " WHERE" CLAIM_FRESH CLAIM_ON_CONFLICT             \
    " SELECT NULL::bytea, 'claimed'::text, NULL::bytea, NULL::boolean, now() FROM ins" CLAIM_TAKEN
const idem__stmt idem__store_stmt_claim = {"idem_store_claim",
                                           CLAIM_SQL(CLAIM_INSERT ")", CLAIM_VALUES), 11};

/* A tool with an identity policy (identity.h): its fields' digests go with the claim, the
 * last parameter (binary). Only these claims name the column (migration 0012): a tool
 * without a policy writes none. (Every claim reads receipt_canonical, migration 0013.) */
#define CLAIM_INSERT_ID CLAIM_INSERT ", identity_digests)"
const idem__stmt idem__store_stmt_claim_id = {"idem_store_claim_id",
                                              CLAIM_SQL(CLAIM_INSERT_ID, CLAIM_VALUES ", $12"), 12};

/* The reservation: the claim of the callback path on plain PostgreSQL, which neither
 * writes nor reads a row (store_write.c). Until the call's record is written, once,
 * finished, by the statement that travels with COMMIT (stmt_record_as), a
 * transaction-scoped advisory lock on the key keeps a second live attempt out, as a
 * claimed row's unique-index entry does: a second attempt waits for it only briefly ($5,
 * the claim's lock timeout) and answers in_progress. The lock's key is the operation ID
 * hashed with the tenant's hash as seed (64 bits; the one-bigint space of advisory locks).
 * The settings are made first (the tenant; the claim's lock timeout, before the lock
 * waits; the statement timeout), then the lock is taken. No read of idem.operations: a
 * read that finds no row would leave a serializable predicate lock on the index page
 * where the key would go, the page every other new key is written to (UUIDv7 keys grow),
 * and concurrent creates would fail each other's serialization. Whether the key has a
 * record is the record's INSERT to find, as the declared statement does (a key taken:
 * nothing written, the attempt rolled back, the record then read). One row, state
 * 'claimed', when the database's clock is within $3 to $4 (the effect's lock timeout $6
 * then set); else none, the attempt made read-only, and the lookup answers. $7: the
 * statement timeout. The row has the claim's first two columns only, its state second
 * (idem__store_claimed() reads nothing else of a reservation): each column costs the
 * server its output function's lookup on every call. */
const idem__stmt idem__store_stmt_reserve_as = {
    "idem_store_reserve_as",
    "WITH settings AS MATERIALIZED (SELECT set_config('idem.tenant', $1, true) AS tenant,"
    " set_config('lock_timeout', $5, true) AS claim_wait,"
    " set_config('statement_timeout', $7, true) AS statement_timeout,"
    " pg_advisory_xact_lock(hashtextextended($2, hashtext($1))) AS held)"
    " SELECT NULL::bytea, 'claimed'::text FROM settings"
    " WHERE CASE WHEN now() BETWEEN $3::timestamptz AND $4::timestamptz"
    " THEN set_config('lock_timeout', $6, true) IS NOT NULL"
    " ELSE set_config('transaction_read_only', 'on', true) IS NULL END",
    7};

/* The record of a reserved key, written once, finished, in the round trip of COMMIT:
 * $1..$9 the claim's ($1 tenant, $2 operation ID, $3 tool, $4 payload version, $5
 * fingerprint, $6 trace ID, $7 claim token, $8 retention, $9 key memory), $10 the state
 * (completed or failed), $11 the receipt; $12 a tool's identity digests. Its windows are
 * counted from now(), the transaction's start, as a claim's are; receipt_canonical is
 * named (NULL: the receipt is stored canonical already) so that a schema before migration
 * 0013 refuses the statement, as it refuses every other call's (the deploy order). The
 * guard is the
 * finishing statement's: the row is written only while the tenant is still the call's,
 * and idem.finish_guard() raises unless it was (IDEM3) and one row was written (IDEM4:
 * the key has a record, an earlier attempt's or one the effect wrote itself, which the
 * caller tells apart by looking the key up after the rollback); the raise rolls the
 * effect back with it. The INSERT of one row writes one or none: a join answers one row
 * either way, without the aggregate a count needs (9,600 instructions less a call). */
#define RECORD_INSERT                                                                              \
    "WITH done AS (INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"      \
    " fingerprint, trace_id, claim_token, expires_at, forget_at, state, response, completed_at,"   \
    " receipt_canonical"
#define RECORD_VALUES                                                                              \
    " SELECT $1, $2, $3, $4::int4, $5, $6, $7::uuid, now() + $8::interval,"                        \
    " now() + $9::interval, $10, $11, now(), NULL::boolean"
#define RECORD_GUARD                                                                               \
    " WHERE current_setting('idem.tenant', true) IS NOT DISTINCT FROM $1"                          \
    " ON CONFLICT (tenant, operation_id) DO NOTHING RETURNING 1 AS written)"                       \
    " SELECT CASE WHEN d.written IS NOT NULL THEN 1 ELSE idem.finish_guard($1, 0) END"             \
    " FROM (SELECT) AS one LEFT JOIN done d ON true"
const idem__stmt idem__store_stmt_record_as = {"idem_store_record_as",
                                               RECORD_INSERT ")" RECORD_VALUES RECORD_GUARD, 11};
const idem__stmt idem__store_stmt_record_as_id = {
    "idem_store_record_as_id",
    RECORD_INSERT ", identity_digests)" RECORD_VALUES ", $12" RECORD_GUARD, 12};

/* The finishing statement travels with COMMIT. idem.finish_guard() (migration 0010) raises
 * unless the tenant is still the call's and exactly one claimed row was finished: an
 * effect that changed idem.tenant, or changed or removed the claimed row, would otherwise
 * commit its writes with the record left pending. The raise aborts the transaction, so the
 * COMMIT behind it rolls back (IDEM3, IDEM4: store_write.c). The statement makes the
 * guard's two checks itself and calls the function only when one fails, for its errors:
 * a call of a PL/pgSQL function costs the server more than the rest of the check. The key
 * and the claim token name one row at most: a join answers one row, updated or not. */
const idem__stmt idem__store_stmt_finish = {
    "idem_store_finish",
    "WITH done AS (UPDATE idem.operations SET state = $3, response = $4, completed_at = now()"
    " WHERE tenant = $1 AND operation_id = $2 AND claim_token = $5::uuid"
    " AND state = 'pending' RETURNING 1::int8 AS written)"
    " SELECT CASE WHEN d.written IS NOT NULL"
    " AND current_setting('idem.tenant', true) IS NOT DISTINCT FROM $1 THEN 1"
    " ELSE idem.finish_guard($1, coalesce(d.written, 0)) END"
    " FROM (SELECT) AS one LEFT JOIN done d ON true",
    5};

/* A pending record met by a call: whether it is local (no downstream key, no lease) and
 * older than the call's deadline ($3, ms). A local record is pending only inside the
 * transaction that claims it; one that another session reads past that time was left so
 * by an attempt whose transaction ended without finishing it (store_record.c). */
const idem__stmt idem__store_stmt_stalled = {
    "idem_store_stalled",
    "SELECT 1 FROM idem.operations WHERE tenant = $1 AND operation_id = $2"
    " AND state = 'pending' AND attempts IS NULL AND lease_expires_at IS NULL"
    " AND created_at < now() - make_interval(secs => $3::int8 / 1000.0)",
    3};

/* Undo a claim that an effect committed by itself (it must not; see idem__store_write_attempt). */
const idem__stmt idem__store_stmt_unclaim = {
    "idem_store_unclaim",
    "DELETE FROM idem.operations WHERE tenant = $1 AND operation_id = $2"
    " AND claim_token = $3::uuid AND state = 'pending'",
    3};

const idem__stmt idem__store_stmt_get = {
    "idem_store_get",
    "SELECT tool, payload_version, fingerprint, state, response, trace_id,"
    " (extract(epoch FROM created_at) * 1000000)::int8,"
    " coalesce((extract(epoch FROM completed_at) * 1000000)::int8, 0),"
    " (extract(epoch FROM expires_at) * 1000000)::int8,"
    " coalesce((extract(epoch FROM forget_at) * 1000000)::int8, 0),"
    " coalesce((extract(epoch FROM expired_at) * 1000000)::int8, 0)"
    " FROM idem.operations WHERE tenant = $1 AND operation_id = $2",
    2};

/* What a conflict reads of the record (store_record.c): which of the request's parts
 * differs, and for a tool with an identity policy its fields' digests (migration 0012). */
const idem__stmt idem__store_stmt_conflict = {
    "idem_store_conflict",
    "SELECT tool, payload_version, state, identity_digests FROM idem.operations"
    " WHERE tenant = $1 AND operation_id = $2",
    2};
