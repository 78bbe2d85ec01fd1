/* The console's pages. Every datum (tenants, operation IDs, tools, notes, receipts, what a
 * provider answered) is attacker-controlled and goes through gw_html_text(). */
#include <stdio.h>
#include <string.h>

#include "reconcile_text.h"
#include "console_pages.h"

static const char *const kinds[] = {IDEM_RECONCILE_KINDS, NULL};

static void hidden(gw_html *h, const char *name, const char *value)
{
    gw_html_raw(h, "<input type=\"hidden\" name=\"");
    gw_html_raw(h, name);
    gw_html_raw(h, "\" value=\"");
    gw_html_text(h, value);
    gw_html_raw(h, "\">");
}

static void action(gw_html *h, const gw_console_view *v, const char *path)
{
    gw_html_raw(h, " action=\"");
    gw_html_text(h, v->prefix);
    gw_html_raw(h, path);
    gw_html_raw(h, "\"");
}

static void page_begin(gw_html *h, const gw_console_view *v, const char *title)
{
    gw_html_raw(h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<meta name=\"viewport\" content=\"width=device-width\"><title>");
    gw_html_text(h, title);
    gw_html_raw(h, " - idem reconciliation</title><link rel=\"stylesheet\" href=\"");
    gw_html_text(h, v->prefix);
    gw_html_raw(h, "console.css\"></head><body><header><h1>idem reconciliation</h1>");
    if (v->who != NULL && v->csrf != NULL) {
        gw_html_raw(h, "<span>signed in as <b id=\"operator\">");
        gw_html_text(h, v->who);
        gw_html_raw(h, "</b></span><form method=\"post\"");
        action(h, v, "sign-out");
        gw_html_raw(h, ">");
        hidden(h, "csrf", v->csrf);
        gw_html_raw(h, "<button type=\"submit\">Sign out</button></form>");
    }
    gw_html_raw(h, "</header><main><h2>");
    gw_html_text(h, title);
    gw_html_raw(h, "</h2>");
    if (v->notice != NULL) {
        gw_html_raw(h, "<p class=\"notice\" id=\"notice\">");
        gw_html_text(h, v->notice);
        gw_html_raw(h, "</p>");
    }
    if (v->error != NULL) {
        gw_html_raw(h, "<p class=\"error\" id=\"error\">");
        gw_html_text(h, v->error);
        gw_html_raw(h, "</p>");
    }
}

static void page_end(gw_html *h)
{
    gw_html_raw(h, "</main></body></html>\n");
}

void gw_page_sign_in(gw_html *h, const gw_console_view *v)
{
    page_begin(h, v, "Sign in");
    gw_html_raw(h, "<form class=\"filters\" method=\"post\"");
    action(h, v, "sign-in");
    gw_html_raw(h, "><label>Operator token<input type=\"password\" name=\"token\" "
                   "autocomplete=\"off\" required></label>"
                   "<button type=\"submit\">Sign in</button></form>");
    page_end(h);
}

static void option(gw_html *h, const char *value, const char *label, const char *chosen)
{
    gw_html_raw(h, "<option value=\"");
    gw_html_text(h, value);
    gw_html_raw(h, strcmp(value, chosen) == 0 ? "\" selected>" : "\">");
    gw_html_text(h, label);
    gw_html_raw(h, "</option>");
}

static void text_field(gw_html *h, const char *label, const char *name, const char *value,
                       const char *placeholder)
{
    gw_html_raw(h, "<label>");
    gw_html_raw(h, label);
    gw_html_raw(h, "<input type=\"text\" name=\"");
    gw_html_raw(h, name);
    gw_html_raw(h, "\" value=\"");
    gw_html_text(h, value);
    gw_html_raw(h, "\" placeholder=\"");
    gw_html_raw(h, placeholder);
    gw_html_raw(h, "\"></label>");
}

static void filter_form(gw_html *h, const gw_console_view *v, const gw_console_filters *f)
{
    gw_html_raw(h, "<form class=\"filters\" method=\"get\"");
    action(h, v, "");
    gw_html_raw(h, ">");
    text_field(h, "Tenant", "tenant", f->tenant, "every tenant");
    gw_html_raw(h, "<label>Kind<select name=\"kind\">");
    option(h, "", "every kind", f->kind);
    for (size_t i = 0; kinds[i] != NULL; i++)
        option(h, kinds[i], kinds[i], f->kind);
    gw_html_raw(h, "</select></label>");
    text_field(h, "Seen within", "age", f->age, "90m, 24h, 7d");
    gw_html_raw(h, "<label>State<select name=\"state\">");
    option(h, "open", "open", f->state);
    option(h, "resolved", "resolved", f->state);
    option(h, "any", "open and resolved", f->state);
    gw_html_raw(h, "</select></label><button type=\"submit\">Filter</button></form>");
}

static void item_link(gw_html *h, const gw_console_view *v, const idem_reconcile_item *it)
{
    gw_html_raw(h, "<a href=\"");
    gw_html_text(h, v->prefix);
    gw_html_raw(h, "item?tenant=");
    gw_html_query(h, it->tenant);
    gw_html_raw(h, "&amp;operation_id=");
    gw_html_query(h, it->operation_id);
    gw_html_raw(h, "\">");
    gw_html_text(h, it->operation_id);
    gw_html_raw(h, "</a>");
}

static void cell_time(gw_html *h, int64_t us)
{
    char buf[48];

    gw_html_raw(h, "<td>");
    gw_html_text(h, rt_format_time(buf, sizeof(buf), us, 0));
    gw_html_raw(h, "</td>");
}

