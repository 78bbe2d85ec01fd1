/**
 * @file common.h
 * @brief Error codes, error detail, logging hook and memory release shared by every module.
 *
 * Every idem function that can fail returns an `int`: 0 on success or a negative
 * `IDEM_E*` code. Detail (message, SQLSTATE, offending field) goes into an optional
 * caller-supplied ::idem_error; the library keeps no global error state.
 */
#ifndef IDEM_COMMON_H
#define IDEM_COMMON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(IDEM_BUILDING) && defined(__GNUC__)
#define IDEM_API __attribute__((visibility("default")))
#else
#define IDEM_API
#endif

#if defined(__GNUC__)
#define IDEM_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define IDEM_PRINTF(fmt, args)
#endif

/**
 * The error codes: X(name, value, description). `IDEM_<name>` is the constant;
 * idem_strerror() returns the description.
 */
#define IDEM_ERRNO_MAP(X)                                                                          \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(EUNAVAIL, -3, "database unavailable")                                                        \
    X(ETIMEDOUT, -4, "timed out")                                                                  \
    X(EDB, -5, "database error")                                                                   \
    X(ECONFLICT, -6, "operation ID reused with different arguments")                               \
    X(EBUSY, -7, "operation in progress elsewhere")                                                \
    X(EEXPIRED, -8, "operation past its retention window")                                         \
    X(EUNKNOWN, -9, "outcome unknown")                                                             \
    X(EEFFECT, -10, "effect failed")                                                               \
    X(ESCHEMA, -11, "database schema missing, outdated or changed")                                \
    X(ENOTFOUND, -12, "not found")                                                                 \
    X(EIO, -13, "input/output error")                                                              \
    X(ELOCKED, -14, "lock held by another session")                                                \
    X(EREJECTED, -15, "the effect refused the request; the refusal is stored")                     \
    X(EPERM, -16, "permission denied in the database")

/** Error codes. All are negative; 0 (IDEM_OK) is success. */
enum idem_errno {
    IDEM_OK = 0,
#define IDEM__ERRNO_ENUM(name, value, text) IDEM_##name = (value),
    IDEM_ERRNO_MAP(IDEM__ERRNO_ENUM)
#undef IDEM__ERRNO_ENUM
};

/**
 * A short, static description of an error code.
 * @param code IDEM_OK or an IDEM_E* code.
 * @return a static string; "unknown error" for a code outside the list. Never NULL.
 */
IDEM_API const char *idem_strerror(int code);

/**
 * The symbolic name of an error code ("EINVAL", "OK", ...).
 * @return a static string; "UNKNOWN" for a code outside the list. Never NULL.
 */
IDEM_API const char *idem_err_name(int code);

/** Size of ::idem_error's message buffer, terminator included. */
#define IDEM_ERROR_MESSAGE_MAX 512
/** Size of ::idem_error's field buffer, terminator included. */
#define IDEM_ERROR_FIELD_MAX 48
/** Size of ::idem_error's detail and hint buffers, terminator included. */
#define IDEM_ERROR_DETAIL_MAX 256
/** Size of ::idem_error's constraint buffer (PostgreSQL names are at most 63 bytes). */
#define IDEM_ERROR_CONSTRAINT_MAX 64

/** The layout of ::idem_error this header declares (see ::idem_error.version). */
#define IDEM_ERROR_VERSION 1

/**
 * Detail of a failure, filled by the function that failed. Caller-allocated (on the
 * stack is fine): initialize it with ::IDEM_ERROR_INIT or idem_error_init(). Functions
 * accept NULL where they take one and then give only the code.
 *
 * The struct grows by versions, as the options structs do: a later version only adds
 * members at the end, and the library fills, and clears, only the members of the version
 * the caller's struct carries. It accepts every version from 1 to ::IDEM_ERROR_VERSION; a
 * struct whose version is none of those (0 when left zeroed) is filled as version 1, the
 * smallest layout a program built against libidem.so.2 allocates. libidem.so.1 (idem 0.2)
 * had no `version` member: programs built against it keep needing libidem.so.1
 * (lib/README.md, "Release notes").
 */
typedef struct idem_error {
    /** ::IDEM_ERROR_VERSION of the header the caller was built with; kept by every call. */
    unsigned int version;
    /** The IDEM_E* code the function returned (0 when no error was recorded). */
    int code;
    /** PostgreSQL SQLSTATE when the server reported one, else "". */
    char sqlstate[6];
    /** For IDEM_EINVAL: the input field at fault ("tenant", "arguments", ...), else "". */
    char field[IDEM_ERROR_FIELD_MAX];
    /** Human-readable detail: lower layers' text first, context added in front. */
    char message[IDEM_ERROR_MESSAGE_MAX];
    /** The server's DETAIL for a PostgreSQL error, else "". */
    char detail[IDEM_ERROR_DETAIL_MAX];
    /** The server's HINT, or idem's advice on what to fix (misconfiguration), else "". */
    char hint[IDEM_ERROR_DETAIL_MAX];
    /** The constraint a PostgreSQL error names (a CHECK or unique violation), the rule of
     * idem's that refused (declared_one_row, ...), "row_security_policy" or
     * "row_security_off" for row-level security's refusals (SQLSTATE 42501), else "". */
    char constraint[IDEM_ERROR_CONSTRAINT_MAX];
} idem_error;

/** Initializer for an empty ::idem_error of this header's version. */
#define IDEM_ERROR_INIT                                                                            \
    {                                                                                              \
        IDEM_ERROR_VERSION, 0, "", "", "", "", "", ""                                              \
    }

/**
 * Initialize @p err empty, as ::IDEM_ERROR_INIT does, for bindings that cannot use macros.
 * @param err     caller-allocated, of the layout of @p version.
 * @param version ::IDEM_ERROR_VERSION, or an earlier version the caller's layout is.
 * @return 0, or IDEM_EINVAL (NULL, or a version outside 1 to ::IDEM_ERROR_VERSION; @p err
 *         is then untouched).
 */
IDEM_API int idem_error_init(idem_error *err, unsigned int version);

/** Reset @p err to empty, keeping its version. NULL is accepted. */
IDEM_API void idem_error_clear(idem_error *err);

/**
 * Record an error: for effect authors and other code that reports through an
 * ::idem_error. Clears @p err, sets its code and a printf-formatted message (cut to
 * ::IDEM_ERROR_MESSAGE_MAX). NULL @p err is accepted.
 * @return @p code, so that `return idem_error_set(err, IDEM_EEFFECT, "...");` reads well.
 */
IDEM_API int idem_error_set(idem_error *err, int code, const char *fmt, ...) IDEM_PRINTF(3, 4);

/** Log levels passed to ::idem_log_fn. */
enum idem_log_level {
    IDEM_LOG_DEBUG = 0,
    IDEM_LOG_INFO = 1,
    IDEM_LOG_WARNING = 2,
    IDEM_LOG_ERROR = 3,
};

/**
 * Logging hook. The library never prints by itself; where an options struct has a
 * `log` member, it calls it instead. @p message is borrowed for the call only. The
 * hook may be called from any thread that uses the object it was given to.
 */
typedef void (*idem_log_fn)(void *ctx, int level, const char *message);

/**
 * Release memory that an idem function returned for the caller to own (canonical
 * JSON bytes, receipts). NULL is accepted.
 */
IDEM_API void idem_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif
