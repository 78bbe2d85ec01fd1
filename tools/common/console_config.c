/* The console's member of the configuration: checked as the rest of the file is, every
 * refusal naming its place. */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "console_config.h"
#include "core/parse.h"

#define SESSION_MIN_S     60
#define SESSION_MAX_S     (7U * 86400U)
#define SESSION_DEFAULT_S (8U * 3600U)

static const char *const console_members[] = {"path",      "dsn",           "operators",
                                              "session_s", "secure_cookie", NULL};
static const char *const operator_members[] = {"tokens", NULL};
/* The gateway's own routes' first segments: the console's prefix must not shadow them. */
static const char *const taken_segments[] = {"v1", "mcp", "healthz", "readyz", "metrics", NULL};

static int path_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.' || ch == '/';
}

/* Whether the first segment of @path ("/x/...") is one of the gateway's routes. */
static const char *taken_segment(const char *path)
{
    size_t n = strcspn(path + 1, "/");

    for (size_t i = 0; taken_segments[i] != NULL; i++) {
        if (strlen(taken_segments[i]) == n && strncmp(path + 1, taken_segments[i], n) == 0)
            return taken_segments[i];
    }
    return NULL;
}

static int read_path(cfg_reader *r, gw_console_config *cc, const json_t *console)
{
    const char *taken;
    size_t n;
    int rc = cfg_string(r, console, "path", 0, &cc->path);

    if (rc != 0)
        return rc;
    n = strlen(cc->path);
    if (n < 3 || n > GW_CONSOLE_PATH_MAX || cc->path[0] != '/' || cc->path[n - 1] != '/' ||
        strstr(cc->path, "//") != NULL)
        return cfg_refuse(r, "path",
                          "must be a path prefix that starts and ends with '/', such as "
                          "\"/console/\", of at most %d bytes",
                          GW_CONSOLE_PATH_MAX);
    for (size_t i = 0; i < n; i++) {
        if (!path_char(cc->path[i]))
            return cfg_refuse(r, "path", "may hold only letters, digits and - _ . /");
    }
    if ((taken = taken_segment(cc->path)) != NULL)
        return cfg_refuse(r, "path", "/%s is the gateway's own route; choose another prefix",
                          taken);
    cc->path_len = n;
    return 0;
}

static int name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_';
}

static int check_operator_name(cfg_reader *r, const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > GW_CONSOLE_OPERATOR_MAX)
        return cfg_refuse(r, NULL, "an operator's name is 1 to %d bytes", GW_CONSOLE_OPERATOR_MAX);
    for (size_t i = 0; i < n; i++) {
        if (!name_char(name[i]))
            return cfg_refuse(r, NULL, "an operator's name may hold only letters, digits, - and _");
    }
    return 0;
}

/* The tenant that holds @d among its token digests, or NULL. */
static const gw_tenant *tenant_with(const gw_config *cfg, const unsigned char *d)
{
    for (size_t i = 0; i < cfg->ntenants; i++) {
        for (size_t k = 0; k < cfg->tenants[i].ndigests; k++) {
            if (memcmp(cfg->tenants[i].digests[k], d, GW_DIGEST_SIZE) == 0)
                return &cfg->tenants[i];
        }
    }
    return NULL;
}

/* Whether @d is a digest of an operator before @op, or of @op's before @j. */
static int operator_with(const gw_console_config *cc, const gw_tenant *op, size_t j,
                         const unsigned char *d)
{
    for (const gw_tenant *o = cc->operators; o <= op; o++) {
        size_t upto = o == op ? j : o->ndigests;

        for (size_t k = 0; k < upto; k++) {
            if (memcmp(o->digests[k], d, GW_DIGEST_SIZE) == 0)
                return 1;
        }
    }
    return 0;
}

/* One digest of @op, at @r->at: well formed, not a tenant's, not listed before. */
static int read_digest(cfg_reader *r, const gw_config *cfg, gw_tenant *op, size_t j,
                       const json_t *v)
{
    const char *s = json_string_value(v);
    const gw_tenant *tenant;

    if (s == NULL || json_string_length(v) != 2 * GW_DIGEST_SIZE ||
        idem__hex_decode(op->digests[j], GW_DIGEST_SIZE, s) != 0)
        return cfg_refuse(r, NULL,
                          "must be a token's SHA-256 digest, 64 lower-case hex digits "
                          "(idem-gateway hash-token prints one)");
    if ((tenant = tenant_with(cfg, op->digests[j])) != NULL)
        return cfg_refuse(r, NULL,
                          "is also a token digest of tenant \"%s\" (/tenants/%s/tokens): an "
                          "operator's token must not be a tenant's",
                          tenant->name, tenant->name);
    if (operator_with(cfg->console, op, j, op->digests[j]))
        return cfg_refuse(r, NULL,
                          "the same token digest is listed twice: a token belongs to one "
                          "operator, once");
    return 0;
}

