/* UUIDv7 (include/idem/uuid.h): operation IDs, whose time tells a retry within its tool's
 * key memory from a late one, and the claim token that marks which attempt wrote a
 * record. */
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "idem/uuid.h"
#include "uuid_internal.h"

static uint64_t unix_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The system CSPRNG's bytes, drawn a few hundred at a time: one RAND_bytes() call costs
 * microseconds, and a call of the store makes an identifier or two. Per thread, so
 * without a lock; a process made by fork() never hands out its parent's bytes.
 *
 * A child is told by one page of the process that the kernel hands a child zeroed
 * (MADV_WIPEONFORK, Linux 4.14): its canary is 1 where it was mapped, 0 in any child with
 * a copy of the parent's memory (fork(), _Fork(), which runs no atfork handler, clone()
 * without CLONE_VM). The first draw in a child moves the process's generation on, and a
 * batch of another generation is drawn again: no system call per identifier, and the
 * batch stays in the thread's own storage. A page of each thread's own cost more: under
 * load it is out of the caches at every call, its loads the slowest of an identifier.
 * The kernel's answer is tested first: one that takes an unknown advice too (some
 * emulators answer every madvise() with success and do nothing) is not trusted. Where no
 * such page can be had, the atfork handler empties the forking thread's batch and a batch
 * is drawn again whenever the process ID changed (getpid() on every draw). */
#define RANDOM_BATCH 320
typedef struct batch {
    unsigned char bytes[RANDOM_BATCH];
    size_t left;
    unsigned long generation; /* the process's generation when it was drawn */
    pid_t pid;                /* without a canary: the process that drew it */
} batch;

static _Thread_local batch thread_batch;
static _Atomic(unsigned char) *canary; /* NULL: no page wiped on fork here */
static atomic_ulong generation;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

/* In a child made by fork(), the forking thread (its only one) drops what its batch had
 * left. */
static void forget_batch(void)
{
    memset(&thread_batch, 0, sizeof(thread_batch));
}

/* The canary, in a page the kernel wipes in a child and that tells a wrong advice from a
 * right one; NULL where there is none. The page stays mapped for the life of the
 * process. */
static _Atomic(unsigned char) *wiped_canary(void)
{
#ifdef MADV_WIPEONFORK
    long size = sysconf(_SC_PAGESIZE);
    void *page;

    if (size <= 0)
        return NULL;
    page = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return NULL;
    if (madvise(page, (size_t)size, -1) != 0 && madvise(page, (size_t)size, MADV_WIPEONFORK) == 0) {
        _Atomic(unsigned char) *c = page;

        atomic_store(c, 1);
        return c;
    }
    munmap(page, (size_t)size);
#endif
    return NULL;
}

static void setup(void)
{
    (void)pthread_atfork(NULL, NULL, forget_batch);
    canary = wiped_canary();
}

/* The generation a batch must be of to be drawn from here: the process's, moved on by the
 * first draw in a child. The generation is moved before the canary is set again, so that a
 * thread that sees the canary set sees the new generation too. */
static unsigned long current_generation(void)
{
    if (atomic_load_explicit(canary, memory_order_acquire) == 0) {
        atomic_fetch_add(&generation, 1);
        atomic_store_explicit(canary, 1, memory_order_release);
    }
    return atomic_load(&generation);
}

static int random_bytes(unsigned char *out, size_t n)
{
    batch *b = &thread_batch;
    unsigned long gen = 0;
    pid_t pid = 0;

    pthread_once(&setup_once, setup);
    if (canary != NULL)
        gen = current_generation();
    else
        pid = getpid();
    if (b->left < n || b->generation != gen || b->pid != pid) {
        if (RAND_bytes(b->bytes, RANDOM_BATCH) != 1)
            return -1;
        b->left = RANDOM_BATCH;
        b->generation = gen;
        b->pid = pid;
    }
    b->left -= n;
    memcpy(out, b->bytes + b->left, n);
    memset(b->bytes + b->left, 0, n); /* never handed out twice */
    return 0;
}

#ifdef IDEM_TESTING
int idem__uuid_fork_canary(void)
{
    pthread_once(&setup_once, setup);
    return canary != NULL;
}
#endif

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
