/* The store's parts (store*.c): the shared state of one call and what each part offers
 * the others. Private to the library. */
#ifndef IDEM_LIB_STORE_INTERNAL_H
#define IDEM_LIB_STORE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "checkout.h"
#include "exec.h"
#include "idem/store.h"
#include "identity.h"
#include "idem/uuid.h"
#include "settings.h"
#include "tenant.h"

#ifdef IDEM_TESTING
/* Failures the test suite injects at the COMMIT boundary (test builds only: the
 * installed library has none of this), as fault points of the execution layer (exec.h).
 * Each applies to the next `count` commits. */
enum idem__fault {
    IDEM__FAULT_NONE = 0,
    IDEM__FAULT_REPLY_LOST_AFTER_COMMIT, /* COMMIT succeeds, its reply and the lookup that
                                            would resolve it are lost: unavailable */
    IDEM__FAULT_FAIL_BEFORE_COMMIT,      /* the connection dies before COMMIT and the lookup
                                            fails too: nothing committed, unavailable */
    IDEM__FAULT_DROP_BEFORE_COMMIT,      /* the socket dies before COMMIT is sent */
    IDEM__FAULT_DROP_DURING_COMMIT,      /* COMMIT is sent, the socket dies before its reply */
};
void idem__store_inject_fault(idem_store *store, enum idem__fault fault, unsigned int count);
#endif

/* The store's statements (store_sql.c). */
extern const idem__stmt idem__store_stmt_lookup_as, idem__store_stmt_resolve_as;
extern const idem__stmt idem__store_stmt_replay, idem__store_stmt_replay_as;
extern const idem__stmt idem__store_stmt_lookup, idem__store_stmt_resolve, idem__store_stmt_claim,
    idem__store_stmt_finish, idem__store_stmt_unclaim, idem__store_stmt_get,
    idem__store_stmt_stalled;
/* The claims of a tool with an identity policy, which write its fields' digests too, and
 * what a conflict reads of the record. */
extern const idem__stmt idem__store_stmt_claim_id, idem__store_stmt_conflict;
/* The callback path on plain PostgreSQL: the reservation that claims without a row, and
 * the record written once, finished, with COMMIT (with a tool's identity digests). */
extern const idem__stmt idem__store_stmt_reserve_as, idem__store_stmt_record_as,
    idem__store_stmt_record_as_id;

/* One tool's windows, the store's own copy (sorted by tool for bsearch). */
typedef struct tool_window {
    char *tool;
    unsigned int retention_s, key_memory_s;
} tool_window;

struct idem_store {
    idem_pool *pool;
    idem_store_options opts; /* opts.tools is NULL: the copy is tools[] */
    tool_window *tools;
    size_t ntools;
    idem__identity *identities; /* tools with a policy other than all, sorted by tool */
    size_t nidentities;
    idem_retry_policy backoff;
    struct {
        atomic_ullong executes, created, replayed, conflicts, invalid, effect_failures;
        atomic_ullong serialization_retries, claim_races, ambiguous_commits, unavailable;
        atomic_ullong rejected, misconfigured, in_progress, expired;
    } stats;
};

/* The deadline of a call on @store that starts now: deadline_ms from now, an idem__now_ms()
 * time. Every call on a pool-backed handle (the store, its external path and outbox,
 * intents) takes it once, at its start, and checks its connections out under it
 * (checkout.h), from the checkout to the last reply (store.c). */
uint64_t idem__store_deadline(const idem_store *store);

/* Before a call on @store starts another round (a retry, a second try after a lost reply):
 * 0 while @deadline_ms has not passed; then IDEM_EUNAVAIL (retry later with the same key),
 * saying so (store.c). */
int idem__store_deadline_passed(const idem_store *store, uint64_t deadline_ms, idem_error *err);

/* The retention window and key memory of @tool: its own, or the store's (store.c). */
void idem__store_windows(const idem_store *store, const char *tool, unsigned int *retention_s,
                         unsigned int *key_memory_s);

/* The identity policy of @tool, or NULL for all arguments (store.c). */
const idem__identity *idem__store_identity(const idem_store *store, const char *tool);

/* PostgreSQL's timestamps count microseconds from 2000-01-01 UTC: that instant in Unix ms. */
#define IDEM__PG_EPOCH_MS 946684800000LL

