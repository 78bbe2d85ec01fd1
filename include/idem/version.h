/**
 * @file version.h
 * @brief The library's version, at compile time and at run time.
 */
#ifndef IDEM_VERSION_H
#define IDEM_VERSION_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IDEM_VERSION_MAJOR 0
#define IDEM_VERSION_MINOR 3
#define IDEM_VERSION_PATCH 0
/** The version this header belongs to, as a string. */
#define IDEM_VERSION_STRING "0.3.0"
/** MAJOR * 10000 + MINOR * 100 + PATCH. */
#define IDEM_VERSION_NUMBER                                                                        \
    (IDEM_VERSION_MAJOR * 10000 + IDEM_VERSION_MINOR * 100 + IDEM_VERSION_PATCH)

/** The version of the linked library ("0.3.0"); static, never NULL. */
IDEM_API const char *idem_version(void);

/** The linked library's ::IDEM_VERSION_NUMBER, to compare with the header's. */
IDEM_API int idem_version_number(void);

#ifdef __cplusplus
}
#endif

#endif
