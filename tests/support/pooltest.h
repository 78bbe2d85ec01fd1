/*
 * Test support for the pool tests: a per-test fixture and the helpers they share.
 *
 *     TestSuite(pool_xxx, .init = pooltest_init, .fini = pooltest_fini);
 *
 * Each test gets a fresh database and an application_name of its own (to count its
 * sessions in pg_stat_activity); the pool it opens with pooltest_open() is freed after it.
 * Helpers fail the test when what they do fails.
 */
#ifndef IDEM_TESTS_POOLTEST_H
#define IDEM_TESTS_POOLTEST_H

#include <pthread.h>
#include <stdio.h>

#include "idem/pool.h"
#include "pgtest.h"

void pooltest_init(void);
void pooltest_fini(void);

/* The test's database (borrowed; valid during the test). */
const char *pooltest_conninfo(void);

/* An application_name unique to the test (borrowed; valid during the test). */
const char *pooltest_app(void);

/* Open the test's pool on its database; freed by pooltest_fini() or pooltest_close(). */
idem_pool *pooltest_open(const idem_pool_options *opts);

/* The same on another conninfo (the test's database with more settings). */
idem_pool *pooltest_open_at(const char *conninfo, const idem_pool_options *opts);

/* Free the test's pool now, for tests that look at what freeing does. */
void pooltest_close(void);

idem_conn *pooltest_acquire(idem_pool *pool);

/* Run SQL on a pooled connection; returns its first cell (malloc'd, caller frees; "" when
 * there is no row). */
char *pooltest_query(idem_conn *conn, const char *sql);

/* The first cell as a number. */
long pooltest_query_long(idem_conn *conn, const char *sql);

/* Run SQL as an application does on a connection it takes from @from (idem_pool_acquire(),
 * then idem_pool_release()); returns the first cell as pooltest_query() does. */
char *pooltest_query_acquired(idem_pool *from, const char *sql);

/* The connection's server process. */
long pooltest_backend_pid(idem_conn *conn);

/* End a server process, waiting until it is gone. */
void pooltest_kill_backend(long pid);

/* Sessions whose application_name is @app. */
long pooltest_sessions(const char *app);

/* pooltest_sessions(app), waiting (bounded) until it is @want: sessions end a little after
 * their client closes them. */
long pooltest_wait_sessions(const char *app, long want);

idem_pool_stats pooltest_stats(idem_pool *pool);

/* What a pool logged: set .log = pooltest_log_record and .log_ctx to one of these
 * (initialize with POOLTEST_LOG_INIT). text holds the records, one per line. */
typedef struct pooltest_log {
    pthread_mutex_t lock;
    char text[8192];
    int warnings;  /* records at IDEM_LOG_WARNING or above */
    int multiline; /* records carrying a newline, carriage return or tab */
} pooltest_log;
#define POOLTEST_LOG_INIT                                                                          \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, "", 0, 0                                                        \
    }
void pooltest_log_record(void *ctx, int level, const char *message);

/* Record what libpq sends and receives on conn (PQtrace) into a temporary file; the
 * caller fcloses it. pooltest_trace_has(): whether that trace holds text. */
FILE *pooltest_trace(idem_conn *conn);
int pooltest_trace_has(FILE *trace, const char *text);

#endif