static void cell_text(gw_html *h, const char *text)
{
    gw_html_raw(h, "<td>");
    gw_html_text(h, text != NULL ? text : "");
    gw_html_raw(h, "</td>");
}

static void item_row(gw_html *h, const gw_console_view *v, const idem_reconcile_item *it)
{
    gw_html_raw(h, "<tr class=\"item\">");
    cell_text(h, it->tenant);
    gw_html_raw(h, "<td>");
    item_link(h, v, it);
    gw_html_raw(h, "</td>");
    cell_text(h, it->kind);
    cell_text(h, it->tool);
    gw_html_raw(h, "<td>");
    gw_html_int(h, it->count);
    gw_html_raw(h, "</td>");
    cell_time(h, it->first_seen);
    cell_time(h, it->last_seen);
    if (it->resolved_at == 0)
        gw_html_raw(h, "<td class=\"open\">open</td>");
    else {
        char buf[48];

        gw_html_raw(h, "<td>");
        gw_html_text(h, rt_format_time(buf, sizeof(buf), it->resolved_at, 0));
        gw_html_raw(h, " by ");
        gw_html_text(h, it->resolved_by != NULL ? it->resolved_by : "");
        gw_html_raw(h, "</td>");
    }
    gw_html_raw(h, "</tr>");
}

void gw_page_list(gw_html *h, const gw_console_view *v, const gw_console_filters *f,
                  const idem_reconcile_items *items)
{
    size_t n = idem_reconcile_items_count(items);

    page_begin(h, v, "Needs attention");
    filter_form(h, v, f);
    if (items != NULL) {
        gw_html_raw(h, "<p id=\"count\">");
        gw_html_int(h, (long long)n);
        gw_html_raw(h, n == 1 ? " item</p>" : " items</p>");
    }
    if (n > 0) {
        gw_html_raw(h, "<table id=\"items\"><tr><th>Tenant</th><th>Operation ID</th><th>Kind</th>"
                       "<th>Tool</th><th>Count</th><th>First seen (UTC)</th>"
                       "<th>Last seen (UTC)</th><th>Resolved</th></tr>");
        for (size_t i = 0; i < n; i++)
            item_row(h, v, idem_reconcile_items_at(items, i));
        gw_html_raw(h, "</table>");
    }
    page_end(h);
}

/* A section: @title and @doc (stolen) as tables. */
static void section(gw_html *h, const char *id, const char *title, json_t *doc)
{
    gw_html_raw(h, "<section id=\"");
    gw_html_raw(h, id);
    gw_html_raw(h, "\"><h3>");
    gw_html_raw(h, title);
    gw_html_raw(h, "</h3>");
    if (doc == NULL)
        h->failed = 1;
    gw_html_json(h, doc);
    gw_html_raw(h, "</section>");
    json_decref(doc);
}

static int has_open(const idem_reconcile_items *items)
{
    for (size_t i = 0; i < idem_reconcile_items_count(items); i++) {
        if (idem_reconcile_items_at(items, i)->resolved_at == 0)
            return 1;
    }
    return 0;
}

static void resolve_form(gw_html *h, const gw_console_view *v, const char *tenant,
                         const char *operation_id)
{
    gw_html_raw(h, "<h3>Resolve</h3><form class=\"resolve\" method=\"post\"");
    action(h, v, "resolve");
    gw_html_raw(h, ">");
    hidden(h, "csrf", v->csrf);
    hidden(h, "tenant", tenant);
    hidden(h, "operation_id", operation_id);
    gw_html_raw(h, "<label>Note (required: what was found or done)<textarea name=\"note\" "
                   "required maxlength=\"4000\"></textarea></label>"
                   "<label>Outcome at the provider<select name=\"as\">");
    option(h, "", "leave the record as it is", "");
    option(h, "completed", "completed (later calls replay a receipt)", "");
    option(h, "failed", "failed (later calls are rejected)", "");
    option(h, "abandoned", "abandoned (later calls are rejected)", "");
    gw_html_raw(h, "</select></label>");
    text_field(h, "Provider's reference", "reference", "", "optional, with an outcome");
    gw_html_raw(h, "<button type=\"submit\">Resolve</button></form>");
}

void gw_page_item(gw_html *h, const gw_console_view *v, const char *tenant,
                  const char *operation_id, const idem_reconcile_key *key,
                  const idem_external_history *history)
{
    const idem_reconcile_items *items = key != NULL ? idem_reconcile_key_items(key) : NULL;

    page_begin(h, v, "Operation");
    gw_html_raw(h, "<p><a href=\"");
    gw_html_text(h, v->prefix);
    gw_html_raw(h, "\">Back to the list</a></p><table id=\"key\"><tr><th>Tenant</th><td>");
    gw_html_text(h, tenant);
    gw_html_raw(h, "</td></tr><tr><th>Operation ID</th><td id=\"operation-id\">");
    gw_html_text(h, operation_id);
    gw_html_raw(h, "</td></tr></table>");
    if (key != NULL) {
        section(h, "record", "Record or tombstone, with its receipt",
                rt_record_json(idem_reconcile_key_record(key)));
        section(h, "items", "Reconciliation items", rt_items_json(items));
        section(h, "external",
                "External operation: downstream key, provider's reference, attempts, "
                "resolvers' answers",
                rt_history_json(history));
    }
    if (has_open(items))
        resolve_form(h, v, tenant, operation_id);
    page_end(h);
}

void gw_page_message(gw_html *h, const gw_console_view *v, const char *title)
{
    page_begin(h, v, title);
    gw_html_raw(h, "<p><a href=\"");
    gw_html_text(h, v->prefix);
    gw_html_raw(h, "\">Back to the list</a></p>");
    page_end(h);
}
