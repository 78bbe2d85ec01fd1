/* Tools' identity policies (include/idem/identity.h): checked once, when the store is
 * made; applied to each call of a tool that has one (the projection it fingerprints, the
 * digests its record keeps); read again only for a conflict. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "identity.h"
#include "idem/validate.h"
#include "json_pointer.h"

int idem_tool_identity_init(idem_tool_identity *identity, unsigned int version)
{
    static const idem_tool_identity defaults = IDEM_TOOL_IDENTITY_INIT;

    return idem__struct_init(identity, &defaults, sizeof(defaults), version,
                             IDEM_TOOL_IDENTITY_VERSION);
}

const char *idem_identity_mode_name(idem_identity_mode mode)
{
    switch (mode) {
    case IDEM_IDENTITY_ALL:
        return "all";
    case IDEM_IDENTITY_ONLY:
        return "only";
    case IDEM_IDENTITY_EXCEPT:
        return "except";
    }
    return "unknown";
}

/* The token of @s (of @len bytes) that starts after the '/' at *at, unescaped into @out
 * (at least @len + 1 bytes); *at moves to the next '/' or @len. Returns the token's length. */
static size_t token_at(const char *s, size_t len, size_t *at, char *out)
{
    size_t i = *at + 1, n = 0;

    while (i < len && s[i] != '/') {
        if (s[i] == '~' && i + 1 < len) {
            out[n++] = s[i + 1] == '1' ? '/' : '~';
            i += 2;
        } else {
            out[n++] = s[i++];
        }
    }
    *at = i;
    return n;
}

int idem__identity_compare(const char *a, size_t a_len, const char *b, size_t b_len)
{
    char *ta = malloc(a_len + 1), *tb = malloc(b_len + 1);
    size_t ia = 0, ib = 0;
    int c = 0;

    if (ta == NULL || tb == NULL) { /* an order all the same: the bytes' */
        c = memcmp(a, b, a_len < b_len ? a_len : b_len);
        c = c != 0 ? c : (a_len > b_len) - (a_len < b_len);
    }
    while (ta != NULL && tb != NULL && c == 0 && (ia < a_len || ib < b_len)) {
        if (ia >= a_len || ib >= b_len) { /* a path before the paths below it */
            c = ia >= a_len ? -1 : 1;
            break;
        }
        size_t na = token_at(a, a_len, &ia, ta), nb = token_at(b, b_len, &ib, tb);
        c = idem__jcs_key_compare(ta, na, tb, nb);
    }
    free(ta);
    free(tb);
    return c;
}

static int by_member_order(const void *a, const void *b)
{
    const char *pa = *(char *const *)a, *pb = *(char *const *)b;

    return idem__identity_compare(pa, strlen(pa), pb, strlen(pb));
}

