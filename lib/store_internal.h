/* Internal parts of the store shared with the test build. */
#ifndef IDEM_LIB_STORE_INTERNAL_H
#define IDEM_LIB_STORE_INTERNAL_H

#include "idem/store.h"

#ifdef IDEM_TESTING
/* Failures the test suite injects at the COMMIT boundary (test builds only: the
 * installed library has none of this). Each applies to the next `count` commits. */
enum idem__fault {
    IDEM__FAULT_NONE = 0,
    IDEM__FAULT_REPLY_LOST_AFTER_COMMIT, /* COMMIT succeeds; the call reports unavailable */
    IDEM__FAULT_FAIL_BEFORE_COMMIT,      /* ROLLBACK instead of COMMIT; reports unavailable */
    IDEM__FAULT_DROP_BEFORE_COMMIT,      /* the socket dies before COMMIT is sent */
    IDEM__FAULT_DROP_DURING_COMMIT,      /* COMMIT is sent, the socket dies before its reply */
};
void idem__store_inject_fault(idem_store *store, enum idem__fault fault, unsigned int count);
#endif

#endif
