/* gateway-answers: the gateway's answer table (tools/idem-gateway/answer.h) as JSON on
 * standard output, for check-answers.py to hold the manuals' tables to. */
#include <stdio.h>
#include <stdlib.h>

#include "answer.h"

int main(void)
{
    json_t *table = gw_answer_table();
    char *text = table != NULL ? json_dumps(table, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;

    json_decref(table);
    if (text == NULL) {
        fputs("gateway-answers: out of memory\n", stderr);
        return 1;
    }
    puts(text);
    free(text);
    return 0;
}
