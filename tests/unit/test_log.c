/* The library's log helper: every record is one line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static char last[IDEM_ERROR_MESSAGE_MAX];
static int level_seen;

static void keep(void *ctx, int level, const char *message)
{
    level_seen = level;
    snprintf(last, sizeof(last), "%s", message);
}

Test(log, a_server_message_with_newlines_and_tabs_becomes_one_line)
{
    idem__log(keep, NULL, IDEM_LOG_WARNING, "pool: server says: %s",
              "WARNING:  first\nDETAIL:  second\tthird\r\n");
    cr_assert_str_eq(last, "pool: server says: WARNING:  first DETAIL:  second third");
    cr_assert_eq(level_seen, IDEM_LOG_WARNING);
}

Test(log, no_hook_no_call)
{
    last[0] = '\0';
    idem__log(NULL, NULL, IDEM_LOG_INFO, "%s", "nothing");
    cr_assert_str_eq(last, "");
}
