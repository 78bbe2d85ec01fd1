/* The gateway front's judgement of a connection's first request head
 * (tools/idem-gateway/head.c): the request line and the framing headers, from the raw
 * bytes, before libmicrohttpd reads them. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "head.h"

/* Arrays, not pointers: Criterion copies the parameters into the test's process. */
typedef struct head_case {
    char data[160];
    int full;             /* GW_HEAD_OPEN, GW_HEAD_CLOSED or GW_HEAD_LIMIT */
    gw_head_verdict want; /* the verdict */
    unsigned int status;  /* GW_HEAD_REFUSE: the status */
    char type[40];        /* GW_HEAD_REFUSE: the problem type's name */
} head_case;

#define POST "POST /v1/tools/t HTTP/1.1\r\nHost: x\r\n"

ParameterizedTestParameters(gateway_head, judges_the_first_head)
{
    static head_case cases[] = {
        {"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 0, GW_HEAD_PASS, 0, ""},
        {"\r\nGET /healthz HTTP/1.1\nHost: x\n\n", 0, GW_HEAD_PASS, 0, ""},
        {POST "Content-Length: 12\r\n\r\n{\"text\":\"a\"}", 0, GW_HEAD_PASS, 0, ""},
        {POST "Transfer-Encoding: chunked\r\n\r\n", 0, GW_HEAD_PASS, 0, ""},
        {"GET /healthz HTTP/1.0\r\n\r\n", 0, GW_HEAD_PASS, 0, ""},
        {"GET /healthz HTTP/9.9\r\n\r\n", 0, GW_HEAD_REFUSE, 505, "http-version-not-supported"},
        {"GET /healthz HTTP/2.0\r\nHost: x\r\n", 2, GW_HEAD_REFUSE, 505,
         "http-version-not-supported"},
        {POST "no colon\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-header-line"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\n", 0, GW_HEAD_MORE, 0, ""},
        {"GET /heal", 0, GW_HEAD_MORE, 0, ""},
        {"GET /heal", 1, GW_HEAD_PASS, 0, ""}, /* closed: libmicrohttpd reads what there is */
        {"GET /heal", 2, GW_HEAD_REFUSE, 414, "request-line-too-long"},
        {POST "X-Filler: aaaa", 2, GW_HEAD_REFUSE, 431, "headers-too-large"},
        {POST "X-Filler: aaaa", 1, GW_HEAD_PASS, 0, ""},
        {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 0, GW_HEAD_CLOSE, 0, ""},
        {"GARBAGE\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-request-line"},
        {"GET\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-request-line"},
        {"GET /\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-request-line"},
        {"GET / HTTP/1\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-request-line"},
        {"GET / HTTP/1.1 x\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-request-line"},
        {"GET  / HTTP/1.1\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-request-line"},
        {"P\x01ST / HTTP/1.1\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-request-line"},
        {"GARBAGE\r\nHost: x\r\n", 1, GW_HEAD_REFUSE, 400, "invalid-request-line"},
        {POST "Content-Length: 12x\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-framing"},
        {POST "Content-Length: 5, 12\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-framing"},
        {POST "Content-Length: -12\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-framing"},
        {POST "Content-Length: 123456789012345678901234567890\r\n\r\n", 0, GW_HEAD_REFUSE, 400,
         "invalid-framing"},
        {POST "Content-Length: 12\r\ncontent-length: 12\r\n\r\n", 0, GW_HEAD_REFUSE, 400,
         "invalid-framing"},
        {POST "Content-Length: 1\r\n 2\r\n\r\n", 0, GW_HEAD_REFUSE, 400, "invalid-framing"},
        {POST "Transfer-Encoding: gzip\r\n\r\n", 0, GW_HEAD_REFUSE, 501,
         "transfer-encoding-not-implemented"},
    };
    return cr_make_param_array(head_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(head_case *c, gateway_head, judges_the_first_head)
{
    gw_reply r = {0};
    char id[GW_REQUEST_ID_MAX + 1] = "", want[80];
    gw_head_verdict v = gw_head_judge(&r, id, c->data, strlen(c->data), c->full);

    cr_assert_eq(v, c->want, "<%s>: verdict %d, expected %d", c->data, v, c->want);
    if (v != GW_HEAD_REFUSE) {
        cr_assert_eq(r.status, 0, "<%s>: the reply is untouched", c->data);
        return;
    }
    snprintf(want, sizeof(want), "\"type\":\"" GW_PROBLEM_PREFIX "%s\"", c->type);
    cr_assert_eq(r.status, c->status, "<%s>: status %u", c->data, r.status);
    cr_assert_not_null(strstr(r.body, want), "<%s>: %s", c->data, r.body);
    cr_assert_str_eq(r.headers[r.nheaders - 1].value, "close");
    cr_assert_neq(id[0], '\0', "a request ID");
    gw_reply_clear(&r);
}

Test(gateway_head, keeps_a_valid_request_id)
{
    static const char data[] = "GARBAGE\r\nX-Request-Id: req-42\r\n\r\n";
    gw_reply r = {0};
    char id[GW_REQUEST_ID_MAX + 1];

    cr_assert_eq(gw_head_judge(&r, id, data, sizeof(data) - 1, 0), GW_HEAD_REFUSE);
    cr_assert_str_eq(id, "req-42");
    gw_reply_clear(&r);
}
