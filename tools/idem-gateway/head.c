/* The request line and the framing headers of a raw request head. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "framing.h"
#include "head.h"

/* A TLS record of the handshake type starts with this byte: no HTTP method does. */
#define TLS_HANDSHAKE 0x16

/* RFC 9110 section 5.6.2: tchar. */
static int is_tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* The length of the run of bytes of @s that @ok takes. */
static size_t span(const char *s, int (*ok)(unsigned char))
{
    size_t n = 0;

    while (ok((unsigned char)s[n]))
        n++;
    return n;
}

static int is_target_byte(unsigned char ch)
{
    return ch > ' ' && ch != 0x7f;
}

static int is_version(const char *s)
{
    return strncmp(s, "HTTP/", 5) == 0 && s[5] >= '0' && s[5] <= '9' && s[6] == '.' &&
           s[7] >= '0' && s[7] <= '9' && s[8] == '\0';
}

/* Why @line (without its line end) is no request line, or NULL when it is one. */
static const char *line_fault(const char *line)
{
    size_t m = span(line, is_tchar), t;

    if (m == 0)
        return "the method is missing or is not a token";
    if (line[m] != ' ')
        return line[m] == '\0' ? "nothing follows the method; send METHOD SP target SP HTTP/1.1"
                               : "the method is not a token";
    if ((t = span(line + m + 1, is_target_byte)) == 0)
        return "the request target is missing";
    if (line[m + 1 + t] != ' ')
        return line[m + 1 + t] == '\0' ? "the HTTP version is missing"
                                       : "the request target holds a control character";
    if (!is_version(line + m + t + 2))
        return "the HTTP version is not HTTP/DIGIT.DIGIT";
    return NULL;
}

/* Whether the request line @line (sound) asks for HTTP/1.x, the only version served. */
static int is_http1(const char *line)
{
    const char *version = strrchr(line, ' ') + 1;

    return version[5] == '1';
}

/* A refusal of @status with Connection: close. */
static void refuse(gw_reply *r, unsigned int status, const char *type, const char *title,
                   const char *detail)
{
    if (gw_problem(r, status, type, title, detail, NULL) != 0)
        gw_internal_error(r);
    gw_reply_header(r, "Connection", "close");
}

static void refuse_version(gw_reply *r, const char *line)
{
    char detail[256], shown[41];

    snprintf(detail, sizeof(detail),
             "request line \"%s\": the gateway speaks HTTP/1.1 (and 1.0) only",
             gw_printable(shown, sizeof(shown), line));
    refuse(r, 505, "http-version-not-supported", "HTTP version not supported", detail);
}

static void refuse_header_line(gw_reply *r, const char *line)
{
    char detail[256], shown[41];

    snprintf(detail, sizeof(detail), "header line \"%s\" has no colon; send NAME: VALUE",
             gw_printable(shown, sizeof(shown), line));
    refuse(r, 400, "invalid-header-line", "Invalid header line", detail);
}

/* A head not ended within the limit: its request line (414) or its headers (431). */
static void refuse_size(gw_reply *r, int line_in)
{
    if (line_in)
        refuse(r, 431, "headers-too-large", "Request header fields too large",
               "the request line and headers are longer than the gateway takes "
               "(http.max_header_bytes)");
    else
        refuse(r, 414, "request-line-too-long", "URI too long",
               "the request line is longer than the gateway takes (http.max_header_bytes)");
}

static void refuse_line(gw_reply *r, const char *line, const char *why)
{
    char detail[256], shown[41];

    snprintf(detail, sizeof(detail), "request line \"%s\": %s",
             gw_printable(shown, sizeof(shown), line), why);
    refuse(r, 400, "invalid-request-line", "Invalid request line", detail);
}

/* Cut @line's end off ("\r\n" or "\n"); returns the next line. */
static char *cut_line(char *line)
{
    char *end = strchr(line, '\n');

    if (end == NULL)
        return line + strlen(line);
    if (end > line && end[-1] == '\r')
        end[-1] = '\0';
    *end = '\0';
    return end + 1;
}

