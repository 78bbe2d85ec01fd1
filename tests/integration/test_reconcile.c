/* Reconciliation items: recording (as the store does), listing, showing and resolving. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "idem/sys/reconcile.h"
#include "pgtest.h"
#include "reconcile_internal.h"
#include "records.h"

static char *conninfo;
static PGconn *conn;

static void open_db(void)
{
    conninfo = pgtest_new_migrated_database("reconcile");
    conn = pgtest_connect(conninfo);
}

static void close_db(void)
{
    PQfinish(conn);
    free(conninfo);
}

TestSuite(reconcile, .init = open_db, .fini = close_db, .timeout = 120);

static idem_reconcile_items *list(const idem_reconcile_filter *filter)
{
    idem_reconcile_items *items = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_reconcile_list(&items, conn, filter, &err), 0, "%s", err.message);
    return items;
}

static size_t count(const idem_reconcile_filter *filter)
{
    idem_reconcile_items *items = list(filter);
    size_t n = idem_reconcile_items_count(items);

    idem_reconcile_items_free(items);
    return n;
}

/* Record one late request through the store's own statement, on a pooled connection. */
static void record(const char *tenant, const char *op, const char *args, int matches)
{
    idem_pool *pool = NULL;
    idem_conn *pc = NULL;
    idem_fingerprint fp;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_fingerprint_compute_text(&fp, "t", 1, args, strlen(args), NULL, &err), 0);
    cr_assert_eq(idem_pool_new(&pool, conninfo, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_pool_acquire(&pc, pool, &err), 0, "%s", err.message);
    cr_assert_eq(
        idem__reconcile_record(pc, tenant, op, IDEM__RECONCILE_EXPIRED, "t", &fp, matches, &err), 0,
        "%s", err.message);
    idem_pool_release(pc);
    idem_pool_free(pool);
}

/* idem_reconcile_resolve_items() with the resolution's members as arguments. */
static int resolve(unsigned int *out, PGconn *c, const char *tenant, const char *op,
                   const char *kind, const char *note, const char *by, idem_error *err)
{
    idem_reconcile_resolution r = IDEM_RECONCILE_RESOLUTION_INIT;

    r.kind = kind;
    r.note = note;
    r.by = by;
    return idem_reconcile_resolve_items(out, c, tenant, op, &r, err);
}

Test(reconcile, list_returns_items_newest_first_and_honours_every_filter)
{
    idem_reconcile_filter f = IDEM_RECONCILE_FILTER_INIT;
    idem_reconcile_items *items;

    records_insert_item(conn, "acme", "op-old", "expired", 1, "-3 days");
    records_insert_item(conn, "acme", "op-new", "expired", 4, "-1 minute");
    records_insert_item(conn, "acme", "op-new", "outcome_unknown", 1, "-2 hours");
    records_insert_item(conn, "globex", "op-new", "expired", 2, "-1 hour");
    PQclear(pgtest_exec(conn, "UPDATE idem.reconciliation_items SET resolved_at = now(),"
                              " resolved_by = 'ops', note = 'done' WHERE operation_id = 'op-old'"));

    items = list(NULL);
    cr_assert_eq(idem_reconcile_items_count(items), 4);
    cr_assert_str_eq(idem_reconcile_items_at(items, 0)->operation_id, "op-new");
    cr_assert_str_eq(idem_reconcile_items_at(items, 0)->tenant, "acme");
    cr_assert_eq(idem_reconcile_items_at(items, 0)->count, 4);
    cr_assert_eq(idem_reconcile_items_at(items, 0)->fingerprint_matches, 1);
    cr_assert_eq(idem_reconcile_items_at(items, 0)->resolved_at, 0);
    cr_assert_null(idem_reconcile_items_at(items, 0)->resolved_by);
    cr_assert_str_eq(idem_reconcile_items_at(items, 1)->tenant, "globex");
    cr_assert_str_eq(idem_reconcile_items_at(items, 3)->operation_id, "op-old");
    cr_assert_str_eq(idem_reconcile_items_at(items, 3)->note, "done");
    cr_assert_str_eq(idem_reconcile_items_at(items, 3)->resolved_by, "ops");
    cr_assert_gt(idem_reconcile_items_at(items, 3)->resolved_at, 0);
    cr_assert_null(idem_reconcile_items_at(items, 4));
    idem_reconcile_items_free(items);

    f.tenant = "globex";
    cr_assert_eq(count(&f), 1, "the tenant filter is honoured");
    f.tenant = "acme";
    cr_assert_eq(count(&f), 3);
    f.kind = "expired";
    cr_assert_eq(count(&f), 2);
    f.state = IDEM_RECONCILE_OPEN;
    cr_assert_eq(count(&f), 1);
    f.state = IDEM_RECONCILE_RESOLVED;
    cr_assert_eq(count(&f), 1);
    f = (idem_reconcile_filter)IDEM_RECONCILE_FILTER_INIT;
    f.since = (int64_t)pgtest_scalar(conn, "SELECT (extract(epoch FROM now() - interval '90 "
                                           "minutes') * 1000000)::int8");
    cr_assert_eq(count(&f), 2, "last seen within 90 minutes");
    f.since = 0;
    f.operation_id = "op-new";
    cr_assert_eq(count(&f), 3);
    f.operation_id = NULL;
    f.limit = 2;
    cr_assert_eq(count(&f), 2);
    f.tenant = "initech";
    f.limit = 0;
    cr_assert_eq(count(&f), 0, "an empty list is no error");
}

