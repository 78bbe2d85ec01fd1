/* The fault suite: a multi-threaded workload of idempotent calls under injected faults,
 * and the invariants that must hold after it.
 *
 * One run is a series of epochs (one for the quick size). In each, worker threads call
 * idem_store_execute() through the retry helper while an injector thread terminates
 * backends, restarts the server, stalls a backend, holds locks and loses COMMIT replies.
 * Then the faults stop, the keys left without an answer are settled, and the checker
 * compares what the callers were told with what the database holds (fault_check.c). */
#ifndef IDEM_TESTS_FAULT_H
#define IDEM_TESTS_FAULT_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "idem/idem.h"

/* The tool name of the suite's effect. */
#define FAULT_TOOL "fault_write"

/* Application names: the workload's pools (the only backends faults are aimed at), and
 * the suite's own side connections. */
#define FAULT_APP_WORK   "idem-fault-work"
#define FAULT_APP_INJECT "idem-fault-injector"
#define FAULT_APP_SAMPLE "idem-fault-sampler"
#define FAULT_APP_CHECK  "idem-fault-checker"

/* How large a run is (fault_config_from_env). */
typedef struct fault_config {
    unsigned int threads;       /* IDEM_FAULT_THREADS, default 8 */
    unsigned int seconds;       /* IDEM_FAULT_SECONDS, default 18: workload time in all */
    unsigned int epoch_seconds; /* workload between two checks: a quick run is one epoch */
    unsigned int sample_ms;     /* RSS and connection samples */
    int soak;                   /* a long run: RSS or connections that grow fail it */
    unsigned long long seed;    /* IDEM_FAULT_SEED, default from the clock */
} fault_config;

void fault_config_from_env(fault_config *cfg);

/* The faults the injector knows. */
enum fault_kind {
    FAULT_TERMINATE = 0,       /* pg_terminate_backend() of a workload backend */
    FAULT_RESTART_FAST,        /* pg_ctl restart -m fast */
    FAULT_RESTART_IMMEDIATE,   /* pg_ctl restart -m immediate (crash recovery) */
    FAULT_STALL,               /* SIGSTOP a workload backend, SIGCONT 1-2 s later */
    FAULT_LOCK,                /* hold idem.operations in SHARE mode past the timeouts */
    FAULT_COMMIT_LOST,         /* a COMMIT's replies are lost (the store resolves) */
    FAULT_COMMIT_LOST_NO_LOOK, /* and the lookup that would resolve it is dropped too */
    FAULT_COMMIT_DROPPED,      /* the socket dies after COMMIT is sent */
    FAULT_KIND_COUNT
};

const char *fault_kind_name(enum fault_kind kind);

/* What a logical call (one retry-helper loop) is for. */
enum fault_call_kind {
    CALL_OWNER = 0, /* the first call of a fresh key, by the thread that owns it */
    CALL_DUPLICATE, /* the same key and arguments from another thread, often in flight */
    CALL_CHANGED,   /* the same key with other arguments: must be a conflict */
    CALL_RESUME,    /* the owner again, after a call that ended without an answer */
    CALL_REPLAY,    /* any key again, same arguments */
    CALL_SETTLE,    /* after the faults: every key without an answer */
    CALL_KIND_COUNT
};

/* One key and what the callers were told about it. */
typedef struct fault_op {
    char tenant[32];
    char id[IDEM_UUID_STRING_SIZE];
    unsigned int index;    /* in its epoch: part of the arguments */
    unsigned int sleep_ms; /* the effect sleeps this long (0: a fast effect) */
    /* Under fault_run.lock: */
    char *receipt;        /* the first receipt a caller got; every later one is equal */
    size_t receipt_len;   /* its length */
    long long effect_n;   /* the effect row the receipt names */
    unsigned int created; /* calls told created */
    unsigned int active;  /* calls in progress now */
} fault_op;

/* The arguments of @op (changed: the conflicting variant) as JSON text. */
void fault_op_arguments(char *buf, size_t size, const fault_op *op, int changed);

/* Counters of a run. */
typedef struct fault_counts {
    atomic_ullong calls[CALL_KIND_COUNT]; /* logical calls */
    atomic_ullong attempts;               /* idem_store_execute() calls */
    atomic_ullong attempt_status[IDEM_STATUS_MISCONFIGURED + 1];
    atomic_ullong final_status[IDEM_STATUS_MISCONFIGURED + 1];
    atomic_ullong faults[FAULT_KIND_COUNT]; /* injected */
    atomic_ullong statement_timeouts;       /* attempts that ended on 57014 */
    atomic_ullong lock_timeouts;            /* attempts that ended on 55P03 */
    atomic_ullong overlapping;              /* calls begun while another was on */
    atomic_ullong ops;                      /* keys made */
} fault_counts;

