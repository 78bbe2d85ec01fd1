/*
 * idem-bench-http-floor — the least an HTTP server built on libmicrohttpd does for one call
 * of the gateway bench's tool, for tools/bench/gateway.py to measure idem-gateway's CPU per
 * call beside it. Not an idempotent server: it has none of idem's work, only what any
 * server answering the same requests with the same statement does.
 *
 * Usage: idem-bench-http-floor DBNAME TOKEN-SHA256-HEX [POOL [record|idem-record]]
 *
 * It listens on 127.0.0.1 at a free port, says "listening on http://127.0.0.1:PORT/" on
 * stderr, and answers until SIGTERM or SIGINT, one thread per connection as idem-gateway
 * runs libmicrohttpd, with at most POOL libpq connections shared by its threads as any
 * server caps its database connections (the least such a pool does: a mutex, a condition
 * variable, a stack of idle connections; PG* environment, database DBNAME), or without
 * POOL one libpq connection per thread:
 *
 *   GET /healthz                 200
 *   POST with the bearer token whose SHA-256 is TOKEN-SHA256-HEX, an Idempotency-Key and
 *   a body {"subject": ...}:
 *     key gateway-replay-*       the stored receipt by primary key (tenant gateway-bench):
 *                                201 with Idempotent-Replayed: true, as the gateway answers
 *     any other key              the gateway bench's tool statement (BENCH_GATEWAY_SQL) in
 *                                autocommit: 201 with its receipt; with "record", the
 *                                same statement and a record of the call (key, the body's
 *                                SHA-256, the receipt) on a lean table of its own
 *                                (public.bench_http_floor_ops) in one pipelined
 *                                SERIALIZABLE transaction, one round trip, retried on
 *                                40001/40P01: the least any server that remembers its
 *                                calls does, as idem-bench's create floor (create.c);
 *                                with "idem-record", the record a row of idem.operations
 *                                instead (its windows, claim token, CHECK constraint and
 *                                second index), as idem-bench's "floor, idem's record": the
 *                                database's work of the gateway's call, without idem
 *   anything else                400, 401 or 500
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define MAX_BODY 65536

static const char replay_sql[] = "SELECT convert_from(response, 'UTF8') FROM idem.operations"
                                 " WHERE tenant = $1 AND operation_id = $2";

/* The record mode's table and statement: the tool's INSERT and the call's record in one
 * statement, since the record holds the receipt. */
static const char record_table_sql[] =
    "CREATE TABLE IF NOT EXISTS public.bench_http_floor_ops (tenant text, operation_id text,"
    " digest text, response text, PRIMARY KEY (tenant, operation_id))";
static const char record_sql[] =
    "WITH task AS (" BENCH_GATEWAY_SQL ")"
    " INSERT INTO public.bench_http_floor_ops SELECT $1, $3, $4, t.receipt::text FROM task"
    " AS t(receipt) RETURNING response";
static const char idem_record_sql[] =
    "WITH task AS (" BENCH_GATEWAY_SQL ")"
    " INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
    " state, response, claim_token, expires_at, completed_at, forget_at)"
    " SELECT $1, $3, 'bench', 1, decode($4, 'hex'), 'completed',"
    " convert_to(t.receipt::text, 'UTF8'), gen_random_uuid(), now() + interval '1 day', now(),"
    " now() + interval '2 days' FROM task AS t(receipt) RETURNING convert_from(response, 'UTF8')";

#define MAX_POOL 64

typedef struct server {
    const char *dbname;
    int record; /* new keys in a transaction with their record: 1 on the lean table, 2 as
                   a row of idem.operations */
    unsigned char token_digest[SHA256_DIGEST_LENGTH];
    pthread_key_t conn_key; /* without a pool: this thread's PGconn, prepared; closed when
                               the thread ends */
    /* With a pool (size > 0): idle[0..nidle) are free, opened counts all made. */
    pthread_mutex_t lock;
    pthread_cond_t freed;
    unsigned int size, opened, nidle;
    PGconn *idle[MAX_POOL];
} server;

typedef struct body {
    size_t len;
    char data[MAX_BODY];
} body;

static void conn_close(void *pg)
{
    PQfinish(pg);
}

/* Prepare @sql as @name on @pg: 1 done, 0 failed. */
static int prepare(PGconn *pg, const char *name, const char *sql, int nparams)
{
    PGresult *res = PQprepare(pg, name, sql, nparams, NULL);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;

    PQclear(res);
    return ok;
}

/* A new connection with its statements prepared (the record modes' BEGIN and COMMIT too,
 * as the least work does), or NULL. */
