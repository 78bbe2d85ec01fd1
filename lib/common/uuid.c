/* UUIDv7 (include/idem/uuid.h): operation IDs, whose time tells a retry within its tool's
 * key memory from a late one, and the claim token that marks which attempt wrote a
 * record. */
#include <openssl/rand.h>
#include <pthread.h>
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
 * Each thread's batch lives in a page of its own that the kernel hands a child zeroed
 * (MADV_WIPEONFORK, Linux 4.14): an empty batch, drawn again, in any child with a copy of
 * the parent's memory (fork(), _Fork(), which runs no atfork handler, clone() without
 * CLONE_VM), with no system call per identifier to tell. The kernel's answer is tested
 * first: one that takes an unknown advice too (some emulators answer every madvise() with
 * success and do nothing) is not trusted. Where no such page can be had, the batch is a
 * thread-local one that the atfork handler empties and that is drawn again whenever the
 * process ID changed (getpid() on every draw). */
#define RANDOM_BATCH 320
typedef struct batch {
    unsigned char bytes[RANDOM_BATCH];
    size_t left;
    pid_t pid; /* the thread-local batch's: the process that drew it */
} batch;

static _Thread_local batch *thread_batch; /* this thread's: its page, or plain_batch */
static _Thread_local batch plain_batch;
static size_t page_size;       /* 0: no pages wiped on fork here */
static pthread_key_t page_key; /* unmaps a thread's page when the thread ends */
static int page_key_made;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

/* In a child made by fork(), the forking thread (its only one) drops what its batch had
 * left (its page is wiped already, if it has one). */
static void forget_batch(void)
{
    memset(&plain_batch, 0, sizeof(plain_batch));
}

static void unmap_page(void *page)
{
    if (thread_batch == page)
        thread_batch = NULL; /* a later draw in this thread's exit maps another */
    munmap(page, page_size);
}

/* The page size, if pages wiped on fork can be had and the kernel tells a wrong advice
 * from a right one; else 0. */
static size_t wipe_page_size(void)
{
#ifdef MADV_WIPEONFORK
    long size = sysconf(_SC_PAGESIZE);
    void *probe;
    int honest;

    if (size < (long)sizeof(batch))
        return 0;
    probe = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED)
        return 0;
    honest =
        madvise(probe, (size_t)size, -1) != 0 && madvise(probe, (size_t)size, MADV_WIPEONFORK) == 0;
    munmap(probe, (size_t)size);
    return honest ? (size_t)size : 0;
#else
    return 0;
#endif
}

static void setup(void)
{
    (void)pthread_atfork(NULL, NULL, forget_batch);
    page_size = wipe_page_size();
    page_key_made = page_size > 0 && pthread_key_create(&page_key, unmap_page) == 0;
}

/* Unloaded by dlclose(), the library leaves no destructor of its own to threads that
 * still run (their pages stay theirs, one each). */
__attribute__((destructor)) static void drop_page_key(void)
{
    if (page_key_made) {
        page_key_made = 0;
        pthread_key_delete(page_key);
    }
}

/* A page the kernel wipes in a child, registered to be unmapped at the thread's end; NULL
 * where there is none to be had. */
static batch *wiped_page(void)
{
#ifdef MADV_WIPEONFORK
    void *page;

    if (!page_key_made)
        return NULL;
    page = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return NULL;
    if (madvise(page, page_size, MADV_WIPEONFORK) == 0 && pthread_setspecific(page_key, page) == 0)
        return page;
    munmap(page, page_size);
#endif
    return NULL;
}

static int random_bytes(unsigned char *out, size_t n)
{
    batch *b = thread_batch;
    pid_t pid = 0;

    if (b == NULL) {
        pthread_once(&setup_once, setup);
        b = thread_batch = wiped_page();
        if (b == NULL)
            b = thread_batch = &plain_batch;
    }
    if (b == &plain_batch)
        pid = getpid();
    if (b->left < n || b->pid != pid) {
        if (RAND_bytes(b->bytes, RANDOM_BATCH) != 1)
            return -1;
        b->left = RANDOM_BATCH;
        b->pid = pid;
    }
    b->left -= n;
    memcpy(out, b->bytes + b->left, n);
    memset(b->bytes + b->left, 0, n); /* never handed out twice */
    return 0;
}

#ifdef IDEM_TESTING
int idem__uuid_batch_wiped(void)
{
    return thread_batch != NULL && thread_batch != &plain_batch;
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
