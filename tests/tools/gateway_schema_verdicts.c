/* gateway-schema-verdicts < CORPUS: the gateway's verdict on each line of CORPUS
 * ({"schema", "instance"}; tests/tools/ajv/corpus.py), one per line: "valid", "invalid", or
 * "refused" for a schema outside the subset. The schema is read as the configuration file
 * is (jansson), the instance as the gateway reads a call's arguments (idem_json_parse()). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idem/idem.h>
#include <jansson.h>

#include "schema.h"

static const char *verdict(const json_t *pair)
{
    const json_t *schema = json_object_get(pair, "schema");
    idem_error err = IDEM_ERROR_INIT;
    json_t *instance = NULL;
    gw_pointer at;
    char why[512], *text = json_dumps(json_object_get(pair, "instance"), JSON_ENCODE_ANY);
    const char *says = "refused";

    gw_pointer_init(&at);
    if (text != NULL && gw_schema_check(schema, &at, why, sizeof(why)) == 0 &&
        idem_json_parse(&instance, text, strlen(text), NULL, &err) == 0) {
        gw_pointer_init(&at);
        says =
            gw_schema_validate(schema, instance, &at, why, sizeof(why)) == 0 ? "valid" : "invalid";
    }
    json_decref(instance);
    free(text);
    return says;
}

int main(void)
{
    char line[65536];

    while (fgets(line, sizeof(line), stdin) != NULL) {
        json_error_t jerr;
        json_t *pair = json_loads(line, 0, &jerr);

        if (pair == NULL) {
            fprintf(stderr, "line %d: %s\n", jerr.line, jerr.text);
            return 1;
        }
        puts(verdict(pair));
        json_decref(pair);
    }
    return 0;
}
