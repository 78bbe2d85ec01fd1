/* The library's version (include/idem/version.h), for a caller that checks at run time
 * what it was linked with; no step of the contract. */
#include "idem/version.h"

const char *idem_version(void)
{
    return IDEM_VERSION_STRING;
}

int idem_version_number(void)
{
    return IDEM_VERSION_NUMBER;
}
