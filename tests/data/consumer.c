/* A program outside the tree, built against an installed idem through pkg-config. */
#include <idem/idem.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(idem_version(), IDEM_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", IDEM_VERSION_STRING, idem_version());
        return 1;
    }
    printf("linked idem %s: %s\n", idem_version(), idem_strerror(IDEM_ECONFLICT));
    return 0;
}
