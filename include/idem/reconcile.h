/**
 * @file reconcile.h
 * @brief Reconciliation items: moved to sys/reconcile.h (administration on your own connection).
 * This name includes it (deprecated.h), for applications written against idem 0.1.
 */
#ifndef IDEM_RECONCILE_H
#define IDEM_RECONCILE_H

#ifdef IDEM_NO_DEPRECATED
#error "idem/reconcile.h is idem/sys/reconcile.h since idem 0.2"
#endif
#define IDEM__RECONCILE_H_DONE
#include "deprecated.h"

#endif