static int read_operator(cfg_reader *r, const gw_config *cfg, gw_tenant *op, const json_t *value)
{
    const json_t *tokens = json_object_get(value, "tokens"), *v;
    size_t j, mark;
    int rc;

    if ((rc = check_operator_name(r, op->name)) != 0 ||
        (rc = cfg_object(r, value, operator_members)) != 0)
        return rc;
    if (!json_is_array(tokens) || json_array_size(tokens) == 0)
        return cfg_refuse(r, "tokens", "must be a non-empty array of token digests");
    if ((op->digests = calloc(json_array_size(tokens), GW_DIGEST_SIZE)) == NULL)
        return cfg_refuse(r, "tokens", "out of memory");
    mark = gw_pointer_push(&r->at, "tokens");
    json_array_foreach(tokens, j, v)
    {
        size_t at = gw_pointer_push_index(&r->at, j);

        if ((rc = read_digest(r, cfg, op, j, v)) != 0)
            return rc;
        op->ndigests++;
        gw_pointer_pop(&r->at, at);
    }
    gw_pointer_pop(&r->at, mark);
    return 0;
}

static int read_operators(cfg_reader *r, gw_config *cfg, const json_t *operators)
{
    gw_console_config *cc = cfg->console;
    const char *name;
    const json_t *value;
    size_t mark;
    int rc = 0;

    if (!json_is_object(operators) || json_object_size(operators) == 0)
        return cfg_refuse(r, "operators", "is required: an object with at least one operator");
    if ((cc->operators = calloc(json_object_size(operators), sizeof(gw_tenant))) == NULL)
        return cfg_refuse(r, "operators", "out of memory");
    mark = gw_pointer_push(&r->at, "operators");
    json_object_foreach((json_t *)operators, name, value)
    {
        size_t at = gw_pointer_push(&r->at, name);
        gw_tenant *op = &cc->operators[cc->noperators++]; /* freed with the console */

        op->name = name;
        if ((rc = read_operator(r, cfg, op, value)) != 0)
            return rc;
        gw_pointer_pop(&r->at, at);
    }
    gw_pointer_pop(&r->at, mark);
    return 0;
}

static int read_scalars(cfg_reader *r, gw_console_config *cc, const json_t *console)
{
    unsigned long long session = SESSION_DEFAULT_S;
    const json_t *secure = json_object_get(console, "secure_cookie");
    int rc;

    if ((rc = cfg_string(r, console, "dsn", 1, &cc->dsn)) != 0 ||
        (rc = cfg_uint(r, console, "session_s", SESSION_MIN_S, SESSION_MAX_S, &session)) != 0)
        return rc;
    if (secure != NULL && !json_is_boolean(secure))
        return cfg_refuse(r, "secure_cookie", "must be true or false");
    cc->session_s = (unsigned int)session;
    cc->secure_cookie = json_is_true(secure);
    return 0;
}

int cfg_console(cfg_reader *r, gw_config *cfg, const json_t *console)
{
    size_t mark;
    int rc;

    if (console == NULL)
        return 0;
    if ((cfg->console = calloc(1, sizeof(*cfg->console))) == NULL)
        return cfg_refuse(r, "console", "out of memory");
    cfg->console->path = "/console/";
    cfg->console->path_len = strlen(cfg->console->path);
    mark = gw_pointer_push(&r->at, "console");
    if ((rc = cfg_object(r, console, console_members)) != 0 ||
        (rc = read_path(r, cfg->console, console)) != 0 ||
        (rc = read_scalars(r, cfg->console, console)) != 0 ||
        (rc = read_operators(r, cfg, json_object_get(console, "operators"))) != 0)
        return rc;
    gw_pointer_pop(&r->at, mark);
    return 0;
}

const gw_tenant *gw_console_operator_by_digest(const gw_console_config *cc,
                                               const unsigned char *digest)
{
    const gw_tenant *found = NULL;

    /* Every digest is compared, found or not: the time does not tell which matched. */
    for (size_t i = 0; i < cc->noperators; i++) {
        for (size_t k = 0; k < cc->operators[i].ndigests; k++) {
            if (CRYPTO_memcmp(cc->operators[i].digests[k], digest, GW_DIGEST_SIZE) == 0)
                found = &cc->operators[i];
        }
    }
    return found;
}

const gw_tenant *gw_console_operator(const gw_console_config *cc, const char *name)
{
    for (size_t i = 0; i < cc->noperators; i++) {
        if (strcmp(cc->operators[i].name, name) == 0)
            return &cc->operators[i];
    }
    return NULL;
}

void gw_console_config_free(gw_console_config *cc)
{
    if (cc == NULL)
        return;
    for (size_t i = 0; i < cc->noperators; i++)
        free(cc->operators[i].digests);
    free(cc->operators);
    free(cc);
}