static PGconn *open_conn(const server *s)
{
    const char *keys[] = {"dbname", NULL}, *values[] = {s->dbname, NULL};
    PGconn *pg = PQconnectdbParams(keys, values, 1);
    int ok = prepare(pg, "replay", replay_sql, 2) &&
             (s->record ? prepare(pg, "create", s->record == 2 ? idem_record_sql : record_sql, 4) &&
                              prepare(pg, "begin", "BEGIN ISOLATION LEVEL SERIALIZABLE", 0) &&
                              prepare(pg, "commit", "COMMIT", 0)
                        : prepare(pg, "create", BENCH_GATEWAY_SQL, 3));

    if (!ok) {
        fprintf(stderr, "idem-bench-http-floor: connecting: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    return pg;
}

/* A connection for one call: the pool's (waiting while all are busy), or this thread's,
 * opened on first use. */
static PGconn *conn_take(server *s)
{
    PGconn *pg;
    int open_one = 0;

    if (s->size == 0) {
        if ((pg = pthread_getspecific(s->conn_key)) == NULL && (pg = open_conn(s)) != NULL)
            pthread_setspecific(s->conn_key, pg);
        return pg;
    }
    pthread_mutex_lock(&s->lock);
    while (s->nidle == 0 && s->opened == s->size)
        pthread_cond_wait(&s->freed, &s->lock);
    if (s->nidle > 0)
        pg = s->idle[--s->nidle];
    else
        pg = NULL, open_one = 1, s->opened++;
    pthread_mutex_unlock(&s->lock);
    if (open_one && (pg = open_conn(s)) == NULL) {
        pthread_mutex_lock(&s->lock);
        s->opened--;
        pthread_cond_signal(&s->freed);
        pthread_mutex_unlock(&s->lock);
    }
    return pg;
}

static void conn_give(server *s, PGconn *pg)
{
    if (s->size == 0 || pg == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    s->idle[s->nidle++] = pg;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned int status, const char *text,
                              int replayed)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result rc;

    MHD_add_response_header(r, "Content-Type", "application/json");
    if (replayed)
        MHD_add_response_header(r, "Idempotent-Replayed", "true");
    rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Whether the Authorization header carries the bearer token whose SHA-256 is configured. */
static int authorized(const server *s, struct MHD_Connection *c)
{
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    unsigned char digest[SHA256_DIGEST_LENGTH];

    if (auth == NULL || strncmp(auth, "Bearer ", 7) != 0)
        return 0;
    SHA256((const unsigned char *)auth + 7, strlen(auth + 7), digest);
    return CRYPTO_memcmp(digest, s->token_digest, SHA256_DIGEST_LENGTH) == 0;
}

/* The configured digest's bytes from its hex digits: 0, or -1 when it is not hex. */
static int read_digest(unsigned char out[SHA256_DIGEST_LENGTH], const char *hex)
{
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        unsigned int byte;

        if (sscanf(hex + 2 * i, "%2x", &byte) != 1)
            return -1;
        out[i] = (unsigned char)byte;
    }
    return 0;
}

/* The result of one pipelined command: its last result (the caller clears it), or NULL
 * when it had none. */
static PGresult *pipe_result(PGconn *pg)
{
    PGresult *res, *last = NULL;

    while ((res = PQgetResult(pg)) != NULL) {
        PQclear(last);
        last = res;
    }
    return last;
}

static int retryable(const PGresult *res)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    return state != NULL && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0);
}

/* The record mode's new key: BEGIN, the statement, COMMIT in one round trip; the
 * statement's result (one row: the receipt), or NULL. Retried while serializable
 * transactions collide. */
static PGresult *create_recorded(PGconn *pg, const char *const values[4])
{
    for (int attempt = 0; attempt < 10; attempt++) {
        PGresult *begin, *res, *commit, *sync;
        int again;

        if (!PQenterPipelineMode(pg) || !PQsendQueryPrepared(pg, "begin", 0, NULL, NULL, NULL, 0) ||
            !PQsendQueryPrepared(pg, "create", 4, values, NULL, NULL, 0) ||
            !PQsendQueryPrepared(pg, "commit", 0, NULL, NULL, NULL, 0) || !PQpipelineSync(pg))
            return NULL;
        begin = pipe_result(pg);
        res = pipe_result(pg);
        commit = pipe_result(pg);
        sync = PQgetResult(pg); /* PGRES_PIPELINE_SYNC */
        again = retryable(res) || retryable(commit);
        if (PQresultStatus(commit) != PGRES_COMMAND_OK) {
            PQclear(res);
            res = NULL;
        }
        PQclear(begin);
        PQclear(commit);
        PQclear(sync);
        PQexitPipelineMode(pg);
        if (res != NULL || !again)
            return res;
    }
    return NULL;
}

