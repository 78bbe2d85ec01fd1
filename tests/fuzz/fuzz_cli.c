/* Fuzz target: idem-fingerprint's command line, its main() compiled as
 * idem_fingerprint_main() (-Dmain=..., meson.build), and idem__parse_whole()
 * (lib/core/parse.h).
 *
 * Input: one flags byte (bits 0-1: stdin's fixed text: empty, an object, numbers near the
 * limits, invalid JSON; bit 2: stdout is /dev/full instead of /dev/null), then the
 * arguments, separated by NUL bytes (at most 32). During the call stdin, stdout and stderr
 * are other streams (glibc's stdin, stdout and stderr are variables); nothing else is
 * touched: no file is written, no connection made.
 *
 * Aborts when a property fails:
 * - the exit status is one the usage text lists (0, 3, 64, 65, 71, 74);
 * - a failure says why on stderr, "idem-fingerprint: ..."; a success writes nothing there;
 * - idem__parse_whole() accepts exactly a whole decimal number in range, as strtoll() reads
 *   one (leading blanks and a sign allowed, nothing after the digits), with its value, and
 *   leaves *out untouched when it refuses;
 * - idem-reconcile's --since parsers (tools/reconcile_text.h): a time it accepts is a day
 *   of the calendar from 1970, which rt_format_time() writes back as the same time; one
 *   it refuses leaves *out untouched; an age it accepts lies in the past.
 * Built with libFuzzer (-Dfuzzing=true, clang) or with standalone.c (any compiler). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "core/parse.h"
#include "reconcile_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int idem_fingerprint_main(int argc, char **argv);

#define ARGS_MAX 32

#define check(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

static char stdin_texts[4][64] = {
    "",
    "{\"b\":[2,1.5,\"\\u00e9\"],\"a\":{\"x\":null,\"y\":true}}\n",
    "[9007199254740993,1e20,5e-324,-0.0,1e-400]",
    "{\"a\":1,\"a\":2",
};

static int documented_status(int status)
{
    return status == 0 || status == 3 || status == 64 || status == 65 || status == 71 ||
           status == 74;
}

/* The tool's main() on argv, with the streams the flags choose. */
static void run_tool(unsigned flags, int argc, char **argv)
{
    FILE *saved_in = stdin, *saved_out = stdout, *saved_err = stderr;
    const char *text = stdin_texts[flags & 3u];
    char *errors = NULL;
    size_t errors_len = 0;
    int status;

    stdin = strlen(text) > 0 ? fmemopen((void *)text, strlen(text), "r") : fopen("/dev/null", "r");
    stdout = fopen(flags & 4u ? "/dev/full" : "/dev/null", "w");
    stderr = open_memstream(&errors, &errors_len);
    check(stdin != NULL && stdout != NULL && stderr != NULL);
    optind = 0; /* glibc: start getopt over, as in a new process */
    status = idem_fingerprint_main(argc, argv);
    fclose(stdin);
    fclose(stdout); /* fails on /dev/full when output was still buffered */
    check(fclose(stderr) == 0);
    stdin = saved_in;
    stdout = saved_out;
    stderr = saved_err;
    check(documented_status(status));
    if (status == 0)
        check(errors_len == 0);
    else
        check(strncmp(errors, "idem-fingerprint: ", 18) == 0);
    free(errors);
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* What idem__parse_whole() should answer: strtoll()'s decimal grammar, whole text. */
static int expected_number(long long *out, const char *s, long long min, long long max)
{
    unsigned long long magnitude = 0, limit = LLONG_MAX;
    int negative = 0;
    long long value;

    while (is_blank(*s))
        s++;
    if (*s == '+' || *s == '-')
        negative = *s++ == '-';
    if (*s < '0' || *s > '9')
        return -1;
    if (negative)
        limit = (unsigned long long)LLONG_MAX + 1;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned digit = (unsigned)(*s - '0');
        if (magnitude > (limit - digit) / 10)
            return -1;
        magnitude = magnitude * 10 + digit;
    }
    if (*s != '\0')
        return -1;
    if (!negative)
        value = (long long)magnitude;
    else if (magnitude == limit)
        value = LLONG_MIN;
    else
        value = -(long long)magnitude;
    if (value < min || value > max)
        return -1;
    *out = value;
    return 0;
}

static void check_number(const char *text)
{
    static const long long ranges[][2] = {
        {1, INT_MAX}, {1, LLONG_MAX}, {LLONG_MIN, LLONG_MAX}, {-5, 5}, {0, 0}};

    for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
        long long got = 42424242, want = 42424242;
        int rc = idem__parse_whole(&got, text, ranges[r][0], ranges[r][1]);

        check(rc == expected_number(&want, text, ranges[r][0], ranges[r][1]));
        check(got == want);
    }
}

/* idem-reconcile's --since, as a time and as an age. */
static void check_since(const char *text)
{
    int64_t t = 4242, again = 0, age = 4242;
    char written[64];
    int rc = rt_parse_time(&t, text);

    check(rc == 0 || rc == -1 || rc == -2);
    if (rc != 0) {
        check(t == 4242);
    } else {
        check(t >= 0 && t % 1000000 == 0);
        rt_format_time(written, sizeof(written), t, 0);
        check(t == 0 || rt_parse_time(&again, written) == 0);
        check(t == 0 || again == t);
    }
    rc = rt_parse_age(&age, text);
    check(rc == 0 || rc == -1);
    check(rc != 0 ? age == 4242 : age <= (int64_t)time(NULL) * 1000000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *args[ARGS_MAX + 1] = {NULL}; /* owned copies: getopt permutes argv */
    char *argv[ARGS_MAX + 2] = {"idem-fingerprint"};
    size_t pos = 1;
    int argc = 1;

    if (size < 1)
        return 0;
    while (pos < size && argc <= ARGS_MAX) {
        const uint8_t *nul = memchr(data + pos, '\0', size - pos);
        size_t n = nul != NULL ? (size_t)(nul - (data + pos)) : size - pos;

        args[argc - 1] = malloc(n + 1);
        check(args[argc - 1] != NULL);
        memcpy(args[argc - 1], data + pos, n);
        args[argc - 1][n] = '\0';
        check_number(args[argc - 1]);
        check_since(args[argc - 1]);
        argv[argc] = args[argc - 1];
        argc++;
        pos += n + 1;
    }
    argv[argc] = NULL;
    run_tool(data[0], argc, argv);
    for (int i = 0; i < ARGS_MAX; i++)
        free(args[i]);
    return 0;
}