/* The claim's parameters, kept for the call (they go out inside pipelines): values[0..10]
 * ($1..$11 of stmt_claim: the key, its tool and fingerprint, the windows, and the span of
 * the database's clock in which the key may claim, binary timestamptz; $1..$9 of the
 * record a reservation writes); for a tool with an identity policy, its fields' digests at
 * [11] ($12 of stmt_claim_id). */
typedef struct claim_params {
    char version[24], retention[24], key_memory[24];
    char not_before[8], not_after[8];
    char max_response[24]; /* a declared effect's limit on its receipt */
    const char *values[16];
    int lengths[16];
    int formats[16];
    /* The reservation's ($1..$7 of stmt_reserve_as): the key, the window, the settings. */
    const char *reserve[7];
    int reserve_lengths[7];
    int reserve_formats[7];
} claim_params;

/* What one attempt decided. */
enum step {
    STEP_DONE,    /* out->status is final; the return code is in call.rc */
    STEP_AGAIN,   /* start over now: the key changed hands under us */
    STEP_BACKOFF, /* serialization failure or deadlock: back off, then start over */
    STEP_RESOLVE, /* the COMMIT's outcome is unknown: look on a fresh connection */
};

typedef struct call call;

/* One attempt of a call, on a checked-out connection (store_write.c, store_declared.c). */
typedef enum step (*attempt_fn)(call *c, idem_conn *conn, int *out_rc);

/* One idem_store_execute() or idem_store_execute_declared() call in progress. */
struct call {
    idem_store *store;
    const idem_request *req;
    json_t *arguments; /* NULL until parsed: a retry fingerprints from the text where it can
                          (defer_arguments), and parses only if it goes on to an attempt */
    int defer_arguments;
    idem__buf canonical; /* a declared call's arguments in their canonical form, kept where
                            its parameters are bound from it instead of a tree
                            (store_declared.c); else empty */
    idem_fingerprint fp;
    idem__buf fp_text; /* a retry's request text not yet hashed into fp: hashed while its
                          lookup is on the wire (idem__store_fingerprint()); else empty */
    const idem__identity *identity; /* the tool's policy, or NULL (all arguments) */
    idem__buf digests;              /* with a policy: its fields' digests (identity.h) */
    char claim[IDEM_UUID_STRING_SIZE];
    idem_effect_fn effect;
    void *ctx;
    idem_outcome *out;
    idem_error *err;
    uint64_t deadline_ms;
    claim_params cp;
    idem__tx_settings settings; /* what the attempt's transaction sets (settings.h) */
    int lookup_first;           /* look the key up before claiming it (a retry) */
    int lost_claim;             /* the claim wrote nothing: a race if the lookup finds a record */
    int resume_pending;         /* external begin: a pending row of this fingerprint is left to the
                                   claim, which resumes it if its lease has lapsed */
    size_t claim_at;            /* where the claim is in the pipeline that opens an attempt */
    int reserved;               /* the attempt reserved the key (stmt_reserve_as): its record
                                   is written once, with COMMIT (stmt_record_as) */
    int replanned;              /* an attempt ended on a stale kept statement (store_tx.c) */
    attempt_fn attempt;         /* the callback path's or the declared path's */
    const idem_declared *declared;
};

struct idem_tx {
    idem_conn *conn;
    call *c;
    int begun;          /* BEGIN and the claim have been sent */
    int claim_lost;     /* the claim found the key taken: the call answers from @taken, or
                           starts over */
    PGresult *taken;    /* the record the claim found (fingerprint, state, response,
                           receipt_canonical) */
    int claim_busy;     /* a live attempt holds the key: the call answers in_progress */
    int ended;          /* the effect ended the transaction itself (COMMIT, ROLLBACK) */
    int decided;        /* a record the claim found decided the call (c->out is set) */
    int setup_rc;       /* BEGIN or the claim failed (not the effect's own statement) */
    int stale_plan;     /* a kept statement's plan no longer fit its table: try again */
    char sqlstate[6];   /* the last failure's SQLSTATE, whatever the effect returns */
    int refused;        /* a statement was refused (store_tx.c): the call ends effect_failed */
    idem_error failure; /* the last statement that failed or was refused, in its words */
};

/* PostgreSQL keeps no field longer than 1 GiB. */
#define MAX_PAYLOAD ((size_t)1 << 30)

#define COUNT(store, name) atomic_fetch_add_explicit(&(store)->stats.name, 1, memory_order_relaxed)

