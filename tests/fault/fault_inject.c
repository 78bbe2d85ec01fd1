/* The injector thread: one fault at a time, at random moments, from a side connection
 * whose application_name keeps it out of its own aim. The first round injects every kind
 * once, in random order; later rounds weight them. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "exec.h"
#include "fault.h"

struct fault_injector {
    fault_run *run;
    pthread_t thread;
    uint64_t end_ms;
    atomic_int stop;
    fault_side side;
    uint64_t rng;
    enum fault_kind bag[32];
    size_t nbag, next;
    unsigned int rounds;
};

/* How many of each kind a round after the first holds. */
static const unsigned int weights[FAULT_KIND_COUNT] = {
    [FAULT_TERMINATE] = 4,
    [FAULT_RESTART_FAST] = 1,
    [FAULT_RESTART_IMMEDIATE] = 1,
    [FAULT_STALL] = 2,
    [FAULT_LOCK] = 1,
    [FAULT_COMMIT_LOST] = 3,
    [FAULT_COMMIT_LOST_NO_LOOK] = 1,
    [FAULT_COMMIT_DROPPED] = 1,
};

static void refill(fault_injector *inj)
{
    inj->nbag = 0;
    for (int k = 0; k < FAULT_KIND_COUNT; k++) {
        for (unsigned int i = 0; i < (inj->rounds == 0 ? 1 : weights[k]); i++)
            inj->bag[inj->nbag++] = (enum fault_kind)k;
    }
    for (size_t i = inj->nbag; i > 1; i--) {
        size_t j = fault_rand(&inj->rng) % i;
        enum fault_kind t = inj->bag[i - 1];

        inj->bag[i - 1] = inj->bag[j];
        inj->bag[j] = t;
    }
    inj->next = 0;
    inj->rounds++;
}

static enum fault_kind next_kind(fault_injector *inj)
{
    if (inj->next == inj->nbag)
        refill(inj);
    return inj->bag[inj->next++];
}

static int stopping(fault_injector *inj)
{
    return atomic_load(&inj->stop) || fault_now_ms() >= inj->end_ms;
}

/* Sleep up to @ms, waking early when the injector is told to stop. */
static void pause_ms(fault_injector *inj, unsigned int ms)
{
    uint64_t end = fault_now_ms() + ms;

    while (!atomic_load(&inj->stop) && fault_now_ms() < end)
        fault_sleep_ms(20);
}

/* A workload backend: a busy one when there is one. Returns its pid, or 0. */
static int find_backend(fault_injector *inj)
{
    PGresult *res = fault_side_exec(&inj->side,
                                    "SELECT pid FROM pg_stat_activity"
                                    " WHERE application_name LIKE '" FAULT_APP_WORK "%'"
                                    " AND pid <> pg_backend_pid()"
                                    " ORDER BY state = 'idle', random() LIMIT 1",
                                    0, NULL);
    int pid = res != NULL && PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;

    PQclear(res);
    return pid;
}

/* Right after a restart the workload may have no backend yet: wait up to 2 s for one. */
static int pick_backend(fault_injector *inj)
{
    int pid = 0;

    for (int i = 0; i < 20 && !atomic_load(&inj->stop) && (pid = find_backend(inj)) == 0; i++)
        fault_sleep_ms(100);
    return pid;
}

static int terminate(fault_injector *inj)
{
    char pid[16];
    const char *values[1] = {pid};
    int target = pick_backend(inj), done;
    PGresult *res;

    if (target == 0)
        return 0;
    snprintf(pid, sizeof(pid), "%d", target);
    res = fault_side_exec(&inj->side, "SELECT pg_terminate_backend($1::int)", 1, values);
    done = res != NULL && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return done;
}

static int restart(fault_injector *inj, const char *mode)
{
    char args[64];
    int rc;

    snprintf(args, sizeof(args), "restart -m %s", mode);
    fault_side_close(&inj->side);
    rc = fault_pg_ctl(args);
    if (rc != 0) {
        fault_violation(inj->run, "injector: pg_ctl %s failed (%d)", args, rc);
        fault_injector_restore(inj->run);
    }
    return rc == 0;
}

