/**
 * @file idem.h
 * @brief Umbrella header: includes every public idem module.
 */
#ifndef IDEM_IDEM_H
#define IDEM_IDEM_H

#include "common.h"
#include "version.h"
#include "migrate.h"
#include "status.h"
#include "retry.h"
#include "uuid.h"
#include "store.h"
#include "validate.h"
#include "fingerprint.h"
#include "pool.h"
#include "sweep.h"
#include "reconcile.h"
#include "external.h"
#include "intent.h"

#endif
