/* idem_conninfo_redact(): a connection string's password never reaches a message. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "idem/idem.h"

/* Arrays, not pointers: Criterion copies the parameters into the test's process. */
typedef struct redact_case {
    char conninfo[64];
    char message[80];
    char expected[80];
} redact_case;

ParameterizedTestParameters(redact, masks_the_password_wherever_it_appears)
{
    static redact_case cases[] = {
        {"host=db password=s3cret junk", "missing \"=\" after \"junk\" near password=s3cret",
         "missing \"=\" after \"junk\" near password=********"},
        {"postgresql://u:s3cret@[::1/db", "in URI: \"postgresql://u:s3cret@[::1/db\"",
         "in URI: \"postgresql://u:********@[::1/db\""},
        {"host=db password='two words' user=u", "password='two words' and two words",
         "password=******** and ********"},
        {"postgresql://u@db/x?password=p%40ss&sslmode=bogus", "URI ?password=p%40ss&sslmode",
         "URI ?password=********&sslmode"},
        {"host=db user=u", "no secret here: u at db", "no secret here: u at db"},
        {"postgresql://u:pw@db/x", "pw pw pw", "******** ******** ********"},
        /* A password holding '/' or '@', which libpq cuts: its pieces come back as a port,
         * a host, a database name. */
        {"postgresql://app:Xk9q+Zr2/@db/pw", "invalid integer value \"Xk9q+Zr2\" for \"port\"",
         "invalid integer value \"********\" for \"port\""},
        {"postgresql://app:Xk9/q+Zr2@db/pw", "port \"Xk9\", database \"q+Zr2@db/pw\"",
         "port \"********\", database \"********@db/pw\""},
        {"postgresql://a:Tr0ub@dor&3@127.0.0.1/x", "host name \"dor&3@127.0.0.1\"",
         "host name \"********@127.0.0.1\""},
        {"postgresql://a:p%2Fss%40w0rd@db/x", "p/ss@w0rd or p%2Fss%40w0rd", "******** or ********"},
        {"postgresql://db/x@y", "no user information: db x@y", "no user information: db x@y"},
    };
    return cr_make_param_array(redact_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(redact_case *c, redact, masks_the_password_wherever_it_appears)
{
    char text[256];

    snprintf(text, sizeof(text), "%s", c->message);
    idem_conninfo_redact(text, sizeof(text), c->conninfo);
    cr_assert_str_eq(text, c->expected);
}

Test(redact, a_message_that_would_grow_past_its_buffer_is_cut_not_overrun)
{
    char text[12] = "pw pw pw pw";

    cr_assert_eq(idem_conninfo_redact(text, sizeof(text), "password=pw"), 2);
    cr_assert_str_eq(text, "******** **");
    cr_assert_eq(idem_conninfo_redact(NULL, 10, "password=x"), 0);
    cr_assert_eq(idem_conninfo_redact(text, sizeof(text), NULL), 0);
}

Test(redact, a_malformed_uri_never_shows_its_password_in_the_pool_error)
{
    idem_pool *pool = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_pool_new(&pool, "postgresql://u:s3cret@[::1/db", NULL, &err), IDEM_EINVAL);
    cr_assert(strstr(err.message, "s3cret") == NULL, "%s", err.message);
    cr_assert(strstr(err.message, "********") != NULL, "%s", err.message);
    cr_assert_null(pool);
}

/* libpq takes what follows a '/' in the password for the port: the pool's message still
 * shows none of it. */
Test(redact, a_uri_password_holding_a_slash_never_shows_in_the_pool_error)
{
    idem_pool *pool = NULL;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool_options opts = IDEM_POOL_OPTIONS_INIT;

    opts.min_idle = 1;
    opts.connect_timeout_ms = 2000;
    cr_assert_neq(idem_pool_new(&pool, "postgresql://app:Xk9q+Zr2/@127.0.0.1/pw", &opts, &err), 0);
    cr_assert(strstr(err.message, "Xk9q") == NULL, "%s", err.message);
    cr_assert_null(pool);
}
