/**
 * @file sweep.h
 * @brief The retention sweeper: moved to sys/sweep.h (administration on your own connection). This
 *        name includes it (deprecated.h), for applications written against idem 0.1.
 */
#ifndef IDEM_SWEEP_H
#define IDEM_SWEEP_H

#ifdef IDEM_NO_DEPRECATED
#error "idem/sweep.h is idem/sys/sweep.h since idem 0.2"
#endif
#define IDEM__SWEEP_H_DONE
#include "deprecated.h"

#endif
