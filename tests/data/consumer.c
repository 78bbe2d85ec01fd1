/* A program outside the tree, built against an installed idem through pkg-config. */
#include <idem/idem.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    idem_fingerprint fp;
    char hex[IDEM_FINGERPRINT_HEX_SIZE];

    if (strcmp(idem_version(), IDEM_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", IDEM_VERSION_STRING, idem_version());
        return 1;
    }
    if (idem_fingerprint_compute_text(&fp, "create_support_task", 1, "{\"subject\":\"x\"}", 15,
                                      NULL, NULL) != 0)
        return 1;
    idem_fingerprint_hex(hex, &fp);
    printf("linked idem %s: %s, fingerprint %.16s..., status %s\n", idem_version(),
           idem_strerror(IDEM_ECONFLICT), hex, idem_status_name(IDEM_STATUS_REPLAYED));
    return 0;
}
