#define _GNU_SOURCE /* _Fork() */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "idem/idem.h"
#include "uuid_internal.h"

Test(uuid, v7_has_version_variant_and_current_time)
{
    char id[IDEM_UUID_STRING_SIZE];
    uint64_t ms = 0;
    cr_assert_eq(idem_uuid_v7(id, NULL), 0);
    cr_assert_eq(strlen(id), 36);
    cr_assert_eq(id[14], '7');
    cr_assert(strchr("89ab", id[19]) != NULL);
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, id), 0);
    uint64_t now = (uint64_t)time(NULL) * 1000u;
    cr_assert(ms + 5000 > now && ms < now + 5000, "uuid time %llu vs now %llu",
              (unsigned long long)ms, (unsigned long long)now);
    cr_assert_eq(idem_validate_operation_id(id, NULL), 0);
}

Test(uuid, v7_ids_are_distinct)
{
    char a[IDEM_UUID_STRING_SIZE], b[IDEM_UUID_STRING_SIZE];
    for (int i = 0; i < 1000; i++) {
        idem_uuid_v7(a, NULL);
        idem_uuid_v7(b, NULL);
        cr_assert_str_neq(a, b);
    }
}

/* A fork() that keeps to the atfork handlers. */
static pid_t plain_fork(void)
{
    return fork();
}

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
#define HAVE_UNDERSCORE_FORK 1
/* _Fork(): a child made without running the atfork handlers. */
static pid_t fork_without_handlers(void)
{
    return _Fork();
}
#endif

static void *one_id(void *arg);

/* In a child: another thread makes an ID before the forking thread does (it finds the
 * child first, and the forking thread must still not use its copy of the parent's
 * batch). */
static void other_thread_first(void)
{
    pthread_t t;
    int rc = -1;

    if (pthread_create(&t, NULL, one_id, &rc) != 0 || pthread_join(t, NULL) != 0 || rc != 0)
        _exit(2);
}

/* Random bytes are drawn in batches: a child made by @make_child must not hand out the ones
 * its parent has left. The two next IDs (same millisecond, most likely) differ. @first,
 * unless NULL, runs in the child before its ID is made. */
static void child_ids_differ(pid_t (*make_child)(void), void (*first)(void))
{
    char parent[IDEM_UUID_STRING_SIZE], child[IDEM_UUID_STRING_SIZE] = "";
    int fds[2], status = 0;
    pid_t pid;

    for (int round = 0; round < 20; round++) {
        cr_assert_eq(idem_uuid_v7(parent, NULL), 0); /* the batch is drawn */
        cr_assert_eq(pipe(fds), 0);
        pid = make_child();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            int ok;

            if (first != NULL)
                first();
            ok = idem_uuid_v7(child, NULL) == 0 &&
                 write(fds[1], child, sizeof(child)) == (ssize_t)sizeof(child);
            _exit(ok ? 0 : 1);
        }
        cr_assert_eq(idem_uuid_v7(parent, NULL), 0);
        cr_assert_eq(read(fds[0], child, sizeof(child)), (ssize_t)sizeof(child));
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(fds[0]);
        close(fds[1]);
        cr_assert_str_neq(parent + 14, child + 14, "%s and %s share their random bits", parent,
                          child);
    }
}

Test(uuid, v7_ids_differ_between_a_process_and_its_fork)
{
    child_ids_differ(plain_fork, NULL);
}

/* Whether this kernel wipes a page in a child and refuses an advice it does not know, as
 * the library asks before it trusts it (Linux 4.14 and later). */
static int kernel_wipes_pages(void)
{
#ifdef MADV_WIPEONFORK
    long size = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int yes;

    cr_assert_neq(p, MAP_FAILED);
    yes = madvise(p, (size_t)size, -1) != 0 && madvise(p, (size_t)size, MADV_WIPEONFORK) == 0;
    munmap(p, (size_t)size);
    return yes;
#else
    return 0;
#endif
}

/* _Fork() makes a child without running the atfork handlers: the canary's page, which the
 * kernel wipes in a child, still keeps the child from handing out the parent's bytes. */
Test(uuid, v7_ids_differ_between_a_process_and_a_child_made_without_atfork_handlers)
{
    char id[IDEM_UUID_STRING_SIZE];

    cr_assert_eq(idem_uuid_v7(id, NULL), 0);
    cr_assert_eq(idem__uuid_fork_canary(), kernel_wipes_pages(),
                 "where the kernel wipes pages in a child, a child is told by such a page");
#ifdef HAVE_UNDERSCORE_FORK
    child_ids_differ(fork_without_handlers, NULL);
#else
    cr_skip_test("no _Fork() in this C library");
#endif
}

/* The same when a thread of the child makes an ID first: the forking thread's batch, of
 * the parent's generation, is drawn again all the same. */
Test(uuid, v7_ids_differ_in_a_child_whose_other_thread_draws_first)
{
#ifdef HAVE_UNDERSCORE_FORK
    child_ids_differ(fork_without_handlers, other_thread_first);
#else
    child_ids_differ(plain_fork, other_thread_first);
#endif
}

static void *one_id(void *arg)
{
    char id[IDEM_UUID_STRING_SIZE];

    *(int *)arg = idem_uuid_v7(id, NULL);
    return NULL;
}

/* The process's mapped memory, kB (VmSize). */
static long mapped_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;

    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            break;
    fclose(f);
    cr_assert_gt(kb, 0);
    return kb;
}

/* A thread's batch is its own storage, gone with the thread: nothing is mapped for each
 * thread that is kept after it ends (a page each for 200 threads would be 800 kB; the C
 * library reuses an ended thread's stack for the next). */
Test(uuid, threads_that_made_ids_leave_no_pages_behind)
{
    long before;
    int rc = -1;

    for (int i = 0; i < 4; i++) { /* the first thread's stack and the once-made key */
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, one_id, &rc), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
    }
    before = mapped_kb();
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        rc = -1;
        cr_assert_eq(pthread_create(&t, NULL, one_id, &rc), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_assert_eq(rc, 0);
    }
    cr_assert_lt(mapped_kb(), before + 200, "%ld kB mapped before 200 threads, %ld kB after",
                 before, mapped_kb());
}

Test(uuid, time_of_a_known_id)
{
    uint64_t ms = 0;
    /* RFC 9562 appendix A.6 example: 2022-02-22 19:22:22 UTC = 0x017F22E279B0 ms. */
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, "017F22E2-79B0-7CC3-98C4-DC0C0C07398F"), 0);
    cr_assert_eq(ms, 0x017F22E279B0ull);
}

Test(uuid, time_rejects_what_is_not_a_v7)
{
    uint64_t ms = 42;
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, ""), IDEM_EINVAL);
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, "order-42"), IDEM_EINVAL);
    /* version 4 */
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, "9f1c1b9e-3c1a-4d5e-8f00-0123456789ab"), IDEM_EINVAL);
    /* bad variant */
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, "017f22e2-79b0-7cc3-18c4-dc0c0c07398f"), IDEM_EINVAL);
    /* dash misplaced */
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, "017f22e279b0-7cc3-98c4-dc0c0c07398f-"), IDEM_EINVAL);
    cr_assert_eq(ms, 42, "out untouched on failure");
}