/* Validate c->req, parse its arguments into c->arguments (with c->defer_arguments and no
 * identity policy, possibly not: idem__store_arguments()) and fingerprint them into c->fp
 * (with the tool's identity policy: its projection, and its fields' digests into
 * c->digests) (store_request.c). Returns 0 or IDEM_EINVAL naming the field. */
int idem__store_validate(call *c);

/* With c->defer_arguments, or for a declared call that binds its parameters from the
 * text, idem__store_validate() may fingerprint the arguments from their text and leave
 * c->arguments NULL: parse them now, before an attempt needs them (a declared call whose
 * canonical text was kept needs none: nothing is done). Returns 0
 * or IDEM_EINVAL naming the field (never expected: the text fingerprinted is one the parser
 * accepts), IDEM_ENOMEM (store_request.c). */
int idem__store_arguments(call *c);

/* Hash c->fp_text into c->fp, if a retry's validation left it (store_request.c): what
 * reads c->fp calls it first. Returns 0 or IDEM_ENOMEM (c->err set, the text kept: a
 * later call fails alike). Its form for idem__conn_while_waiting(), @c a call. */
int idem__store_fingerprint(call *c);
void idem__store_fingerprint_while_waiting(void *c);

/* Release what idem__store_validate() made (store_request.c). */
void idem__store_call_clear(call *c);

/* The effect of a call that runs none of its own (external begin, approving an intent):
 * the request's checks want one; it fails if ever called. */
int idem__store_no_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                          idem_error *err);

/* Decide the call from a record's row (binary: fingerprint, state, response,
 * receipt_canonical, the database's now(), and after a lost COMMIT reply the claim token
 * as text): replayed, rejected, conflict, in_progress, expired (a tombstone: a
 * reconciliation item is recorded on @conn, idle), or created when @mine (the row was
 * claimed by this call). Returns the call's code. */
int idem__store_decide(call *c, idem_conn *conn, const PGresult *res, int *mine);

/* Set out->receipt to a copy of a stored receipt: with @canonical_form, its canonical form
 * (RFC 8785: no whitespace, members in order), its numbers as written
 * (idem__jcs_write_text()): a declared effect's record holds the server's JSON text, and
 * one marked receipt_canonical (migration 0013) is answered canonical to its first caller
 * and to every retry alike. Otherwise, and for bytes that are not JSON, as stored: a
 * receipt idem serialized itself is canonical already, and a declared record of an earlier
 * version answers every retry what its first caller got. Returns 0 or IDEM_ENOMEM (out
 * untouched) (store_record.c). */
int idem__store_receipt_out(idem_outcome *out, const char *bytes, size_t len, int canonical_form,
                            idem_error *err);

/* Whether the claim's result (tx->taken's shape) says this attempt claimed the key. */
int idem__store_claimed(const PGresult *claim);

/* Look the key up with @stmt (lookup or resolve). Returns 1 when a row decided the call
 * (c->out set, *rc its code), 0 when the key is free (or, with c->resume_pending, pending
 * under the request's fingerprint), or a negative code on a database failure
 * (store_record.c). */
int idem__store_lookup(call *c, idem_conn *conn, const idem__stmt *stmt, int *rc);

/* How far the request's UUIDv7 operation ID is dated ahead of @now_ms (the database's
 * clock, ms since 1970), in ms, when that is more than the clock skew allowance: the key,
 * absent, must not be claimed; else 0 (also for other IDs) (store_record.c). */
int64_t idem__store_ahead_ms(const call *c, int64_t now_ms);

/* The request's UUIDv7 is dated @ahead_ms (> 0) in the future on the database's clock,
 * beyond the allowance, and its key has no record: status invalid, nothing written.
 * Returns IDEM_EINVAL, field operation_id. */
int idem__store_dated_ahead(call *c, int64_t ahead_ms);

/* The call's receipt (already in c->out) is a stored final refusal: status rejected.
 * Returns IDEM_EREJECTED. */
int idem__store_rejected(call *c);

/* One write attempt: BEGIN, claim, effect, record, COMMIT (store_write.c). */
enum step idem__store_write_attempt(call *c, idem_conn *conn, int *out_rc);

/* One attempt of a declared effect: its statement, the record and COMMIT in one round
 * trip (store_declared.c). */
enum step idem__store_declared_attempt(call *c, idem_conn *conn, int *out_rc);

/* Whether @d's parameters can be bound from the arguments' canonical text (c->canonical):
 * none of them is a JSON Pointer, all name top-level members or the key's parts
 * (store_declared.c). */