static char *trim(char *s)
{
    size_t n;

    s += strspn(s, " \t");
    n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* The header lines from @at on into @f (and the X-Request-Id into @xid). A line without
 * a colon: 1, with @bad pointing to it, and @f is incomplete. A folded line on a framing
 * header is unsound: -1. Else 0. */
static int gather(gw_framing *f, const char **xid, const char **bad, char *at)
{
    int framing_last = 0;

    while (*at != '\0') {
        char *line = at, *colon;

        at = cut_line(line);
        if (*line == ' ' || *line == '\t') {
            if (framing_last)
                return -1;
            continue;
        }
        if ((colon = strchr(line, ':')) == NULL) {
            *bad = line;
            return 1;
        }
        *colon = '\0';
        framing_last =
            strcasecmp(line, "Content-Length") == 0 || strcasecmp(line, "Transfer-Encoding") == 0;
        if (strcasecmp(line, "X-Request-Id") == 0 && *xid == NULL)
            *xid = trim(colon + 1);
        gw_framing_add(f, line, trim(colon + 1));
    }
    return 0;
}

static gw_head_verdict refused(gw_reply *r, char id[GW_REQUEST_ID_MAX + 1], gw_reply *mine,
                               const char *xid)
{
    gw_request_id(id, xid);
    *r = *mine;
    return GW_HEAD_REFUSE;
}

/* The whole head (its request line first, its end cut off) in @head, modified. */
static gw_head_verdict judge_head(gw_reply *r, char id[GW_REQUEST_ID_MAX + 1], char *head)
{
    gw_framing f = GW_FRAMING_INIT;
    const char *xid = NULL, *why, *bad = NULL;
    gw_reply mine = {0};
    int gathered = gather(&f, &xid, &bad, cut_line(head));

    if ((why = line_fault(head)) != NULL)
        refuse_line(&mine, head, why);
    else if (!is_http1(head))
        refuse_version(&mine, head);
    else if (gathered > 0)
        refuse_header_line(&mine, bad);
    else if (gathered < 0)
        gw_framing_refuse(&mine, "Content-Length or Transfer-Encoding is folded onto a second "
                                 "line (obs-fold); send each header on one line");
    else if (gw_framing_judge(&mine, &f) == 0)
        return GW_HEAD_PASS;
    return refused(r, id, &mine, xid);
}

/* The head cut short (@full: over the limit, or the client closed): its request line
 * alone, when it is all in; over the limit, refused for its size. */
static gw_head_verdict judge_line(gw_reply *r, char id[GW_REQUEST_ID_MAX + 1], char *text, int full)
{
    int line_in = strchr(text, '\n') != NULL;
    gw_reply mine = {0};
    const char *why = NULL;

    if (line_in)
        cut_line(text);
    if (line_in && (why = line_fault(text)) != NULL)
        refuse_line(&mine, text, why);
    else if (line_in && !is_http1(text))
        refuse_version(&mine, text);
    else if (full == GW_HEAD_LIMIT)
        refuse_size(&mine, line_in);
    else
        return GW_HEAD_PASS; /* the client closed: libmicrohttpd reads what there is */
    return refused(r, id, &mine, NULL);
}

/* Where the head's last line ends (just past its '\n'), or 0 when its empty line is not in. */
static size_t head_end(const char *data, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (data[i] != '\n')
            continue;
        if (data[i + 1] == '\n' || (data[i + 1] == '\r' && i + 2 < len && data[i + 2] == '\n'))
            return i + 1;
    }
    return 0;
}

gw_head_verdict gw_head_judge(gw_reply *r, char id[GW_REQUEST_ID_MAX + 1], const char *data,
                              size_t len, int full)
{
    size_t start = 0, end;
    gw_head_verdict v;
    char *text;
    int whole;

    while (start < len && (data[start] == '\r' || data[start] == '\n'))
        start++; /* empty lines before a request line are allowed (RFC 9112 section 2.2) */
    if (start < len && (unsigned char)data[start] == TLS_HANDSHAKE)
        return GW_HEAD_CLOSE;
    end = head_end(data + start, len - start);
    whole = end != 0;
    if (!whole && !full)
        return GW_HEAD_MORE;
    if (!whole)
        end = len - start;
    if ((text = malloc(end + 1)) == NULL)
        return GW_HEAD_PASS; /* libmicrohttpd reads it as ever */
    memcpy(text, data + start, end);
    text[end] = '\0';
    v = whole ? judge_head(r, id, text) : judge_line(r, id, text, full);
    free(text);
    return v;
}
