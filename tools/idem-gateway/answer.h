/* One answer per outcome of a tool call, whatever the transport (README.md in this folder,
 * "Statuses" and "MCP: the same tools"): the HTTP API's status, problem type and title and
 * its headers, MCP's isError and the text a model reads, and the next step the manual
 * names. The HTTP adapter (call.c) and the MCP adapter (mcp_result.c, mcp_call.c) choose
 * their answers from this table and from nothing else; `idem-gateway --answers` prints it,
 * and the suite holds the manuals' tables to it (tests/tools/check-answers.py). */
#ifndef IDEM_GATEWAY_ANSWER_H
#define IDEM_GATEWAY_ANSWER_H

#include <jansson.h>
#include <stddef.h>

typedef enum gw_outcome {
    GW_OUTCOME_CREATED = 0,
    GW_OUTCOME_REPLAYED,
    GW_OUTCOME_KEY_MISSING,       /* no operation ID was sent */
    GW_OUTCOME_INVALID_KEY,       /* the operation ID is malformed */
    GW_OUTCOME_INVALID_ARGUMENTS, /* idem's invalid, for the arguments */
    GW_OUTCOME_CONFLICT,
    GW_OUTCOME_IN_PROGRESS,
    GW_OUTCOME_EXPIRED,
    GW_OUTCOME_REJECTED,
    GW_OUTCOME_EFFECT_FAILED,
    GW_OUTCOME_OUTCOME_UNKNOWN,
    GW_OUTCOME_UNAVAILABLE,
    GW_OUTCOME_MISCONFIGURED,
    GW_OUTCOME_ALLOCATED,    /* MCP: an operation ID allocated, nothing ran */
    GW_OUTCOME_RATE_LIMITED, /* the tenant's budget is spent (budget.h), nothing ran */
    GW_OUTCOME_COUNT
} gw_outcome;

typedef struct gw_answer {
    const char *name;    /* the manual's name of the row ("invalid arguments") */
    const char *status;  /* the status word: Idem-Status, structuredContent.status */
    unsigned int http;   /* the HTTP status; for rejected, a sql tool's (an http tool's
                          * answer is the upstream's own) */
    const char *problem; /* the problem type's name; NULL: the answer is the receipt */
    const char *title;   /* the problem's title */
    int retry_after;     /* Retry-After on HTTP, retry_after in structuredContent */
    int replayed;        /* Idempotent-Replayed: true; structuredContent.replayed */
    int is_error;        /* MCP's isError */
    const char *next;    /* what the client does next, as the manual's table says */
    const char *text;    /* what a model reads: a template of gw_answer_text() */
} gw_answer;

/* The row of @o (GW_OUTCOME_COUNT and beyond: unavailable's, the safe default). */
const gw_answer *gw_answer_of(gw_outcome o);

/* What a template's placeholders stand for; NULL members are empty. */
typedef struct gw_answer_vars {
    const char *key;     /* {key}: the operation ID */
    const char *tenant;  /* {tenant} */
    const char *detail;  /* {detail}: the library's or the server's words (1,000 bytes at most) */
    const char *field;   /* {field}: what changed in a conflict */
    const char *receipt; /* {receipt}: the stored receipt (1,500 bytes at most) */
    unsigned int retry;  /* {retry}: seconds before a retry */
    const char *how;     /* {how}: how a model sends a tool's operation ID (mcp.h) */
    const char *channel; /* {channel}: where it goes ("_meta[...]", "the argument ...") */
} gw_answer_vars;

/* @a's text for a model into @out (@size bytes, cut to fit): "[status] " then its template
 * filled in. */
void gw_answer_text(char *out, size_t size, const gw_answer *a, const gw_answer_vars *v);

/* The whole table as JSON (for --answers): an array of objects, a new reference, or NULL
 * when out of memory. */
json_t *gw_answer_table(void);

#endif
