/* HTML built in a growing buffer for the console's pages. Every datum goes through
 * gw_html_text() (escaped: & < > " ' as character references) or gw_html_query() (percent-
 * encoded); gw_html_raw() is for the pages' own markup, string literals only. */
#ifndef IDEM_GATEWAY_CONSOLE_HTML_H
#define IDEM_GATEWAY_CONSOLE_HTML_H

#include <jansson.h>
#include <stddef.h>

typedef struct gw_html {
    char *buf; /* owned; NUL-terminated while not failed */
    size_t len, cap;
    int failed; /* out of memory: the page is lost, every later append does nothing */
} gw_html;

#define GW_HTML_INIT                                                                               \
    {                                                                                              \
        NULL, 0, 0, 0                                                                              \
    }

/* The stylesheet served at the console's prefix + "console.css" (style-src 'self'). */
extern const char gw_console_css[];

void gw_html_raw(gw_html *h, const char *markup);
/* @text escaped for an element's content or a quoted attribute's value. */
void gw_html_text(gw_html *h, const char *text);
void gw_html_textn(gw_html *h, const char *text, size_t len);
/* A whole number. */
void gw_html_int(gw_html *h, long long n);
/* @value percent-encoded for a URL's query (every byte but A-Z a-z 0-9 - _ . ~). */
void gw_html_query(gw_html *h, const char *value);
/* @value (borrowed) as nested tables: an object's members as rows of name and value, an
 * array's elements as numbered rows, a string as escaped text (a JSON text inside it, such
 * as a receipt, shown as it is stored), null as "none". */
void gw_html_json(gw_html *h, const json_t *value);

/* Free the buffer; NULL is accepted. */
void gw_html_free(gw_html *h);

#endif
