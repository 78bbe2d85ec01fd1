/* The console's HTML: escaping, URL encoding and JSON as tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_html.h"

const char gw_console_css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}"
    "header{background:#23395d;color:#fff;padding:.6em 1.2em;display:flex;gap:1em;"
    "align-items:center}header h1{font-size:1.1em;margin:0;flex:1}"
    "header form{margin:0}main{padding:1em 1.2em;max-width:80em}"
    "table{border-collapse:collapse;background:#fff;margin:.4em 0 1em}"
    "th,td{border:1px solid #ccd3dc;padding:.25em .5em;text-align:left;vertical-align:top}"
    "th{background:#e8ecf1}td{overflow-wrap:anywhere}"
    "form.filters,form.resolve{background:#fff;border:1px solid #ccd3dc;padding:.6em;"
    "margin:.4em 0 1em;display:flex;flex-wrap:wrap;gap:.6em;align-items:end}"
    "label{display:flex;flex-direction:column;font-size:.9em}"
    "textarea{width:40em;height:5em}.notice{background:#e3f4e1;border:1px solid #8bc34a;"
    "padding:.5em}.error{background:#fbe4e4;border:1px solid #d9534f;padding:.5em}"
    ".open{color:#b35c00;font-weight:600}.none{color:#6b7785}";

static void grow(gw_html *h, size_t more)
{
    size_t cap;
    char *bigger;

    if (h->failed || h->len + more + 1 <= h->cap)
        return;
    cap = h->cap == 0 ? 8192 : h->cap;
    while (cap < h->len + more + 1)
        cap *= 2;
    if ((bigger = realloc(h->buf, cap)) == NULL) {
        h->failed = 1;
        return;
    }
    h->buf = bigger;
    h->cap = cap;
}

static void append(gw_html *h, const char *bytes, size_t n)
{
    grow(h, n);
    if (h->failed)
        return;
    memcpy(h->buf + h->len, bytes, n);
    h->len += n;
    h->buf[h->len] = '\0';
}

void gw_html_raw(gw_html *h, const char *markup)
{
    append(h, markup, strlen(markup));
}

static const char *reference(char ch)
{
    switch (ch) {
    case '&':
        return "&amp;";
    case '<':
        return "&lt;";
    case '>':
        return "&gt;";
    case '"':
        return "&quot;";
    case '\'':
        return "&#39;";
    default:
        return NULL;
    }
}

void gw_html_textn(gw_html *h, const char *text, size_t len)
{
    size_t from = 0;

    for (size_t i = 0; i < len; i++) {
        const char *ref = reference(text[i]);

        /* A NUL or another C0 control (but tab and newlines) is shown as U+FFFD. */
        if (ref == NULL && (unsigned char)text[i] < 0x20 && text[i] != '\t' && text[i] != '\n' &&
            text[i] != '\r')
            ref = "&#xFFFD;";
        if (ref == NULL)
            continue;
        append(h, text + from, i - from);
        gw_html_raw(h, ref);
        from = i + 1;
    }
    append(h, text + from, len - from);
}

void gw_html_text(gw_html *h, const char *text)
{
    gw_html_textn(h, text, strlen(text));
}

void gw_html_int(gw_html *h, long long n)
{
    char buf[24];

    snprintf(buf, sizeof(buf), "%lld", n);
    gw_html_raw(h, buf);
}

void gw_html_query(gw_html *h, const char *value)
{
    static const char digits[] = "0123456789ABCDEF";

    for (const unsigned char *p = (const unsigned char *)value; *p != '\0'; p++) {
        char enc[3] = {'%', digits[*p >> 4], digits[*p & 15]};

        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~')
            append(h, (const char *)p, 1);
        else
            append(h, enc, 3);
    }
}

static void json_object_rows(gw_html *h, const json_t *value)
{
    const char *name;
    const json_t *member;

    gw_html_raw(h, "<table>");
    json_object_foreach((json_t *)value, name, member)
    {
        gw_html_raw(h, "<tr><th>");
        gw_html_text(h, name);
        gw_html_raw(h, "</th><td>");
        gw_html_json(h, member);
        gw_html_raw(h, "</td></tr>");
    }
    gw_html_raw(h, "</table>");
}

static void json_array_rows(gw_html *h, const json_t *value)
{
    size_t i;
    const json_t *element;

    if (json_array_size(value) == 0) {
        gw_html_raw(h, "<span class=\"none\">none</span>");
        return;
    }
    gw_html_raw(h, "<table>");
    json_array_foreach(value, i, element)
    {
        gw_html_raw(h, "<tr><th>");
        gw_html_int(h, (long long)i + 1);
        gw_html_raw(h, "</th><td>");
        gw_html_json(h, element);
        gw_html_raw(h, "</td></tr>");
    }
    gw_html_raw(h, "</table>");
}

void gw_html_json(gw_html *h, const json_t *value)
{
    char *text;

    if (value == NULL || json_is_null(value))
        gw_html_raw(h, "<span class=\"none\">none</span>");
    else if (json_is_object(value))
        json_object_rows(h, value);
    else if (json_is_array(value))
        json_array_rows(h, value);
    else if (json_is_string(value))
        gw_html_textn(h, json_string_value(value), json_string_length(value));
    else if ((text = json_dumps(value, JSON_ENCODE_ANY)) != NULL) {
        gw_html_text(h, text);
        free(text);
    } else
        h->failed = 1;
}

void gw_html_free(gw_html *h)
{
    if (h == NULL)
        return;
    free(h->buf);
    h->buf = NULL;
    h->len = h->cap = 0;
}