int idem__declared_binds_text(const idem_declared *d);

/* The words a declared statement fails with when the session's statement_timeout is not
 * the one it was to run under (store_declared.c): a value the server refuses for it. */
#define IDEM__DECLARED_SESSION_CHANGED "idem: the session has another statement_timeout"

/* What comes after the failure of a declared attempt's pipeline (store_declared_fail.c):
 * @rc and c->err as the pipeline left them, @failed_at the command that failed, @at the
 * statement's, @checked whether the statement carried the session's check. */
enum step idem__store_declared_failure(call *c, idem_conn *conn, int rc, size_t failed_at,
                                       size_t at, int checked, int *out_rc);

/* Check a declared statement's text (store_declared.c), scanned as PostgreSQL's lexer
 * does: outside quoted strings and identifiers, comments and dollar quotes, each $N must be
 * one of its @nparams parameters (the store's own follow them in the statement that embeds
 * it, and would be bound silently), and the text must not end inside a quote or a comment
 * (which would swallow the store's statement around it); it is one statement: a ';' may
 * only end it; and it can run as the store's WITH query and return rows there (a query, or
 * INSERT, UPDATE, DELETE, MERGE with RETURNING). *code_len (when not NULL): where its last
 * token of code ends, before any trailing ';', blanks and comments. Returns 0 or IDEM_EINVAL,
 * field "sql". */
int idem__declared_check_sql(const char *sql, size_t nparams, size_t *code_len, idem_error *err);

/* Whether a pipeline that failed at @failed_at, with @sqlstate, leaves the outcome of its
 * COMMIT (at @commit_at) unknown, so that the call looks the key up on a fresh connection
 * as after a lost reply: a COMMIT that failed with XX000, an internal error, which is how
 * Citus reports that a worker's COMMIT failed ("could not commit transaction for shard
 * ... on at least one active node"), whatever the worker's own SQLSTATE was (a
 * serialization failure at commit among them). On PostgreSQL alone a COMMIT that fails
 * has rolled back, and its SQLSTATE says why (store_write.c). */
int idem__store_commit_unknown(size_t failed_at, size_t commit_at, const char *sqlstate);

/* ROLLBACK, ignoring the result (store_write.c). */
void idem__store_rollback(idem_conn *conn);

/* The commands that open an attempt, with the settings settings.h builds for @conn (into
 * c->settings: the tenant, the claim's short lock wait, then the call's lock and statement
 * timeouts): on plain PostgreSQL BEGIN and the reservation that sets them itself
 * (stmt_reserve_as; c->reserved); on Citus BEGIN, IDEM__SET_PROPAGATE, the settings as SET LOCAL
 * statements that reach the workers, the claim, the effect's lock timeout. Sets
 * c->claim_at; returns how many it wrote, at most BEGIN_CMDS (store_write.c). */
#define BEGIN_CMDS (IDEM__SETTINGS_CMDS + 3)
size_t idem__store_begin_cmds(call *c, idem_conn *conn, idem__pipe_cmd *cmds);
/* How long a claim waits for another attempt's uncommitted claim of the same key. */
#define IDEM__CLAIM_WAIT_MS 50

/* Fill c->cp, the claim's parameters, once the claim token is made (store_claim.c). */
void idem__store_claim_params_init(call *c);
/* @v in decimal, then @suffix, into @out (24 bytes at least): the numbers a call sends,
 * written on every new key without printf's cost (store_claim.c). */
void idem__u64_text(char out[24], uint64_t v, const char *suffix);

/* Whether a begin pipeline's failure at @failed_at (with @sqlstate) is the claim's lock
 * wait running out: another live attempt holds the key. */
int idem__store_claim_busy(const call *c, size_t failed_at, const char *sqlstate);

/* The statement that writes the callback path's record with COMMIT: on plain PostgreSQL
 * the record whole (stmt_record_as, after a reservation: c->reserved), on Citus the
 * finishing UPDATE of the claim; @failed: the state failed instead of completed. @p holds
 * the parameters while the pipeline runs (store_cmds.c). */
typedef struct finish_params {
    const char *values[12];
    int lengths[12];
    int formats[12];
} finish_params;
idem__pipe_cmd idem__store_cmd_finish(finish_params *p, const call *c, const char *receipt,
                                      size_t len, int failed);

/* PQclear each command's result. */
void idem__store_pipe_clear(idem__pipe_cmd *cmds, size_t n);

#endif
