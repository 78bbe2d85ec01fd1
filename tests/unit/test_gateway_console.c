/* The reconciliation console's pieces that need no server (tools/idem-gateway/console_*.c):
 * HTML escaping and URL encoding of data, a posted form's fields, session cookies and CSRF
 * tokens. The pages in a browser are tests/tools/test-gateway-console.sh's. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console_config.h"
#include "console_form.h"
#include "console_html.h"
#include "console_session.h"

static char *html_text(const char *text)
{
    gw_html h = GW_HTML_INIT;
    char *out;

    gw_html_text(&h, text);
    cr_assert(!h.failed);
    out = strdup(h.buf != NULL ? h.buf : "");
    gw_html_free(&h);
    return out;
}

Test(gateway_console, escapes_markup_in_data)
{
    char *out = html_text("<script>alert('x')</script> & \"q\"");

    cr_expect_str_eq(out, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
    free(out);
}

Test(gateway_console, shows_control_characters_as_replacement)
{
    char *out = html_text("a\x01"
                          "b\tc\nd\x1b");

    cr_expect_str_eq(out, "a&#xFFFD;b\tc\nd&#xFFFD;");
    free(out);
}

Test(gateway_console, percent_encodes_query_values)
{
    gw_html h = GW_HTML_INIT;

    gw_html_query(&h, "a b&c=<d>~_.-\"");
    cr_expect_str_eq(h.buf, "a%20b%26c%3D%3Cd%3E~_.-%22");
    gw_html_free(&h);
}

Test(gateway_console, renders_json_strings_escaped_and_null_as_none)
{
    gw_html h = GW_HTML_INIT;
    json_t *doc = json_pack("{s:s, s:n}", "receipt", "{\"t\":\"<b>\"}", "ref");

    gw_html_json(&h, doc);
    cr_expect(strstr(h.buf, "{&quot;t&quot;:&quot;&lt;b&gt;&quot;}") != NULL, "%s", h.buf);
    cr_expect(strstr(h.buf, "<th>ref</th><td><span class=\"none\">none</span>") != NULL, "%s",
              h.buf);
    cr_expect(strstr(h.buf, "<b>") == NULL, "%s", h.buf);
    json_decref(doc);
    gw_html_free(&h);
}

typedef struct form_case {
    char body[80];
    char name[16];
    int absent; /* NULL expected */
    char want[40];
} form_case;

ParameterizedTestParameters(gateway_console, reads_form_fields)
{
    static form_case cases[] = {
        {"note=a+b%21&csrf=x", "note", 0, "a b!"},
        {"note=a+b%21&csrf=x", "csrf", 0, "x"},
        {"notes=1&note=2", "note", 0, "2"},
        {"note=&x=1", "note", 0, ""},
        {"note=%3Cscript%3E", "note", 0, "<script>"},
        {"x=1", "note", 1, ""},
        {"note", "note", 1, ""},
        {"note=%2", "note", 1, ""},
        {"note=%zz", "note", 1, ""},
        {"note=a%00b", "note", 1, ""},
    };

    return cr_make_param_array(form_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(form_case *c, gateway_console, reads_form_fields)
{
    char *v = gw_form_value(c->body, strlen(c->body), c->name);

    if (c->absent)
        cr_expect_null(v, "%s in %s: %s", c->name, c->body, v);
    else {
        cr_assert_not_null(v, "%s in %s", c->name, c->body);
        cr_expect_str_eq(v, c->want);
    }
    free(v);
}

/* One operator, alice, with one token digest. */
static unsigned char digests[1][GW_DIGEST_SIZE];
static gw_tenant operators[1] = {{.name = "alice", .digests = digests, .ndigests = 1}};
static gw_console_config cc = {"/console/", 9, "", 3600, 0, operators, 1};

Test(gateway_console, a_session_names_its_operator_until_it_ends)
{
    char value[GW_CONSOLE_SESSION_SIZE];
    time_t now = time(NULL);

    cr_assert_eq(gw_console_session_make(value, "alice", now + 60), 0);
    cr_expect_eq(gw_console_session_check(&cc, value, now), &operators[0]);
    cr_expect_null(gw_console_session_check(&cc, value, now + 60), "ended");
    cr_expect_null(gw_console_session_check(&cc, NULL, now));
}

Test(gateway_console, a_forged_session_is_none)
{
    char value[GW_CONSOLE_SESSION_SIZE], forged[GW_CONSOLE_SESSION_SIZE + 8];
    time_t now = time(NULL);
    size_t n;

    cr_assert_eq(gw_console_session_make(value, "alice", now + 60), 0);
    /* Another end, the same MAC. */
    n = strcspn(value, ".");
    snprintf(forged, sizeof(forged), "alice.%lld%s", (long long)now + 7200, strrchr(value, '.'));
    cr_expect_null(gw_console_session_check(&cc, forged, now));
    /* One MAC digit changed. */
    strcpy(forged, value);
    forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
    cr_expect_null(gw_console_session_check(&cc, forged, now));
    /* Another operator's name, the same MAC. */
    snprintf(forged, sizeof(forged), "bob%s", value + n);
    cr_expect_null(gw_console_session_check(&cc, forged, now));
    cr_expect_null(gw_console_session_check(&cc, "alice", now));
}

Test(gateway_console, a_session_of_an_operator_removed_is_none)
{
    char value[GW_CONSOLE_SESSION_SIZE];
    time_t now = time(NULL);

    cr_assert_eq(gw_console_session_make(value, "carol", now + 60), 0);
    cr_expect_null(gw_console_session_check(&cc, value, now));
}

Test(gateway_console, the_csrf_token_is_the_sessions_own)
{
    char a[GW_CONSOLE_SESSION_SIZE], b[GW_CONSOLE_SESSION_SIZE], token[GW_CONSOLE_CSRF_SIZE];
    time_t now = time(NULL);

    cr_assert_eq(gw_console_session_make(a, "alice", now + 60), 0);
    cr_assert_eq(gw_console_session_make(b, "alice", now + 61), 0);
    cr_assert_eq(gw_console_csrf(token, a), 0);
    cr_expect_eq(strlen(token), 64);
    cr_expect(gw_console_csrf_ok(a, token));
    cr_expect(!gw_console_csrf_ok(b, token), "another session's token");
    cr_expect(!gw_console_csrf_ok(a, NULL));
    cr_expect(!gw_console_csrf_ok(a, ""));
    token[0] = token[0] == 'a' ? 'b' : 'a';
    cr_expect(!gw_console_csrf_ok(a, token));
}
