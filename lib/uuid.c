#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "idem/uuid.h"

static uint64_t unix_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int idem_uuid_v7(char out[IDEM_UUID_STRING_SIZE], idem_error *err)
{
    unsigned char b[16];
    uint64_t ms = unix_ms();

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (RAND_bytes(b + 6, 10) != 1)
        return idem__error_set(err, IDEM_EIO, "uuid: the random generator failed");
    for (int i = 0; i < 6; i++)
        b[i] = (unsigned char)(ms >> (40 - 8 * i));
    b[6] = (unsigned char)(0x70 | (b[6] & 0x0f));
    b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));
    snprintf(out, IDEM_UUID_STRING_SIZE,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    return 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int idem_uuid_v7_time_ms(uint64_t *out, const char *id)
{
    uint64_t ms = 0;
    int digits = 0;

    if (id == NULL || strlen(id) != IDEM_UUID_STRING_SIZE - 1)
        return IDEM_EINVAL;
    for (int i = 0; i < IDEM_UUID_STRING_SIZE - 1; i++) {
        int dash = (i == 8 || i == 13 || i == 18 || i == 23);
        if (dash != (id[i] == '-') || (!dash && hex_value(id[i]) < 0))
            return IDEM_EINVAL;
        if (!dash && digits < 12) {
            ms = (ms << 4) | (uint64_t)hex_value(id[i]);
            digits++;
        }
    }
    if (id[14] != '7' || strchr("89abAB", id[19]) == NULL)
        return IDEM_EINVAL;
    *out = ms;
    return 0;
}
