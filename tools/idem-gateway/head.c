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

static void refuse_line(gw_reply *r, const char *line, const char *why)
{
    char detail[256], shown[41];

    snprintf(detail, sizeof(detail), "request line \"%s\": %s",
             gw_printable(shown, sizeof(shown), line), why);
    if (gw_problem(r, 400, "invalid-request-line", "Invalid request line", detail, NULL) != 0)
        gw_internal_error(r);
    gw_reply_header(r, "Connection", "close");
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
 * a colon is libmicrohttpd's to answer: 1, and @f is incomplete. A folded line on a
 * framing header is unsound: -1. Else 0. */
static int gather(gw_framing *f, const char **xid, char *at)
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
        if ((colon = strchr(line, ':')) == NULL)
            return 1;
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
    const char *xid = NULL, *why;
    gw_reply mine = {0};
    int gathered = gather(&f, &xid, cut_line(head));

    if ((why = line_fault(head)) != NULL)
        refuse_line(&mine, head, why);
    else if (gathered < 0)
        gw_framing_refuse(&mine, "Content-Length or Transfer-Encoding is folded onto a second "
                                 "line (obs-fold); send each header on one line");
    else if (gathered > 0 || gw_framing_judge(&mine, &f) == 0)
        return GW_HEAD_PASS;
    return refused(r, id, &mine, xid);
}

/* The head cut short (over the limit, or the client closed): its request line alone, when
 * it is all in. */
static gw_head_verdict judge_line(gw_reply *r, char id[GW_REQUEST_ID_MAX + 1], char *text)
{
    gw_reply mine = {0};
    const char *why;

    if (strchr(text, '\n') == NULL)
        return GW_HEAD_PASS;
    cut_line(text);
    if ((why = line_fault(text)) == NULL)
        return GW_HEAD_PASS;
    refuse_line(&mine, text, why);
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
    v = whole ? judge_head(r, id, text) : judge_line(r, id, text);
    free(text);
    return v;
}