/* The body's SHA-256 in hex, the record mode's stand-in for the arguments' fingerprint. */
static void body_digest(char out[2 * SHA256_DIGEST_LENGTH + 1], const body *b)
{
    unsigned char d[SHA256_DIGEST_LENGTH];

    SHA256((const unsigned char *)b->data, b->len, d);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The statement for the key: the receipt by primary key, or the tool's INSERT. */
static enum MHD_Result call(server *s, struct MHD_Connection *c, const char *key, const body *b)
{
    int replay = strncmp(key, "gateway-replay-", 15) == 0;
    json_t *args = json_loadb(b->data, b->len, 0, NULL);
    const char *subject = json_string_value(json_object_get(args, "subject"));
    /* A replay binds the tenant and the key, a new key the tenant, the subject and the key. */
    char digest[2 * SHA256_DIGEST_LENGTH + 1];
    const char *values[4] = {BENCH_GATEWAY_TENANT, replay ? key : subject, key, digest};
    PGconn *pg = conn_take(s);
    PGresult *res = NULL;
    enum MHD_Result rc;

    if (s->record && !replay)
        body_digest(digest, b);
    if (subject == NULL)
        rc = answer(c, 400, "{\"error\":\"subject\"}", 0);
    else if (pg == NULL)
        rc = answer(c, 500, "{\"error\":\"database\"}", 0);
    else if (res = s->record && !replay ? create_recorded(pg, values)
                                        : PQexecPrepared(pg, replay ? "replay" : "create",
                                                         replay ? 2 : 3, values, NULL, NULL, 0),
             PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        rc = answer(c, 500, "{\"error\":\"statement\"}", 0);
    else
        rc = answer(c, 201, PQgetvalue(res, 0, 0), replay);
    PQclear(res);
    conn_give(s, pg);
    json_decref(args);
    return rc;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    server *s = cls;
    body *b = *state;
    const char *key;

    (void)version;
    if (strcmp(method, "GET") == 0 && strcmp(url, "/healthz") == 0)
        return answer(c, 200, "{\"status\":\"ok\"}", 0);
    if (b == NULL) { /* not zeroed: only its first len bytes are read */
        b = malloc(sizeof(*b));
        if (b != NULL)
            b->len = 0;
        *state = b;
        return b != NULL ? MHD_YES : MHD_NO;
    }
    if (*upload_size > 0) {
        size_t n = *upload_size < MAX_BODY - b->len ? *upload_size : MAX_BODY - b->len;

        memcpy(b->data + b->len, upload, n);
        b->len += n;
        *upload_size = 0;
        return MHD_YES;
    }
    if (!authorized(s, c))
        return answer(c, 401, "{\"error\":\"token\"}", 0);
    key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
    if (key == NULL || strcmp(method, "POST") != 0)
        return answer(c, 400, "{\"error\":\"Idempotency-Key\"}", 0);
    return call(s, c, key, b);
}

static void completed(void *cls, struct MHD_Connection *c, void **state,
                      enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    free(*state);
    *state = NULL;
}

/* The record mode's table, made once before any thread prepares its statement. */
static int make_record_table(const char *dbname)
{
    const char *keys[] = {"dbname", NULL}, *values[] = {dbname, NULL};
    PGconn *pg = PQconnectdbParams(keys, values, 1);
    PGresult *res = PQexec(pg, record_table_sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;

    if (!ok)
        fprintf(stderr, "idem-bench-http-floor: the record table: %s", PQerrorMessage(pg));
    PQclear(res);
    PQfinish(pg);
    return ok ? 0 : -1;
}

static int wait_for_signal(void)
{
    sigset_t set;
    int sig;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    return sigwait(&set, &sig);
}

int main(int argc, char **argv)
{
    static server s;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    struct MHD_Daemon *d;
    const union MHD_DaemonInfo *info;
    sigset_t set;

    if (argc < 3 || argc > 5 || strlen(argv[2]) != 2 * SHA256_DIGEST_LENGTH ||
        read_digest(s.token_digest, argv[2]) != 0 ||
        (argc >= 4 && (sscanf(argv[3], "%u", &s.size) != 1 || s.size < 1 || s.size > MAX_POOL)) ||
        (argc == 5 && strcmp(argv[4], "record") != 0 && strcmp(argv[4], "idem-record") != 0)) {
        fputs("usage: idem-bench-http-floor DBNAME TOKEN-SHA256-HEX [POOL (1 to 64)"
              " [record|idem-record]]\n",
              stderr);
        return 64;
    }
    s.record = argc < 5 ? 0 : strcmp(argv[4], "record") == 0 ? 1 : 2;
    if (s.record == 1 && make_record_table(argv[1]) != 0)
        return 69;
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.freed, NULL);
    s.dbname = argv[1];
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    pthread_key_create(&s.conn_key, conn_close);
    /* Block the signals before MHD's threads start, so that they inherit the mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                             MHD_USE_POLL | MHD_USE_ERROR_LOG,
                         0, NULL, NULL, handle, &s, MHD_OPTION_NOTIFY_COMPLETED, completed, &s,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_END);
    if (d == NULL || (info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)) == NULL) {
        fputs("idem-bench-http-floor: the server did not start\n", stderr);
        return 69;
    }
    fprintf(stderr, "idem-bench-http-floor: listening on http://127.0.0.1:%u/\n",
            (unsigned)info->port);
    wait_for_signal();
    MHD_stop_daemon(d);
    return 0;
}
