#include "idem/version.h"

const char *idem_version(void)
{
    return IDEM_VERSION_STRING;
}

int idem_version_number(void)
{
    return IDEM_VERSION_NUMBER;
}