Test(reconcile, repeated_late_retry_raises_the_count_and_reopens_the_item)
{
    idem_reconcile_items *items;
    idem_error err = IDEM_ERROR_INIT;

    record("acme", "op-1", "{\"a\":1}", 1);
    record("acme", "op-1", "{\"a\":1}", 1);
    cr_assert_eq(resolve(NULL, conn, "acme", "op-1", NULL, "told the customer", NULL, &err), 0,
                 "%s", err.message);
    record("acme", "op-1", "{\"a\":2}", 0);
    items = list(NULL);
    cr_assert_eq(idem_reconcile_items_count(items), 1);
    const idem_reconcile_item *it = idem_reconcile_items_at(items, 0);
    cr_assert_eq(it->count, 3);
    cr_assert_str_eq(it->kind, "expired");
    cr_assert_eq(it->fingerprint_matches, 0, "the latest request changed its arguments");
    cr_assert_eq(it->resolved_at, 0, "reopened");
    cr_assert_null(it->resolved_by);
    cr_assert_str_eq(it->note, "told the customer", "the note is kept");
    cr_assert_geq(it->last_seen, it->first_seen);
    idem_reconcile_items_free(items);
}

Test(reconcile, unknown_match_keeps_the_verdict_of_the_same_request_only)
{
    idem_reconcile_items *items;

    record("acme", "op-1", "{\"a\":1}", 1);
    record("acme", "op-1", "{\"a\":1}", -1); /* the same request, after the tombstone went */
    items = list(NULL);
    cr_assert_eq(idem_reconcile_items_at(items, 0)->fingerprint_matches, 1);
    idem_reconcile_items_free(items);
    record("acme", "op-1", "{\"a\":9}", -1); /* another request: nothing to compare with */
    items = list(NULL);
    cr_assert_eq(idem_reconcile_items_at(items, 0)->fingerprint_matches, -1);
    cr_assert_eq(idem_reconcile_items_at(items, 0)->count, 3);
    idem_reconcile_items_free(items);
}

