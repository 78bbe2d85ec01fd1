/**
 * @file identity.h
 * @brief A tool's identity policy: which of its arguments make up the request's
 *        fingerprint, so that harmless drift in the others (a timestamp, a request ID)
 *        replays instead of conflicting.
 *
 * A policy names argument fields as JSON Pointers (RFC 6901) into the arguments object:
 * either the fields that are the tool's identity (::IDEM_IDENTITY_ONLY) or the fields to
 * leave out (::IDEM_IDENTITY_EXCEPT). The default, ::IDEM_IDENTITY_ALL, covers every
 * argument, and its fingerprints are byte for byte those of idem_fingerprint_compute().
 *
 * A field is an object member, named by its path of member names: "/note",
 * "/order/customer_id" ("~1" stands for '/' and "~0" for '~' in a name). A pointer never
 * goes into an array: a token "-" or one that is an array index by RFC 6901's grammar
 * ("0", "12": digits, no leading zero) is refused, so is the empty pointer (the whole
 * arguments: that is ::IDEM_IDENTITY_ALL), a pointer listed twice, and a pointer inside
 * another listed one ("/order" with "/order/id"). An array is a field as a whole. A field
 * that is absent and a field that is `null` are different values: the first has no place
 * in the projection, the second is there as `null`. A pointer that meets something other
 * than an object on its way names an absent field.
 *
 * The fingerprint of a tool with a policy is SHA-256 over the RFC 8785 bytes of
 * `{"arguments": P, "identity": {MODE: [fields]}, "tool": tool, "version": payload
 * version}`, where MODE is "only" or "except", the fields are listed in the order below,
 * and P is, for "only", an object with one member per field present (its pointer as the
 * name, its value), and for "except", the arguments without the listed fields.
 *
 * The order of fields is RFC 8785's member order applied token by token: pointers are
 * compared by their first member names (UTF-16 code units), then the next, a shorter
 * path first. A conflict names the first field that differs in that order.
 *
 * A policy changes only together with a new payload version of the tool. The library
 * cannot tell that a policy changed under the same payload version: records written under
 * the old policy then conflict with every retry (their fingerprints differ), and a
 * record's stored field digests may name no field.
 */
#ifndef IDEM_IDENTITY_H
#define IDEM_IDENTITY_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Which arguments a tool's fingerprint covers. */
typedef enum idem_identity_mode {
    IDEM_IDENTITY_ALL = 0,    /**< every argument (the default) */
    IDEM_IDENTITY_ONLY = 1,   /**< only the listed fields */
    IDEM_IDENTITY_EXCEPT = 2, /**< every argument but the listed fields */
} idem_identity_mode;

/** One tool's identity policy (::idem_store_options.identities). Initialize with
 *  ::IDEM_TOOL_IDENTITY_INIT or idem_tool_identity_init(). A library accepts every version
 *  from 1 to its own. The strings are copied by idem_store_new(). */
typedef struct idem_tool_identity {
    unsigned int version;      /**< ::IDEM_TOOL_IDENTITY_VERSION */
    const char *tool;          /**< the tool's name (validate.h); each at most once */
    idem_identity_mode mode;   /**< ::IDEM_IDENTITY_ALL: @ref fields must be empty */
    const char *const *fields; /**< JSON Pointers, see the top of this file; NULL when
                                    nfields is 0 */
    size_t nfields;            /**< entries in @ref fields; at least 1 for ONLY, at most
                                    ::IDEM_IDENTITY_FIELDS_MAX */
} idem_tool_identity;

#define IDEM_TOOL_IDENTITY_VERSION 1
#define IDEM_TOOL_IDENTITY_INIT                                                                    \
    {                                                                                              \
        IDEM_TOOL_IDENTITY_VERSION, NULL, IDEM_IDENTITY_ALL, NULL, 0                               \
    }

/** The most fields one policy lists. */
#define IDEM_IDENTITY_FIELDS_MAX 256

/**
 * Fill @p identity with the defaults of struct version @p version (for bindings that
 * cannot use ::IDEM_TOOL_IDENTITY_INIT).
 * @return 0, or IDEM_EINVAL (NULL, or a version this library does not know).
 */
IDEM_API int idem_tool_identity_init(idem_tool_identity *identity, unsigned int version);

/**
 * Check a policy as idem_store_new() will (for a configuration read before the store is
 * made): the tool's name, the mode, and each pointer (see the top of this file).
 * @return 0, or IDEM_EINVAL with err->field "tool", "mode", "fields" (a count that does not
 *         fit the mode, two pointers the same or one inside another) or "fields[j]" (the
 *         pointer refused), and the reason; IDEM_ENOMEM.
 */
IDEM_API int idem_tool_identity_check(const idem_tool_identity *identity, idem_error *err);

/** "all", "only", "except"; "unknown" outside the set. Static. */
IDEM_API const char *idem_identity_mode_name(idem_identity_mode mode);

#ifdef __cplusplus
}
#endif

#endif