/* Whether pointer @a's path is @b's or above it ("/order" and "/order/id"). */
static int contains(const char *a, const char *b)
{
    size_t n = strlen(a);

    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* One pointer of a policy: a JSON Pointer to an object member, never into an array.
 * Returns NULL, or (static) why not. */
static const char *refuse_pointer(const char *pointer)
{
    const char *why = NULL, *p = pointer;
    char *token = NULL;

    if (pointer == NULL)
        return "is NULL";
    if (pointer[0] == '\0')
        return "is the empty pointer, the whole arguments: that is mode all";
    if (idem__json_pointer_check(pointer, &why) != 0)
        return why;
    if ((token = malloc(strlen(pointer) + 1)) == NULL)
        return "out of memory";
    while (why == NULL && *p == '/') {
        p = idem__json_pointer_token(p + 1, token);
        if (strcmp(token, "-") == 0 ||
            (token[0] >= '0' && token[0] <= '9' && (token[0] != '0' || token[1] == '\0') &&
             strspn(token, "0123456789") == strlen(token)))
            why = "goes into an array (a token \"-\" or an index): a field is an object "
                  "member, and an array is a field as a whole";
    }
    free(token);
    return why;
}

/* The field @member of the policy at @prefix ("options.identities[2]", or "" for a
 * policy checked alone): idem__error_field() keeps what fits. */
#define FIELD_NAME_MAX 96
static void field_name(char out[FIELD_NAME_MAX], const char *prefix, const char *member)
{
    snprintf(out, FIELD_NAME_MAX, "%s%s%s", prefix, prefix[0] != '\0' ? "." : "", member);
}

/* The mode and the count of fields, before anything is copied. */
static int check_shape(const idem_tool_identity *in, const char *at, idem_error *err)
{
    char field[FIELD_NAME_MAX];
    int rc;

    field_name(field, at, "tool");
    if ((rc = idem_validate_tool(in->tool, err)) != 0) {
        idem__error_context(err, "%s", field);
        if (err != NULL) { /* as much of the name as fits */
            size_t n = strnlen(field, sizeof(err->field) - 1);

            memcpy(err->field, field, n);
            err->field[n] = '\0';
        }
        return rc;
    }
    field_name(field, at, "mode");
    if (in->mode != IDEM_IDENTITY_ALL && in->mode != IDEM_IDENTITY_ONLY &&
        in->mode != IDEM_IDENTITY_EXCEPT)
        return idem__error_field(err, IDEM_EINVAL, field, "%d is not a mode (all, only, except)",
                                 (int)in->mode);
    field_name(field, at, "fields");
    if (in->nfields > 0 && in->fields == NULL)
        return idem__error_field(err, IDEM_EINVAL, field, "is NULL but nfields is %zu",
                                 in->nfields);
    if (in->mode == IDEM_IDENTITY_ALL && in->nfields > 0)
        return idem__error_field(err, IDEM_EINVAL, field, "mode all takes no fields, got %zu",
                                 in->nfields);
    if (in->mode == IDEM_IDENTITY_ONLY && in->nfields == 0)
        return idem__error_field(err, IDEM_EINVAL, field,
                                 "mode only needs at least one field: with none, every call "
                                 "of the tool would share one fingerprint");
    if (in->nfields > IDEM_IDENTITY_FIELDS_MAX)
        return idem__error_field(err, IDEM_EINVAL, field, "%zu fields; at most %d", in->nfields,
                                 IDEM_IDENTITY_FIELDS_MAX);
    return 0;
}

/* Each pointer on its own. */
static int check_fields(const idem_tool_identity *in, const char *at, idem_error *err)
{
    char field[FIELD_NAME_MAX], member[32];
    const char *why;

    for (size_t j = 0; j < in->nfields; j++) {
        snprintf(member, sizeof(member), "fields[%zu]", j);
        field_name(field, at, member);
        if ((why = refuse_pointer(in->fields[j])) != NULL)
            return idem__error_field(
                err, IDEM_EINVAL, field, "\"%s\" %s%s", in->fields[j] != NULL ? in->fields[j] : "",
                in->fields[j] != NULL && in->fields[j][0] != '\0' ? "is refused: " : "", why);
    }
    return 0;
}

/* The fields, sorted: no two the same, none inside another. */
static int check_overlap(char **sorted, size_t n, const char *at, idem_error *err)
{
    char field[FIELD_NAME_MAX];

    field_name(field, at, "fields");
    for (size_t j = 1; j < n; j++) {
        if (contains(sorted[j - 1], sorted[j]))
            return idem__error_field(
                err, IDEM_EINVAL, field, "\"%s\" and \"%s\": %s", sorted[j - 1], sorted[j],
                strcmp(sorted[j - 1], sorted[j]) == 0 ? "the same field twice"
                                                      : "the second is inside the first");
    }
    return 0;
}

static int copy_fields(idem__identity *out, const idem_tool_identity *in)
{
    json_t *list = json_array();

    out->fields = calloc(in->nfields + 1, sizeof(char *));
    if (out->fields == NULL || list == NULL) {
        json_decref(list);
        return IDEM_ENOMEM;
    }
    for (; out->nfields < in->nfields; out->nfields++) {
        if ((out->fields[out->nfields] = strdup(in->fields[out->nfields])) == NULL) {
            json_decref(list);
            return IDEM_ENOMEM;
        }
    }
    qsort(out->fields, out->nfields, sizeof(char *), by_member_order);
    for (size_t j = 0; j < out->nfields; j++) {
        if (json_array_append_new(list, json_string(out->fields[j])) != 0) {
            json_decref(list);
            return IDEM_ENOMEM;
        }
    }
    out->declared = json_pack("{s:o}", idem_identity_mode_name(in->mode), list);
    return out->declared != NULL ? 0 : IDEM_ENOMEM;
}

int idem__identity_copy(idem__identity *out, const idem_tool_identity *in, const char *at,
                        idem_error *err)
{
    int rc;

    memset(out, 0, sizeof(*out));
    if (in == NULL)
        return idem__error_field(err, IDEM_EINVAL, at[0] != '\0' ? at : "identity", "is NULL");
    if ((rc = idem__check_version(err, in->version, IDEM_TOOL_IDENTITY_VERSION,
                                  at[0] != '\0' ? at : "identity")) != 0 ||
        (rc = check_shape(in, at, err)) != 0 || (rc = check_fields(in, at, err)) != 0)
        return rc;
    out->mode = in->mode;
    out->tool = strdup(in->tool);
    if (out->tool == NULL || copy_fields(out, in) != 0)
        rc = idem__error_set(err, IDEM_ENOMEM, "store: out of memory");
    else
        rc = check_overlap(out->fields, out->nfields, at, err);
    if (rc != 0)
        idem__identity_clear(out);
    return rc;
}

int idem_tool_identity_check(const idem_tool_identity *identity, idem_error *err)
{
    idem__identity copy;
    int rc = idem__identity_copy(&copy, identity, "", err);

    idem__identity_clear(&copy);
    return rc;
}

void idem__identity_clear(idem__identity *id)
{
    if (id == NULL)
        return;
    for (size_t j = 0; id->fields != NULL && j < id->nfields; j++)
        free(id->fields[j]);
    free(id->fields);
    free(id->tool);
    json_decref(id->declared);
    memset(id, 0, sizeof(*id));
}

/* ONLY: {pointer: value} for each field present. */
static int project_only(json_t *proj, const idem__identity *id, const json_t *args)
{
    for (size_t j = 0; j < id->nfields; j++) {
        const json_t *v = NULL;

        if (idem__json_pointer_get(&v, args, id->fields[j]) != 0)
            return IDEM_ENOMEM;
        if (v != NULL && json_object_set(proj, id->fields[j], (json_t *)v) != 0)
            return IDEM_ENOMEM;
    }
    return 0;
}

/* EXCEPT: the copy @proj of the arguments without each field. */
static int project_except(json_t *proj, const idem__identity *id)
{
    for (size_t j = 0; j < id->nfields; j++) {
        const char *f = id->fields[j], *last = strrchr(f, '/');
        char *parent = strndup(f, (size_t)(last - f)), *name = malloc(strlen(last) + 1);
        const json_t *at = NULL;
        int rc = parent == NULL || name == NULL ? IDEM_ENOMEM : 0;

        if (rc == 0)
            rc = idem__json_pointer_get(&at, proj, parent);
        if (rc == 0 && json_is_object(at)) {
            idem__json_pointer_token(last + 1, name);
            json_object_del((json_t *)at, name);
        }
        free(parent);
        free(name);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int idem__identity_project(json_t **out, const idem__identity *id, const json_t *args,
                           idem_error *err)
{
    json_t *proj;
    int rc;

    if (!json_is_object(args))
        return idem__error_field(err, IDEM_EINVAL, "arguments",
                                 "must be a JSON object: tool %s has an identity policy "
                                 "(mode %s)",
                                 id->tool, idem_identity_mode_name(id->mode));
    proj = id->mode == IDEM_IDENTITY_ONLY ? json_object() : json_deep_copy(args);
    if (proj == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "identity: out of memory");
    rc = id->mode == IDEM_IDENTITY_ONLY ? project_only(proj, id, args) : project_except(proj, id);
    if (rc != 0) {
        json_decref(proj);
        return idem__error_set(err, IDEM_ENOMEM, "identity: out of memory");
    }
    *out = proj;
    return 0;
}

/* One field's entry: length, pointer, digest. */
static int append_entry(idem__buf *out, const char *pointer, const json_t *value, const char *key,
                        size_t key_len, idem_error *err)
{
    idem__buf text = {NULL, 0, 0};
    unsigned char md[IDEM_FINGERPRINT_SIZE], len[2];
    size_t n = strlen(pointer);
    int rc = 0;

    if (n > UINT16_MAX)
        return 0; /* no entry: a conflict on it says "arguments" */
    len[0] = (unsigned char)(n >> 8);
    len[1] = (unsigned char)(n & 0xff);
    if (idem__buf_append(&text, key, key_len) != 0 || idem__buf_append(&text, pointer, n + 1) != 0)
        rc = IDEM_ENOMEM;
    if (rc == 0)
        rc = idem__jcs_write_value(&text, value, IDEM__JCS_ARGUMENTS, err);
    if (rc == 0 && idem__sha256(md, text.data, text.len) != 0)
        rc = IDEM_ENOMEM;
    if (rc == 0 && (idem__buf_append(out, len, 2) != 0 || idem__buf_append(out, pointer, n) != 0 ||
                    idem__buf_append(out, md, IDEM__IDENTITY_DIGEST_SIZE) != 0))
        rc = IDEM_ENOMEM;
    idem__buf_free(&text);
    return rc == IDEM_ENOMEM ? idem__error_set(err, rc, "identity: out of memory") : rc;
}

static int by_name(const void *a, const void *b)
{
    const char *na = *(const char *const *)a, *nb = *(const char *const *)b;

    return idem__jcs_key_compare(na, strlen(na), nb, strlen(nb));
}

/* "/" and @name, '~' and '/' escaped. Caller frees. */
static char *member_pointer(const char *name)
{
    char *p = malloc(2 * strlen(name) + 2), *w = p;

    if (p == NULL)
        return NULL;
    *w++ = '/';
    for (; *name != '\0'; name++) {
        if (*name == '~' || *name == '/') {
            *w++ = '~';
            *w++ = *name == '~' ? '0' : '1';
        } else {
            *w++ = *name;
        }
    }
    *w = '\0';
    return p;
}

/* EXCEPT: one entry per member of the projection, in member order. */
static int except_digests(idem__buf *out, const json_t *proj, const char *key, size_t key_len,
                          idem_error *err)
{
    size_t n = json_object_size(proj), i = 0;
    const char **names = calloc(n + 1, sizeof(char *));
    const char *name;
    json_t *v;
    int rc = names == NULL ? idem__error_set(err, IDEM_ENOMEM, "identity: out of memory") : 0;

    json_object_foreach((json_t *)proj, name, v)
    {
        if (names != NULL)
            names[i++] = name;
    }
    if (rc == 0)
        qsort(names, n, sizeof(char *), by_name);
    for (i = 0; rc == 0 && i < n; i++) {
        char *pointer = member_pointer(names[i]);

        rc = pointer == NULL
                 ? idem__error_set(err, IDEM_ENOMEM, "identity: out of memory")
                 : append_entry(out, pointer, json_object_get(proj, names[i]), key, key_len, err);
        free(pointer);
    }
    free(names);
    return rc;
}

int idem__identity_digests(idem__buf *out, const idem__identity *id, const json_t *projection,
                           const char *tenant, const char *operation_id, idem_error *err)
{
    size_t nt = strlen(tenant) + 1, key_len = nt + strlen(operation_id) + 1;
    char *key = malloc(key_len);
    int rc = 0;

    if (key == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "identity: out of memory");
    memcpy(key, tenant, nt);
    memcpy(key + nt, operation_id, key_len - nt);
    if (id->mode == IDEM_IDENTITY_EXCEPT)
        rc = except_digests(out, projection, key, key_len, err);
    for (size_t j = 0; id->mode == IDEM_IDENTITY_ONLY && rc == 0 && j < id->nfields; j++) {
        const json_t *v = json_object_get(projection, id->fields[j]);

        if (v != NULL)
            rc = append_entry(out, id->fields[j], v, key, key_len, err);
    }
    free(key);
    return rc;
}

/* The entry at *at of @list (@len bytes): its pointer and digest; *at moves past it.
 * Returns 1, 0 at the end, -1 when malformed. */
static int next_entry(const unsigned char *list, size_t len, size_t *at, const char **pointer,
                      size_t *n, const unsigned char **digest)
{
    if (*at >= len)
        return 0;
    if (len - *at < 2)
        return -1;
    *n = ((size_t)list[*at] << 8) | list[*at + 1];
    if (len - *at - 2 < *n + IDEM__IDENTITY_DIGEST_SIZE)
        return -1;
    *pointer = (const char *)list + *at + 2;
    *digest = list + *at + 2 + *n;
    *at += 2 + *n + IDEM__IDENTITY_DIGEST_SIZE;
    return 1;
}

static int name_it(char *out, size_t size, const char *pointer, size_t n)
{
    snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), pointer);
    return 1;
}

int idem__identity_first_difference(char *out, size_t size, const unsigned char *a, size_t a_len,
                                    const unsigned char *b, size_t b_len)
{
    size_t ia = 0, ib = 0, na = 0, nb = 0;
    const char *pa = NULL, *pb = NULL;
    const unsigned char *da = NULL, *db = NULL;
    int ha = next_entry(a, a_len, &ia, &pa, &na, &da);
    int hb = next_entry(b, b_len, &ib, &pb, &nb, &db);

    while (ha >= 0 && hb >= 0 && (ha || hb)) {
        int c = !ha ? 1 : !hb ? -1 : idem__identity_compare(pa, na, pb, nb);

        if (c < 0)
            return name_it(out, size, pa, na);
        if (c > 0)
            return name_it(out, size, pb, nb);
        if (memcmp(da, db, IDEM__IDENTITY_DIGEST_SIZE) != 0)
            return name_it(out, size, pa, na);
        ha = next_entry(a, a_len, &ia, &pa, &na, &da);
        hb = next_entry(b, b_len, &ib, &pb, &nb, &db);
    }
    return 0;
}