/* The ops of one epoch: a fixed array, published by count under fault_run.lock. */
typedef struct fault_epoch {
    unsigned int number;
    fault_op *ops;
    size_t nops, cap;
    size_t inflight[32]; /* ring of slow ops that owners started: for duplicates */
    size_t inflight_next;
} fault_epoch;

#define FAULT_MAX_MESSAGES 40

typedef struct fault_run {
    fault_config cfg;
    char *conninfo;
    idem_pool *pools[2];
    idem_store *stores[2];
    idem_retry_budget *budget;
    idem_retry_policy policy;
    pthread_mutex_t lock; /* the epoch's ops and what callers were told */
    fault_epoch *epoch;
    fault_counts counts;
    pthread_mutex_t violations_lock; /* the three below */
    unsigned long long violations;
    char *messages[FAULT_MAX_MESSAGES];
    size_t nmessages;
    atomic_int stalled_pid; /* a backend under SIGSTOP, 0 if none */
    unsigned long long ambiguous_commits, serialization_retries, claim_races; /* closed stores */
} fault_run;

/* fault_run.c: a run's pools and stores (the workload's two "servers"; none when
 * @conninfo is NULL, for tests of the judge alone), its epochs, violations and the
 * summary line. */
int fault_run_new(fault_run **out, const fault_config *cfg, const char *conninfo, char *why,
                  size_t why_size);
void fault_run_free(fault_run *run);
/* Free the stores and pools (keeping their counters for the summary). */
void fault_run_close_servers(fault_run *run);
void fault_violation(fault_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fault_print_violations(const fault_run *run, FILE *to);
void fault_print_summary(fault_run *run, FILE *to);
fault_epoch *fault_epoch_new(unsigned int number, size_t cap);
void fault_epoch_free(fault_epoch *epoch);
/* A new op in the current epoch, or NULL when it is full. */
fault_op *fault_epoch_add(fault_run *run, const char *tenant, const char *id,
                          unsigned int sleep_ms);

/* fault_judge.c: what one logical call's final outcome may be, checked when it ends. */
void fault_judge(fault_run *run, fault_op *op, int changed, const idem_outcome *out,
                 const idem_error *err);

/* fault_effect.c: the suite's effect and its table. */
int fault_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                 idem_error *err);
/* Create fault_effects in the database of @conninfo, and make commits durable there
 * (synchronous_commit on: an immediate restart must not lose an acknowledged commit). */
int fault_schema_create(const char *conninfo, char *why, size_t why_size);

/* fault_workload.c: the worker threads of one epoch, then the settling of every key. */
void fault_workload_run(fault_run *run, unsigned int seconds);
void fault_settle(fault_run *run);
/* One logical call under the retry helper; the final status. */
idem_status fault_call(fault_run *run, fault_op *op, enum fault_call_kind kind,
                       const idem_retry_policy *policy, idem_retry_budget *budget, uint64_t *rng);

/* fault_inject.c: the injector thread. */
typedef struct fault_injector fault_injector;
fault_injector *fault_injector_start(fault_run *run, unsigned int seconds);
void fault_injector_stop(fault_injector *inj);
/* SIGCONT a stalled backend, drop injected faults not yet taken, wait for the server. */
void fault_injector_restore(fault_run *run);

/* fault_check.c: the invariants over the database, and over each key of an epoch. */
void fault_check_db(fault_run *run, const char *when);
void fault_check_ops(fault_run *run, const fault_epoch *epoch);

/* fault_soak.c: RSS and connection samples over the run, and their growth. */
typedef struct fault_sampler fault_sampler;
fault_sampler *fault_sampler_start(fault_run *run);
/* Stop sampling; in a soak run, record a violation if RSS or connections grew. */
void fault_sampler_stop(fault_sampler *s, fault_run *run);

/* fault_side.c: the suite's own connections (injector, sampler, checker), which survive
 * restarts by reconnecting, and the server's control. */
typedef struct fault_side {
    char conninfo[512];
    PGconn *pg;
} fault_side;

void fault_side_init(fault_side *side, const char *conninfo, const char *app);
void fault_side_close(fault_side *side);
/* Run @sql with text parameters, reconnecting first if the connection is gone; NULL on
 * any failure (the server may be restarting). Caller PQclear()s. */
PGresult *fault_side_exec(fault_side *side, const char *sql, int nparams,
                          const char *const *values);
/* $IDEM_PG_CTL with @args ("restart -m fast"); 0 on success. */
int fault_pg_ctl(const char *args);
/* Wait up to @ms for the server to accept connections; 1 if it does. */
int fault_server_wait(unsigned int ms);

uint64_t fault_now_ms(void);
void fault_sleep_ms(unsigned int ms);
/* A per-thread generator (xorshift64*). */
uint64_t fault_rand(uint64_t *state);

#endif
