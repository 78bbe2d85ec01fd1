/* A program outside the tree, built against an installed idem through pkg-config, with the
 * current header layout only (-DIDEM_NO_DEPRECATED): idem.h for the runtime modules, the
 * administration headers under idem/sys/ by name. */
#include <idem/idem.h>
#include <idem/sys/external.h>
#include <idem/sys/reconcile.h>
#include <idem/sys/sweep.h>
#include <stdio.h>
#include <string.h>

static int sys_structs(void)
{
    idem_sweep_result result;
    idem_reconcile_resolution resolution;
    idem_resolution external;

    return idem_sweep_result_init(&result, IDEM_SWEEP_RESULT_VERSION) != 0 ||
           idem_reconcile_resolution_init(&resolution, IDEM_RECONCILE_RESOLUTION_VERSION) != 0 ||
           idem_resolution_init(&external, IDEM_RESOLUTION_VERSION) != 0;
}

int main(void)
{
    idem_fingerprint fp;
    idem_pool_stats stats;
    char hex[IDEM_FINGERPRINT_HEX_SIZE];
    char *canonical = NULL;

    if (strcmp(idem_version(), IDEM_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", IDEM_VERSION_STRING, idem_version());
        return 1;
    }
    if (idem_fingerprint_compute_text(&fp, "create_support_task", 1, "{\"subject\":\"x\"}", 15,
                                      NULL, NULL) != 0 ||
        idem_jcs_canonicalize(&canonical, NULL, "[1.0]", 5, NULL, NULL) != 0 ||
        strcmp(canonical, "[1]") != 0 || idem_pool_stats_init(&stats, 1) != 0 || sys_structs() != 0)
        return 1;
    idem_free(canonical);
    idem_fingerprint_hex(hex, &fp);
    printf("linked idem %s: %s, fingerprint %.16s..., status %s\n", idem_version(),
           idem_strerror(IDEM_ECONFLICT), hex, idem_status_name(IDEM_STATUS_REPLAYED));
    return 0;
}
