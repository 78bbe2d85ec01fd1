/* The framing headers of a request, all of their values (duplicates included). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "call.h"
#include "framing.h"

void gw_framing_add(gw_framing *f, const char *name, const char *value)
{
    if (strcasecmp(name, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->nlength < 2)
            f->length[f->nlength] = value != NULL ? value : "";
        f->nlength++;
    } else if (strcasecmp(name, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        if (f->nencoding == 0)
            f->encoding = value != NULL ? value : "";
        f->nencoding++;
    }
}

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *name,
                               const char *value)
{
    (void)kind;
    gw_framing_add(cls, name, value);
    return MHD_YES;
}

static int is_length(const char *value)
{
    size_t n = strspn(value, "0123456789");

    return n > 0 && n <= GW_CONTENT_LENGTH_DIGITS_MAX && value[n] == '\0';
}

static int refuse(gw_reply *r, unsigned int status, const char *type, const char *title,
                  const char *detail)
{
    if (gw_problem(r, status, type, title, detail, NULL) != 0)
        gw_internal_error(r);
    gw_reply_header(r, "Connection", "close");
    return -1;
}

int gw_framing_refuse(gw_reply *r, const char *detail)
{
    return refuse(r, 400, "invalid-framing", "Invalid message framing", detail);
}

static int check_encoding(gw_reply *r, const gw_framing *f)
{
    char detail[256], shown[41];

    if (f->nencoding > 1) {
        snprintf(detail, sizeof(detail),
                 "Transfer-Encoding: the header is sent %u times; send it once, as \"chunked\"",
                 f->nencoding);
        return gw_framing_refuse(r, detail);
    }
    if (strcasecmp(f->encoding, "chunked") != 0) {
        snprintf(detail, sizeof(detail),
                 "Transfer-Encoding: \"%s\" is not implemented; the gateway reads a body sent "
                 "with Content-Length or with Transfer-Encoding: chunked alone",
                 gw_printable(shown, sizeof(shown), f->encoding));
        return refuse(r, 501, "transfer-encoding-not-implemented",
                      "Transfer-Encoding not implemented", detail);
    }
    if (f->nlength > 0)
        return gw_framing_refuse(
            r, "Transfer-Encoding and Content-Length are both sent; a body is framed "
               "by one of them: send one");
    return 0;
}

static int check_length(gw_reply *r, const gw_framing *f)
{
    char detail[256], first[41], second[41];

    if (f->nlength > 1) {
        snprintf(detail, sizeof(detail),
                 "Content-Length: the header is sent %u times (\"%s\", \"%s\"); send it once",
                 f->nlength, gw_printable(first, sizeof(first), f->length[0]),
                 gw_printable(second, sizeof(second), f->length[1]));
        return gw_framing_refuse(r, detail);
    }
    if (!is_length(f->length[0])) {
        snprintf(detail, sizeof(detail),
                 "Content-Length: \"%s\" is not a length; send 1 to %d digits, nothing else",
                 gw_printable(first, sizeof(first), f->length[0]), GW_CONTENT_LENGTH_DIGITS_MAX);
        return gw_framing_refuse(r, detail);
    }
    return 0;
}

int gw_framing_judge(gw_reply *r, const gw_framing *f)
{
    if (f->nencoding > 0)
        return check_encoding(r, f);
    if (f->nlength > 0)
        return check_length(r, f);
    return 0;
}

int gw_framing_check(gw_reply *r, struct MHD_Connection *c)
{
    gw_framing f = GW_FRAMING_INIT;

    MHD_get_connection_values(c, MHD_HEADER_KIND, collect, &f);
    return gw_framing_judge(r, &f);
}
