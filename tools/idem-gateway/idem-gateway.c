/* idem-gateway: serves the write tools of one configuration file over HTTP, each call run
 * at most once per (tenant, Idempotency-Key) by libidem (README.md in this folder). */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <idem/idem.h>

#include "cli.h"
#include "auth.h"
#include "config.h"
#include "live.h"
#include "mcp_stdio.h"
#include "metrics.h"
#include "server.h"

#define PROG      "idem-gateway"
#define TOKEN_MAX 4096

static const char usage_text[] =
    "usage: idem-gateway --config FILE [--log-format plain|json]\n"
    "       idem-gateway --stdio --config FILE\n"
    "       idem-gateway --check-config FILE\n"
    "       idem-gateway hash-token < TOKEN\n"
    "       idem-gateway --help | --version\n"
    "\n"
    "Serves the write tools declared in FILE over HTTP: POST /v1/tools/{tool} with\n"
    "Authorization: Bearer TOKEN, Idempotency-Key: KEY and the arguments as JSON runs the\n"
    "tool at most once per (the token's tenant, KEY) and answers every retry with the\n"
    "first answer's bytes (Idempotent-Replayed: true); GET /v1/tools lists the tools.\n"
    "The same tools are served over the Model Context Protocol: Streamable HTTP at\n"
    "POST /mcp, or on standard input and output with --stdio.\n"
    "GET /healthz, /readyz and /metrics serve operators. SIGHUP reloads the tools,\n"
    "tenants and tokens; SIGTERM or SIGINT stops after the calls under way (within\n"
    "http.shutdown_grace_s). Its manual is\n"
    "tools/idem-gateway/README.md.\n"
    "\n"
    "Commands and options:\n"
    "  --config FILE         serve the configuration in FILE\n"
    "  --stdio               serve FILE's tools over MCP on standard input and output\n"
    "                        (the tenant is mcp.stdio_tenant; logs on standard error);\n"
    "                        stops at the end of input once the calls under way end\n"
    "  --log-format FORMAT   the request log: plain (one line of name=value) or json\n"
    "                        (one object a line); default: the file's log.format\n"
    "  --check-config FILE   check FILE (schemas, SQL declarations, http tools and the\n"
    "                        environment variables of their secrets, token digests,\n"
    "                        windows, names) without serving or connecting; prints\n"
    "                        \"FILE: ok\" on stdout\n"
    "  hash-token            read one token on stdin (a trailing newline is dropped) and\n"
    "                        print the SHA-256 digest that the configuration lists\n"
    "  -h, --help            print this help\n"
    "  -V, --version         print the version\n"
    "\n"
    "Exit status:\n"
    "   0  done; the server stopped on SIGTERM or SIGINT, every call answered (--stdio:\n"
    "      at the end of input, every call finished)\n"
    "  64  usage error\n"
    "  65  the configuration is not valid (the message names the place as a JSON\n"
    "      Pointer into the file), or hash-token's input is not a bearer token\n"
    "  66  the configuration file cannot be read\n"
    "  70  hash-token: SHA-256 failed\n"
    "  71  the server could not start: the address cannot be listened on, libcurl\n"
    "      cannot be set up, out of memory\n"
    "  74  hash-token: standard input cannot be read\n"
    "  75  calls were still running at the end of the grace period\n"
    "      (http.shutdown_grace_s; --stdio: mcp.stdio_grace_s): their callers retry with\n"
    "      the same key; or the database was unavailable at start\n"
    "  78  the pool or the store refused the configuration's dsn or settings, or the\n"
    "      database refused the login (the role, its password, the database's name)\n";

#define usage_error(...) cli_usage_error(PROG, __VA_ARGS__)

static void log_line(void *ctx, int level, const char *message)
{
    if (level >= IDEM_LOG_WARNING)
        cli_say(PROG, "%s", message);
}

static int check_config(const char *path)
{
    gw_config *cfg = NULL;
    char why[1200];
    int rc = gw_config_load(&cfg, path, why, sizeof(why));

    if (rc != 0) {
        cli_say(PROG, "%s", why);
        return rc;
    }
    printf("%s: ok: %zu tenant%s, %zu tool%s\n", path, cfg->ntenants, cfg->ntenants == 1 ? "" : "s",
           cfg->ntools, cfg->ntools == 1 ? "" : "s");
    gw_config_free(cfg);
    return EXIT_OK;
}