/* SIGSTOP a backend, SIGCONT it 1-2 s later (always: see fault_injector_restore()). */
static int stall(fault_injector *inj)
{
    int pid = pick_backend(inj);

    if (pid == 0 || kill(pid, SIGSTOP) != 0)
        return 0;
    atomic_store(&inj->run->stalled_pid, pid);
    pause_ms(inj, 1000 + (unsigned int)(fault_rand(&inj->rng) % 1000));
    if (atomic_exchange(&inj->run->stalled_pid, 0) == pid)
        kill(pid, SIGCONT);
    return 1;
}

/* Hold idem.operations in SHARE mode longer than the workload's timeouts: claims wait, and
 * end on statement_timeout on one store, on lock_timeout on the other. */
static int hold_lock(fault_injector *inj)
{
    static const char *const steps[] = {"BEGIN", "SET LOCAL lock_timeout = '3s'",
                                        "LOCK TABLE idem.operations IN SHARE MODE",
                                        "SELECT pg_sleep(2.2)", "COMMIT"};
    size_t done = 0;
    PGresult *res;

    while (done < sizeof(steps) / sizeof(steps[0]) &&
           (res = fault_side_exec(&inj->side, steps[done], 0, NULL)) != NULL) {
        PQclear(res);
        done++;
    }
    if (done < sizeof(steps) / sizeof(steps[0]))
        PQclear(fault_side_exec(&inj->side, "ROLLBACK", 0, NULL));
    return done > 2;
}

/* Through the production path's fault points (exec.h): the next COMMITs lose their
 * replies, or their socket; the first also loses the lookup that would resolve it. */
static int commit_fault(fault_injector *inj, enum fault_kind kind)
{
    if (kind == FAULT_COMMIT_LOST) {
        idem__fault_inject("COMMIT", IDEM__FAULT_LOSE_REPLY,
                           1 + (unsigned int)(fault_rand(&inj->rng) % 2));
    } else if (kind == FAULT_COMMIT_LOST_NO_LOOK) {
        idem__fault_inject("COMMIT", IDEM__FAULT_LOSE_REPLY, 1);
        idem__fault_inject("idem_store_resolve", IDEM__FAULT_DROP_BEFORE_SEND, 1);
    } else {
        idem__fault_inject("COMMIT", IDEM__FAULT_DROP_AFTER_SEND, 1);
    }
    return 1;
}

static int inject(fault_injector *inj, enum fault_kind kind)
{
    switch (kind) {
    case FAULT_TERMINATE:
        return terminate(inj);
    case FAULT_RESTART_FAST:
        return restart(inj, "fast");
    case FAULT_RESTART_IMMEDIATE:
        return restart(inj, "immediate");
    case FAULT_STALL:
        return stall(inj);
    case FAULT_LOCK:
        return hold_lock(inj);
    default:
        return commit_fault(inj, kind);
    }
}

static void *injector_main(void *p)
{
    fault_injector *inj = p;
    unsigned int gap = inj->run->cfg.soak ? 1200 : 250;

    pause_ms(inj, 1000); /* let the workload start */
    while (!stopping(inj)) {
        enum fault_kind kind = next_kind(inj);

        if (inject(inj, kind))
            atomic_fetch_add(&inj->run->counts.faults[kind], 1);
        pause_ms(inj, 100 + (unsigned int)(fault_rand(&inj->rng) % gap));
    }
    fault_side_close(&inj->side);
    return NULL;
}

fault_injector *fault_injector_start(fault_run *run, unsigned int seconds)
{
    fault_injector *inj = calloc(1, sizeof(*inj));

    if (inj == NULL)
        abort();
    inj->run = run;
    inj->rng = run->cfg.seed ^ (0xA5A5A5A5ull + run->epoch->number);
    /* The last second has no new fault, so that the workload sees the last one's end. */
    inj->end_ms = fault_now_ms() + (seconds > 2 ? seconds - 1 : 1) * 1000ull;
    fault_side_init(&inj->side, run->conninfo, FAULT_APP_INJECT);
    if (pthread_create(&inj->thread, NULL, injector_main, inj) != 0)
        abort();
    return inj;
}

void fault_injector_stop(fault_injector *inj)
{
    if (inj == NULL)
        return;
    atomic_store(&inj->stop, 1);
    pthread_join(inj->thread, NULL);
    free(inj);
}

void fault_injector_restore(fault_run *run)
{
    int pid = atomic_exchange(&run->stalled_pid, 0);

    if (pid > 0)
        kill(pid, SIGCONT);
    idem__fault_reset();
    if (!fault_server_wait(30000)) {
        fault_pg_ctl("start");
        fault_server_wait(60000);
    }
}
