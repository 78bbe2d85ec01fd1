/* A driver for the fuzz target that needs no libFuzzer: it runs the target on every
 * file given (files or directories of files), then on a number of deterministic
 * mutations of each, and prints how many executions it made. A crash or abort fails.
 *
 *   fuzz-jcs-standalone [-m MUTATIONS-PER-INPUT] [-s SEED] PATH...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_INPUT 65536
#define MAX_SEEDS      1024

struct input {
    uint8_t *data;
    size_t size;
};

static struct input seeds[MAX_SEEDS];
static size_t seed_count;
static uint64_t rng_state = 0x853c49e6748fea9bu;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void add_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    size_t n;

    if (f == NULL || seed_count == MAX_SEEDS) {
        fprintf(stderr, "fuzz-jcs-standalone: cannot use %s\n", path);
        exit(2);
    }
    buf = malloc(FUZZ_MAX_INPUT);
    if (buf == NULL)
        exit(2);
    n = fread(buf, 1, FUZZ_MAX_INPUT, f);
    fclose(f);
    seeds[seed_count].data = buf;
    seeds[seed_count].size = n;
    seed_count++;
}

static void add_path(const char *path)
{
    struct stat st;
    struct dirent *entry;
    DIR *dir;

    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        add_file(path);
        return;
    }
    dir = opendir(path);
    while (dir != NULL && (entry = readdir(dir)) != NULL) {
        char child[4096];

        if (entry->d_name[0] == '.')
            continue;
        snprintf(child, sizeof(child), "%s/%s", path, entry->d_name);
        add_file(child);
    }
    if (dir != NULL)
        closedir(dir);
}

/* Tokens worth inserting: JSON syntax, escapes, numbers near the edges, bad UTF-8. */
static const char *const tokens[] = {"{",
                                     "}",
                                     "[",
                                     "]",
                                     "\"",
                                     ",",
                                     ":",
                                     "\\",
                                     "\\u",
                                     "\\ud800",
                                     "\\udc00",
                                     "\\ud83d\\ude00",
                                     "\\u0000",
                                     "e",
                                     "E+",
                                     "e-",
                                     "-",
                                     "0",
                                     ".",
                                     "1e21",
                                     "1e-7",
                                     "1e400",
                                     "5e-324",
                                     "-0",
                                     "null",
                                     "true",
                                     "NaN",
                                     "Infinity",
                                     "\xff",
                                     "\xc0\x80",
                                     "\xed\xa0\x80",
                                     "\xf0\x9f\x98",
                                     "\x00",
                                     " ",
                                     "\n",
                                     "\"a\":1",
                                     "[[[[",
                                     "]]]]"};

static size_t mutate(uint8_t *buf, size_t size)
{
    size_t at = size ? rng() % (size + 1) : 0;
    const char *t;
    size_t n;

    switch (rng() % 5) {
    case 0: /* flip a bit */
        if (size > 0)
            buf[at % size] ^= (uint8_t)(1u << (rng() % 8));
        return size;
    case 1: /* delete a range */
        n = size - at < 8 ? size - at : rng() % 8;
        memmove(buf + at, buf + at + n, size - at - n);
        return size - n;
    case 2: /* duplicate a range */
        n = size - at < 16 ? size - at : rng() % 16;
        if (size + n > FUZZ_MAX_INPUT)
            return size;
        memmove(buf + at + n, buf + at, size - at);
        return size + n;
    default: /* insert a token */
        t = tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))];
        n = t[0] == '\0' ? 1 : strlen(t);
        if (size + n > FUZZ_MAX_INPUT)
            return size;
        memmove(buf + at + n, buf + at, size - at);
        memcpy(buf + at, t, n);
        return size + n;
    }
}

int main(int argc, char **argv)
{
    unsigned long mutations = 100;
    unsigned long long runs = 0;
    uint8_t *buf = malloc(FUZZ_MAX_INPUT);
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
            mutations = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            rng_state = strtoull(argv[++i], NULL, 10) | 1;
        else
            add_path(argv[i]);
    }
    if (buf == NULL || seed_count == 0) {
        fprintf(stderr, "usage: fuzz-jcs-standalone [-m N] [-s SEED] PATH...\n");
        return 2;
    }
    for (size_t s = 0; s < seed_count; s++) {
        size_t size = seeds[s].size;

        LLVMFuzzerTestOneInput(seeds[s].data, size);
        runs++;
        memcpy(buf, seeds[s].data, size);
        for (unsigned long m = 0; m < mutations; m++, runs++) {
            if (m % 8 == 0) { /* start again from the seed now and then */
                size = seeds[s].size;
                memcpy(buf, seeds[s].data, size);
            }
            size = mutate(buf, size);
            LLVMFuzzerTestOneInput(buf, size);
        }
    }
    printf("fuzz-jcs-standalone: %llu executions over %zu seeds, no crash\n", runs, seed_count);
    for (size_t s = 0; s < seed_count; s++)
        free(seeds[s].data);
    free(buf);
    return 0;
}
