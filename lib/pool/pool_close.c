/* Closing the pool's connections: why each is closed, in the log and the statistics
 * (pool_internal.h). */
#include <stdio.h>

#include "conn.h"
#include "error.h"
#include "log.h"
#include "pool_internal.h"

static const char *reason_text(int reason)
{
    switch (reason) {
    case IDEM__CLOSE_LIFETIME:
        return "max_lifetime_ms reached";
    case IDEM__CLOSE_IDLE:
        return "idle_timeout_ms reached";
    case IDEM__CLOSE_HEALTH:
        return "failed the check on checkout";
    case IDEM__CLOSE_ENDED:
        return "the server ended its session while it sat in a transaction";
    default:
        return "broken, discarded or left busy";
    }
}

void idem__pool_close_conn(const idem_pool *pool, idem_conn *conn)
{
    int reason = conn->close_reason;
    int bad =
        reason == IDEM__CLOSE_BROKEN || reason == IDEM__CLOSE_HEALTH || reason == IDEM__CLOSE_ENDED;
    /* For IDEM__CLOSE_ENDED the server's own words went to the log already; libpq's would only
     * add "server closed the connection unexpectedly". */
    char why[IDEM_ERROR_MESSAGE_MAX];

    snprintf(why, sizeof(why), "%s",
             bad && reason != IDEM__CLOSE_ENDED ? PQerrorMessage(conn->pg) : "");
    idem_conninfo_redact(why, sizeof(why), pool->conninfo);
    idem__log(pool->opts.log, pool->opts.log_ctx, bad ? IDEM_LOG_WARNING : IDEM_LOG_DEBUG,
              "pool: closing a connection (%s)%s%s", reason_text(conn->close_reason),
              why[0] != '\0' ? ": " : "", why);
    idem__conn_close(conn);
}

void idem__pool_close_list(const idem_pool *pool, idem_conn *list)
{
    while (list != NULL) {
        idem_conn *next = list->next;

        idem__pool_close_conn(pool, list);
        list = next;
    }
}

void idem__pool_count_close_locked(idem_pool *pool, int reason)
{
    switch (reason) {
    case IDEM__CLOSE_LIFETIME:
        pool->st.closed_lifetime++;
        break;
    case IDEM__CLOSE_IDLE:
        pool->st.closed_idle++;
        break;
    case IDEM__CLOSE_HEALTH:
        pool->st.closed_health++;
        break;
    default:
        pool->st.closed_broken++;
        break;
    }
}
