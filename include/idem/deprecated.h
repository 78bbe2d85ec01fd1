/**
 * @file deprecated.h
 * @brief Every name of idem 0.1 kept for programs written against it, in one place.
 *
 * Deprecated since idem 0.2, kept in idem 0.3, removed in idem 0.4. Each function is
 * marked ::IDEM_DEPRECATED, so the compiler warns where a program uses it
 * (`-Wdeprecated-declarations`) and says what to use instead. None of them is an exported
 * symbol: they are inline wrappers over current calls, which lib/idem.map exports.
 *
 * Define IDEM_NO_DEPRECATED before including any idem header to see only the current names:
 * then this file declares nothing, the old header names (reconcile.h, sweep.h) stop with an
 * `#error` naming their new place, and no header includes what moved out of it.
 *
 * Not included by name: each header that held a name of 0.1 includes this file at its end
 * (idem.h, fingerprint.h, external.h, store.h, intent.h, sys/reconcile.h, and the old header
 * names reconcile.h and sweep.h), after defining `IDEM__<header>_DONE`. The file has no
 * include guard of its own: each part below is read once, when the header it belongs to is
 * complete, whatever order a program includes them in. lib/README.md, "Release notes".
 */

/** Marks a name kept for programs of an earlier release: the compiler warns where it is
 *  used, with @p msg saying what to use instead. */
#ifndef IDEM_DEPRECATED
#if defined(__GNUC__)
#define IDEM_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define IDEM_DEPRECATED(msg)
#endif
#endif

#ifndef IDEM_NO_DEPRECATED

/* Until 0.1, idem.h included the administration calls too (now sys/, included by name). */
#if defined(IDEM__IDEM_H_DONE) && !defined(IDEM__DEPRECATED_IDEM_H)
#define IDEM__DEPRECATED_IDEM_H
#include "sys/sweep.h"
#include "sys/reconcile.h"
#include "sys/external.h"
#endif

/* Until 0.1, fingerprint.h held JSON parsing and JCS too (now json.h and jcs.h). */
#if defined(IDEM__FINGERPRINT_H_DONE) && !defined(IDEM__DEPRECATED_FINGERPRINT_H)
#define IDEM__DEPRECATED_FINGERPRINT_H
#include "jcs.h"
#endif

/* Until 0.1, external.h held the outbox and the administration calls too (now outbox.h and
 * sys/external.h). */
#if defined(IDEM__EXTERNAL_H_DONE) && !defined(IDEM__DEPRECATED_EXTERNAL_H)
#define IDEM__DEPRECATED_EXTERNAL_H
#include "outbox.h"
#include "sys/external.h"
#endif

/* Until 0.1, store.h included the sweeper's header (now sys/sweep.h). */
#if defined(IDEM__STORE_H_DONE) && !defined(IDEM__DEPRECATED_STORE_H)
#define IDEM__DEPRECATED_STORE_H
#include "sys/sweep.h"
#endif

/* The header names of 0.1 for what moved to sys/. */
#if defined(IDEM__RECONCILE_H_DONE) && !defined(IDEM__DEPRECATED_RECONCILE_H)
#define IDEM__DEPRECATED_RECONCILE_H
#include "sys/reconcile.h"
#endif
#if defined(IDEM__SWEEP_H_DONE) && !defined(IDEM__DEPRECATED_SWEEP_H)
#define IDEM__DEPRECATED_SWEEP_H
#include "sys/sweep.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(IDEM__SYS_RECONCILE_H_DONE) && !defined(IDEM__DEPRECATED_SYS_RECONCILE_H)
#define IDEM__DEPRECATED_SYS_RECONCILE_H
/** idem 0.1's form of idem_reconcile_resolve_items() (sys/reconcile.h), with the
 *  resolution's members as arguments; err->field names them as that call does
 *  ("resolution.note", ...). */
IDEM_DEPRECATED("use idem_reconcile_resolve_items()")
static inline int idem_reconcile_resolve(unsigned int *out, PGconn *conn, const char *tenant,
                                         const char *operation_id, const char *kind,
                                         const char *note, const char *by, idem_error *err)
{
    idem_reconcile_resolution r = IDEM_RECONCILE_RESOLUTION_INIT;

    r.kind = kind;
    r.note = note;
    r.by = by;
    return idem_reconcile_resolve_items(out, conn, tenant, operation_id, &r, err);
}
#endif

#if defined(IDEM__INTENT_H_DONE) && !defined(IDEM__DEPRECATED_INTENT_H)
#define IDEM__DEPRECATED_INTENT_H
/** idem 0.1's name of idem_intent_current_state() (intent.h). */
IDEM_DEPRECATED("use idem_intent_current_state()")
static inline idem_intent_state idem_intent_state_get(const idem_intent *intent)
{
    return idem_intent_current_state(intent);
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* IDEM_NO_DEPRECATED */