static int hash_token(void)
{
    char token[TOKEN_MAX + 2];
    unsigned char digest[GW_DIGEST_SIZE];
    size_t len = fread(token, 1, sizeof(token) - 1, stdin);

    if (ferror(stdin)) {
        cli_say(PROG, "hash-token: cannot read standard input");
        return EXIT_IOERR;
    }
    if (len > 0 && token[len - 1] == '\n')
        len--;
    if (len > 0 && token[len - 1] == '\r')
        len--;
    if (len > TOKEN_MAX || !gw_token_wellformed(token, len)) {
        cli_say(PROG,
                "hash-token: not a bearer token: 1 to %d characters of A-Z a-z 0-9 - . _ "
                "~ + /, then '=' padding, on one line",
                TOKEN_MAX);
        return EXIT_DATAERR;
    }
    if (gw_token_digest(digest, token, len) != 0) {
        cli_say(PROG, "hash-token: SHA-256 failed");
        return EXIT_SOFTWARE;
    }
    for (size_t i = 0; i < GW_DIGEST_SIZE; i++)
        printf("%02x", digest[i]);
    printf("\n");
    return EXIT_OK;
}

/* The runtime of @cfg (the pool, the store, the http tools' clients); 0, or the exit
 * status having said why. */
static int open_runtime(gw_runtime **rt, const gw_config *cfg)
{
    gw_runtime_options opts = {0};
    gw_runtime_part part;
    idem_error err = IDEM_ERROR_INIT;
    char why[1024];

    opts.dsn = cfg->dsn;
    opts.log = log_line;
    if (gw_runtime_open(rt, cfg, &opts, &part, &err, why, sizeof(why)) != 0) {
        cli_say(PROG, "%s", why);
        return gw_runtime_exit(part, &err);
    }
    return 0;
}

/* Raise the soft limit on open files to the hard one: a connection is a descriptor. Says
 * so when max_connections, the pool and a margin do not fit. */
static void raise_nofile(const gw_config *cfg)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)cfg->max_connections + cfg->pool.max_size + 64;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        cli_say(PROG,
                "warning: open files are limited to %llu, fewer than http.max_connections, "
                "the pool and a margin need (%llu): raise LimitNOFILE (ulimit -n)",
                (unsigned long long)rl.rlim_cur, (unsigned long long)need);
}

static double epoch_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* SIGHUP: the file again; the old configuration stays when it is refused. */
static void reload(gw_live *live)
{
    char why[1200];

    if (gw_live_reload(live, why, sizeof(why)) != 0) {
        cli_say(PROG, "SIGHUP: reload refused, the configuration in use stays: %s", why);
        gw_metrics_reload(0, epoch_s());
        return;
    }
    gw_metrics_reload(1, epoch_s());
    if (why[0] != '\0')
        cli_say(PROG,
                "SIGHUP: reloaded tools, tenants and tokens; changed but in effect only after "
                "a restart: %s",
                why);
    else
        cli_say(PROG, "SIGHUP: reloaded tools, tenants and tokens");
}

/* The first line: where, how much. */
static void say_listening(const gw_server *server, gw_live *live)
{
    gw_gen *gen = gw_live_acquire(live);
    const gw_config *cfg = gen->cfg;
    const char *address = live->boot.address;

    cli_say(PROG, "listening on http://%s%s%s:%u/v1/tools (%zu tool%s, %zu tenant%s)",
            strchr(address, ':') ? "[" : "", address, strchr(address, ':') ? "]" : "", server->port,
            cfg->ntools, cfg->ntools == 1 ? "" : "s", cfg->ntenants, cfg->ntenants == 1 ? "" : "s");
    gw_gen_release(gen);
}

/* SIGTERM or SIGINT: stop accepting, give the requests under way the grace period, stop.
 * 0, or 1 having exited already when some outlast it. */
static int shut_down(gw_server *server, gw_live *live, int sig)
{
    gw_gen *gen = gw_live_acquire(live);
    unsigned int grace = gen->cfg->shutdown_grace_s, left;

    gw_gen_release(gen);
    cli_say(PROG, "%s: stopping after the calls under way (at most %u s)",
            sig == SIGINT ? "SIGINT" : "SIGTERM", grace);
    if ((left = gw_server_drain(server, grace)) > 0) {
        cli_say(PROG,
                "%u request%s still under way after http.shutdown_grace_s (%u s): exiting "
                "without them; each call commits or rolls back whole",
                left, left == 1 ? "" : "s", grace);
        fflush(stderr);
        _exit(EXIT_TEMPFAIL); /* calls still use the store: nothing may be freed under them */
    }
    gw_server_stop(server);
    cli_say(PROG, "stopped");
    return EXIT_OK;
}

/* Serve until SIGTERM or SIGINT; SIGHUP reloads. The signals are blocked in every thread
 * (the server's inherit the mask) and taken here by sigwait(). */
static int serve(const char *path, int log_format)
{
    gw_live live;
    gw_server server = {0};
    sigset_t signals;
    char why[1200];
    int rc, sig = 0;

    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    gw_metrics_started();
    if ((rc = gw_live_open(&live, path, log_line, why, sizeof(why))) != 0) {
        cli_say(PROG, "%s", why);
        return rc;
    }
    gw_metrics_config_loaded(epoch_s());
    raise_nofile(&live.boot);
    if (gw_server_start(&server, &live, log_format, why, sizeof(why)) != 0) {
        cli_say(PROG, "%s", why);
        rc = EXIT_OSERR;
        goto done;
    }
    say_listening(&server, &live);
    while (sigwait(&signals, &sig) == 0 && sig == SIGHUP)
        reload(&live);
    rc = shut_down(&server, &live, sig);
done:
    gw_live_close(&live);
    gw_metrics_free();
    return rc;
}

/* MCP on standard input and output until the input ends (mcp_stdio.h). */
static int serve_stdio(const char *path)
{
    gw_config *cfg = NULL;
    gw_runtime *rt = NULL;
    char why[1200];
    int rc;

    if ((rc = gw_config_load(&cfg, path, why, sizeof(why))) != 0) {
        cli_say(PROG, "%s", why);
        return rc;
    }
    if (cfg->stdio_tenant == NULL) {
        cli_say(PROG,
                "%s: /mcp/stdio_tenant: is required with --stdio: the tenant the calls "
                "are made for",
                path);
        rc = EXIT_DATAERR;
        goto done;
    }
    signal(SIGPIPE, SIG_IGN);
    if ((rc = open_runtime(&rt, cfg)) != 0)
        goto done;
    cli_say(PROG, "serving MCP on stdio for tenant %s (%zu tool%s)", cfg->stdio_tenant->name,
            cfg->ntools, cfg->ntools == 1 ? "" : "s");
    if (gw_mcp_stdio_serve(cfg, rt, stdin, stdout) != 0) {
        fflush(stdout);
        fflush(stderr);
        _exit(EXIT_TEMPFAIL); /* calls still use the store: nothing may be freed under them */
    }
    cli_say(PROG, "end of input: stopped");
done:
    gw_runtime_close(rt);
    gw_config_free(cfg);
    gw_metrics_free();
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", required_argument, NULL, 'k'},
        {"stdio", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"log-format", required_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    const char *config = NULL, *check = NULL;
    int opt, stdio_mode = 0, log_format = -1;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+hV", longs, NULL)) != -1) {
        if (opt == 'h') {
            fputs(usage_text, stdout);
            return EXIT_OK;
        }
        if (opt == 'V') {
            printf(PROG " %s\n", idem_version());
            return EXIT_OK;
        }
        if (opt == 'c')
            config = optarg;
        else if (opt == 'k')
            check = optarg;
        else if (opt == 's')
            stdio_mode = 1;
        else if (opt == 'l' && (strcmp(optarg, "plain") == 0 || strcmp(optarg, "json") == 0))
            log_format = strcmp(optarg, "json") == 0;
        else if (opt == 'l')
            return usage_error("--log-format takes plain or json, not '%s'", optarg);
        else
            return usage_error("unknown option or missing argument: %s", argv[optind - 1]);
    }
    if (optind < argc && strcmp(argv[optind], "hash-token") == 0 && config == NULL && check == NULL)
        return optind + 1 == argc ? hash_token()
                                  : usage_error("hash-token takes no argument: it reads stdin");
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if ((config == NULL) == (check == NULL))
        return usage_error("give one of --config FILE and --check-config FILE");
    if (stdio_mode && config == NULL)
        return usage_error("--stdio serves a configuration: give --config FILE");
    if (stdio_mode)
        return serve_stdio(config);
    return check != NULL ? check_config(check) : serve(config, log_format);
}