Test(reconcile, show_returns_the_tombstone_and_every_item_of_the_key)
{
    idem_reconcile_key *key = NULL;
    idem_error err = IDEM_ERROR_INIT;

    records_insert(conn, "acme", "op-", 1, 2, "expired", "+1 day", "+1 day");
    records_insert(conn, "acme", "live-", 1, 2, "completed", "+1 day", "+2 days");
    records_insert_item(conn, "acme", "op-1", "expired", 2, "-1 minute");
    records_insert_item(conn, "acme", "op-1", "outcome_unknown", 1, "-2 minutes");
    records_insert_item(conn, "globex", "op-1", "expired", 1, "-1 minute");

    cr_assert_eq(idem_reconcile_show(&key, conn, "acme", "op-1", &err), 0, "%s", err.message);
    const idem_reconcile_record *rec = idem_reconcile_key_record(key);
    cr_assert_not_null(rec);
    cr_assert_str_eq(rec->state, "expired");
    cr_assert_str_eq(rec->tool, "t");
    cr_assert_null(rec->receipt);
    cr_assert_null(rec->trace_id);
    cr_assert_gt(rec->expired_at, 0);
    cr_assert_gt(rec->forget_at, 0);
    cr_assert_eq(strlen(rec->fingerprint), 64);
    cr_assert_eq(idem_reconcile_items_count(idem_reconcile_key_items(key)), 2,
                 "only this tenant's items");
    idem_reconcile_key_free(key);

    cr_assert_eq(idem_reconcile_show(&key, conn, "acme", "live-1", &err), 0, "%s", err.message);
    rec = idem_reconcile_key_record(key);
    cr_assert_str_eq(rec->state, "completed");
    cr_assert_eq(rec->receipt_len, strlen("{\"n\":1}"));
    cr_assert_str_eq(rec->receipt, "{\"n\":1}");
    cr_assert_str_eq(rec->trace_id, "trace-1");
    cr_assert_eq(rec->expired_at, 0);
    cr_assert_eq(idem_reconcile_items_count(idem_reconcile_key_items(key)), 0);
    idem_reconcile_key_free(key);
}

Test(reconcile, show_of_a_forgotten_key_has_its_items_and_no_record)
{
    idem_reconcile_key *key = NULL;
    idem_error err = IDEM_ERROR_INIT;

    records_insert_item(conn, "acme", "gone", "expired", 1, "-1 minute");
    cr_assert_eq(idem_reconcile_show(&key, conn, "acme", "gone", &err), 0, "%s", err.message);
    cr_assert_null(idem_reconcile_key_record(key));
    cr_assert_eq(idem_reconcile_items_count(idem_reconcile_key_items(key)), 1);
    idem_reconcile_key_free(key);
    key = NULL;
    cr_assert_eq(idem_reconcile_show(&key, conn, "acme", "never", &err), IDEM_ENOTFOUND);
    cr_assert_null(key);
    cr_assert_eq(idem_reconcile_show(&key, conn, "globex", "gone", &err), IDEM_ENOTFOUND,
                 "another tenant's key is another key");
}

Test(reconcile, resolve_records_the_note_who_and_when)
{
    idem_reconcile_items *items;
    idem_error err = IDEM_ERROR_INIT;
    unsigned int n = 0;

    records_insert_item(conn, "acme", "op-1", "expired", 1, "-1 minute");
    records_insert_item(conn, "acme", "op-1", "outcome_unknown", 1, "-2 minutes");
    records_insert_item(conn, "acme", "op-2", "expired", 1, "-1 minute");
    cr_assert_eq(resolve(&n, conn, "acme", "op-1", "expired", "refunded", NULL, &err), 0, "%s",
                 err.message);
    cr_assert_eq(n, 1);
    cr_assert_eq(resolve(&n, conn, "acme", "op-1", NULL, "checked with the provider:\nno charge",
                         "Alice Ops", &err),
                 0, "%s", err.message);
    cr_assert_eq(n, 1, "only the item still open");
    items = list(NULL);
    for (size_t i = 0; i < idem_reconcile_items_count(items); i++) {
        const idem_reconcile_item *it = idem_reconcile_items_at(items, i);
        if (strcmp(it->operation_id, "op-2") == 0) {
            cr_assert_eq(it->resolved_at, 0, "another key is untouched");
        } else if (strcmp(it->kind, "expired") == 0) {
            cr_assert_str_eq(it->note, "refunded");
            cr_assert_str_eq(it->resolved_by, PQuser(conn), "current_user by default");
        } else {
            cr_assert_str_eq(it->resolved_by, "Alice Ops");
            cr_assert_str_eq(it->note, "checked with the provider:\nno charge");
        }
    }
    idem_reconcile_items_free(items);
    n = 77;
    cr_assert_eq(resolve(&n, conn, "acme", "op-1", NULL, "again", NULL, &err), IDEM_ENOTFOUND);
    cr_assert(strstr(err.message, "already resolved") != NULL, "%s", err.message);
    cr_assert_eq(n, 77, "out is untouched on failure");
    cr_assert_eq(resolve(&n, conn, "globex", "op-1", NULL, "x", NULL, &err), IDEM_ENOTFOUND);
    cr_assert(strstr(err.message, "already") == NULL, "%s", err.message);
}

