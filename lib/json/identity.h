/* Internal: tools' identity policies (include/idem/identity.h): a policy checked and
 * copied, the projection of the arguments it fingerprints, the digest of each identity
 * field that a record keeps (migration 0012), and the first field two sets of digests
 * disagree on. */
#ifndef IDEM_LIB_IDENTITY_H
#define IDEM_LIB_IDENTITY_H

#include <jansson.h>
#include <stddef.h>

#include "idem/fingerprint.h"
#include "idem/identity.h"
#include "jcs.h"

/* A policy, the store's own copy. */
typedef struct idem__identity {
    char *tool;
    idem_identity_mode mode; /* ONLY or EXCEPT: a tool with ALL has no entry */
    char **fields;           /* the pointers, in member order (identity.h) */
    size_t nfields;
    json_t *declared; /* {"only"|"except": [fields]}: the fingerprint's "identity" */
} idem__identity;

/* Check @in (the policy at @at: "options.identities[2]", or "" alone) and copy it into
 * @out (zeroed first). Returns 0, or IDEM_EINVAL naming "<at>.fields[j]" (or tool, mode,
 * fields) and the pointer refused, or IDEM_ENOMEM; @out is then cleared. */
int idem__identity_copy(idem__identity *out, const idem_tool_identity *in, const char *at,
                        idem_error *err);

/* Free what @id holds. NULL is accepted. */
void idem__identity_clear(idem__identity *id);

/* The projection of @args that @id fingerprints: a new reference into *out. Returns 0,
 * IDEM_EINVAL (field "arguments": not an object), IDEM_ENOMEM. */
int idem__identity_project(json_t **out, const idem__identity *id, const json_t *args,
                           idem_error *err);

/* Size of one field's digest as a record keeps it. */
#define IDEM__IDENTITY_DIGEST_SIZE 16

/* The digests of @projection's identity fields, in member order, appended to @out: for each
 * field present, its pointer's length (2 bytes, big-endian), the pointer, and the first
 * IDEM__IDENTITY_DIGEST_SIZE bytes of SHA-256 over "tenant\0operation_id\0pointer\0" and
 * the field's RFC 8785 bytes (the key in front: equal values of two records do not show).
 * For ONLY, the policy's fields; for EXCEPT, the members of the projection. Returns 0,
 * IDEM_EINVAL, IDEM_ENOMEM. */
int idem__identity_digests(idem__buf *out, const idem__identity *id, const json_t *projection,
                           const char *tenant, const char *operation_id, idem_error *err);

/* The first field, in member order, that is in only one of two digest lists (as
 * idem__identity_digests() writes them) or has different digests in each, unescaped
 * nowhere: its pointer as written, NUL-terminated, into @out (@size bytes, cut if longer).
 * Returns 1 when one was found, 0 when none (or a list is malformed). */
int idem__identity_first_difference(char *out, size_t size, const unsigned char *a, size_t a_len,
                                    const unsigned char *b, size_t b_len);

/* Two JSON Pointers in member order: token by token, RFC 8785's order of names, a path
 * before the paths below it. < 0, 0, > 0. */
int idem__identity_compare(const char *a, size_t a_len, const char *b, size_t b_len);

/* SHA-256 of @len bytes (fingerprint.c). Returns 0 or -1 (libcrypto failed). */
int idem__sha256(unsigned char out[IDEM_FINGERPRINT_SIZE], const void *bytes, size_t len);

/* idem_fingerprint_compute(), with @identity (a policy's declared form; NULL for none)
 * after the arguments in the wrapper (fingerprint.c). */
int idem__fingerprint_identity(idem_fingerprint *out, const char *tool, int payload_version,
                               const json_t *arguments, const json_t *identity, idem_error *err);

/* idem_fingerprint_compute() of a request whose arguments are the JSON text
 * arguments[0..len), without parsing it into a tree, when the text is in the subset
 * idem__jcs_arguments_fast() writes (jcs.h); @tool and @payload_version are already
 * validated (idem_validate_tool(), idem_validate_payload_version()). Returns 1 when *out
 * is set; 0 when the text is outside the subset (compute it from the parsed arguments
 * instead, which reports what is wrong with them); IDEM_ENOMEM (fingerprint.c). */
int idem__fingerprint_text(idem_fingerprint *out, const char *tool, int payload_version,
                           const char *arguments, size_t len, idem_error *err);

/* idem__fingerprint_text() that also keeps the arguments' canonical form: on 1, @canonical
 * (empty before; the caller frees it) holds it, NUL-terminated; else it is left empty. */
int idem__fingerprint_text_kept(idem_fingerprint *out, const char *tool, int payload_version,
                                const char *arguments, size_t len, idem__buf *canonical,
                                idem_error *err);

/* idem__fingerprint_text_kept() in two steps, for a caller with a round trip to wait on
 * before it needs the fingerprint (a retry's lookup): the request's text, which the
 * fingerprint hashes, written into @text (empty before) and left unhashed, with the same
 * returns (on anything but 1 @text is left empty); then hashed into *out, @text freed.
 * idem__fingerprint_hash_text() returns 0, or IDEM_ENOMEM (libcrypto failed) with @text
 * kept. */
int idem__fingerprint_text_unhashed(idem__buf *text, const char *tool, int payload_version,
                                    const char *arguments, size_t len, idem__buf *canonical,
                                    idem_error *err);
int idem__fingerprint_hash_text(idem_fingerprint *out, idem__buf *text, idem_error *err);

#endif
