/* UUIDv7 (include/idem/uuid.h): operation IDs, whose time tells a retry within its tool's
 * key memory from a late one, and the claim token that marks which attempt wrote a
 * record. */
#include <openssl/rand.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "idem/uuid.h"

static uint64_t unix_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The system CSPRNG's bytes, drawn a few hundred at a time: one RAND_bytes() call costs
 * microseconds, and a call of the store makes an identifier or two. Per thread, so
 * without a lock; a process made by fork() never hands out its parent's bytes. */
#define RANDOM_BATCH 320
static _Thread_local struct {
    unsigned char bytes[RANDOM_BATCH];
    size_t left;
    pid_t pid;
} random_batch;

/* In a child made by fork(), the forking thread (its only one) drops what its batch had
 * left; the process ID check covers a fork that skipped the handlers (a raw clone). */
static void forget_batch(void)
{
    memset(&random_batch, 0, sizeof(random_batch));
}

static pthread_once_t fork_hook_once = PTHREAD_ONCE_INIT;

static void add_fork_hook(void)
{
    (void)pthread_atfork(NULL, NULL, forget_batch);
}

static int random_bytes(unsigned char *out, size_t n)
{
    pid_t pid = getpid();

    pthread_once(&fork_hook_once, add_fork_hook);
    if (random_batch.left < n || random_batch.pid != pid) {
        if (RAND_bytes(random_batch.bytes, RANDOM_BATCH) != 1)
            return -1;
        random_batch.left = RANDOM_BATCH;
        random_batch.pid = pid;
    }
    random_batch.left -= n;
    memcpy(out, random_batch.bytes + random_batch.left, n);
    memset(random_batch.bytes + random_batch.left, 0, n); /* never handed out twice */
    return 0;
}

int idem_uuid_v7(char out[IDEM_UUID_STRING_SIZE], idem_error *err)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16];
    uint64_t ms = unix_ms();
    size_t at = 0;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (random_bytes(b + 6, 10) != 0)
        return idem__error_set(err, IDEM_EIO, "uuid: the random generator failed");
    for (int i = 0; i < 6; i++)
        b[i] = (unsigned char)(ms >> (40 - 8 * i));
    b[6] = (unsigned char)(0x70 | (b[6] & 0x0f));
    b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[at++] = '-';
        out[at++] = hex[b[i] >> 4];
        out[at++] = hex[b[i] & 0x0f];
    }
    out[at] = '\0';
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