struct bad_resolve {
    const char *tenant, *op, *kind, *note, *by, *field;
};

Test(reconcile, bad_input_names_the_field_and_changes_nothing)
{
    static char long_note[IDEM_RECONCILE_NOTE_MAX + 2], long_by[IDEM_RECONCILE_BY_MAX + 2];
    memset(long_note, 'n', IDEM_RECONCILE_NOTE_MAX + 1);
    memset(long_by, 'b', IDEM_RECONCILE_BY_MAX + 1);
    const struct bad_resolve cases[] = {
        {NULL, "op", NULL, "n", NULL, "tenant"},
        {"acme corp", "op", NULL, "n", NULL, "tenant"},
        {"acme", "", NULL, "n", NULL, "operation_id"},
        {"acme", "op id", NULL, "n", NULL, "operation_id"},
        {"acme", "op", "Expired", "n", NULL, "resolution.kind"},
        {"acme", "op", "", "n", NULL, "resolution.kind"},
        {"acme", "op", "nonsense", "n", NULL, "resolution.kind"},
        {"acme", "op", NULL, NULL, NULL, "resolution.note"},
        {"acme", "op", NULL, "", NULL, "resolution.note"},
        {"acme", "op", NULL, long_note, NULL, "resolution.note"},
        {"acme", "op", NULL, "bad \xff byte", NULL, "resolution.note"},
        {"acme", "op", NULL, "bell\a", NULL, "resolution.note"},
        {"acme", "op", NULL, "n", "", "resolution.by"},
        {"acme", "op", NULL, "n", "two\nlines", "resolution.by"},
        {"acme", "op", NULL, "n", long_by, "resolution.by"},
    };
    idem_reconcile_filter f;
    idem_reconcile_items *items = NULL;
    idem_reconcile_key *key = NULL;
    idem_error err = IDEM_ERROR_INIT;
    char *before;

    records_insert_item(conn, "acme", "op", "expired", 1, "-1 minute");
    before = records_digest(conn);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_resolve *c = &cases[i];
        cr_assert_eq(resolve(NULL, conn, c->tenant, c->op, c->kind, c->note, c->by, &err),
                     IDEM_EINVAL, "case %zu", i);
        cr_assert_str_eq(err.field, c->field, "case %zu: %s", i, err.message);
        cr_assert(strstr(err.message, c->field) != NULL, "%s", err.message);
    }
    char *after = records_digest(conn);
    cr_assert_str_eq(before, after);
    free(before);
    free(after);

    f = (idem_reconcile_filter)IDEM_RECONCILE_FILTER_INIT;
    f.version = 2;
    cr_assert_eq(idem_reconcile_list(&items, conn, &f, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "filter.version");
    f = (idem_reconcile_filter)IDEM_RECONCILE_FILTER_INIT;
    f.tenant = "a b";
    cr_assert_eq(idem_reconcile_list(&items, conn, &f, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "filter.tenant");
    f = (idem_reconcile_filter)IDEM_RECONCILE_FILTER_INIT;
    f.operation_id = "";
    cr_assert_eq(idem_reconcile_list(&items, conn, &f, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "filter.operation_id");
    f = (idem_reconcile_filter)IDEM_RECONCILE_FILTER_INIT;
    f.kind = "no-dash";
    cr_assert_eq(idem_reconcile_list(&items, conn, &f, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "filter.kind");
    f.kind = "nonsense"; /* well formed, but no kind idem records */
    cr_assert_eq(idem_reconcile_list(&items, conn, &f, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "filter.kind");
    cr_assert(strstr(err.message, "outbox_exhausted") != NULL, "%s", err.message);
    f = (idem_reconcile_filter)IDEM_RECONCILE_FILTER_INIT;
    f = (idem_reconcile_filter)IDEM_RECONCILE_FILTER_INIT;
    f.state = (idem_reconcile_state)7;
    cr_assert_eq(idem_reconcile_list(&items, conn, &f, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "filter.state");
    f = (idem_reconcile_filter)IDEM_RECONCILE_FILTER_INIT;
    f.since = -1;
    cr_assert_eq(idem_reconcile_list(&items, conn, &f, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "filter.since");
    cr_assert_eq(idem_reconcile_list(NULL, conn, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out");
    cr_assert_eq(idem_reconcile_list(&items, NULL, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "conn");
    cr_assert_null(items);

    cr_assert_eq(idem_reconcile_show(&key, conn, "", "op", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
    cr_assert_eq(idem_reconcile_show(&key, conn, "acme", NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "operation_id");
    cr_assert_eq(idem_reconcile_show(NULL, conn, "acme", "op", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out");
    PQclear(pgtest_exec(conn, "BEGIN"));
    cr_assert_eq(idem_reconcile_show(&key, conn, "acme", "op", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "conn");
    PQclear(pgtest_exec(conn, "ROLLBACK"));
    cr_assert_null(key);
    idem_reconcile_items_free(NULL);
    idem_reconcile_key_free(NULL);
    cr_assert_eq(idem_reconcile_items_count(NULL), 0);
    cr_assert_null(idem_reconcile_key_record(NULL));
}

Test(reconcile, filter_init_gives_the_defaults_and_refuses_unknown_versions)
{
    idem_reconcile_filter f;

    memset(&f, 0xff, sizeof(f));
    cr_assert_eq(idem_reconcile_filter_init(&f, IDEM_RECONCILE_FILTER_VERSION), 0);
    cr_assert_eq(f.version, IDEM_RECONCILE_FILTER_VERSION);
    cr_assert(f.tenant == NULL && f.operation_id == NULL && f.kind == NULL);
    cr_assert_eq(f.state, IDEM_RECONCILE_ANY);
    cr_assert_eq(f.since, 0);
    cr_assert_eq(f.limit, 1000);
    cr_assert_eq(idem_reconcile_filter_init(&f, 0), IDEM_EINVAL);
    cr_assert_eq(idem_reconcile_filter_init(&f, IDEM_RECONCILE_FILTER_VERSION + 1), IDEM_EINVAL);
    cr_assert_eq(idem_reconcile_filter_init(NULL, 1), IDEM_EINVAL);
}

Test(reconcile, resolution_init_gives_the_defaults_and_refuses_unknown_versions)
{
    idem_reconcile_resolution r;

    memset(&r, 0xff, sizeof(r));
    cr_assert_eq(idem_reconcile_resolution_init(&r, IDEM_RECONCILE_RESOLUTION_VERSION), 0);
    cr_assert_eq(r.version, IDEM_RECONCILE_RESOLUTION_VERSION);
    cr_assert(r.kind == NULL && r.note == NULL && r.by == NULL);
    cr_assert_eq(idem_reconcile_resolution_init(&r, 0), IDEM_EINVAL);
    cr_assert_eq(idem_reconcile_resolution_init(&r, IDEM_RECONCILE_RESOLUTION_VERSION + 1),
                 IDEM_EINVAL);
    cr_assert_eq(idem_reconcile_resolution_init(NULL, 1), IDEM_EINVAL);
}

Test(reconcile, resolve_items_refuses_a_missing_or_unknown_resolution_and_changes_nothing)
{
    idem_reconcile_resolution r = IDEM_RECONCILE_RESOLUTION_INIT;
    idem_error err = IDEM_ERROR_INIT;
    unsigned int n = 77;
    char *before, *after;

    records_insert_item(conn, "acme", "op", "expired", 1, "-1 minute");
    before = records_digest(conn);
    cr_assert_eq(idem_reconcile_resolve_items(&n, conn, "acme", "op", NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolution", "%s", err.message);
    r.note = "n";
    r.version = 0;
    cr_assert_eq(idem_reconcile_resolve_items(&n, conn, "acme", "op", &r, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolution.version", "%s", err.message);
    r.version = IDEM_RECONCILE_RESOLUTION_VERSION + 1;
    cr_assert_eq(idem_reconcile_resolve_items(&n, conn, "acme", "op", &r, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolution.version", "%s", err.message);
    after = records_digest(conn);
    cr_assert_str_eq(before, after);
    cr_assert_eq(n, 77, "out is untouched on failure");
    free(before);
    free(after);
}
