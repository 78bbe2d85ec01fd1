/* A driver for a fuzz target that needs no libFuzzer: it runs the target on every
 * file given (files or directories of files), then on a number of deterministic
 * mutations of each, and prints how many executions it made. A crash or abort fails.
 * Mutations insert JSON tokens, and the tokens of libFuzzer dictionaries given with -d.
 *
 *   fuzz-TARGET-standalone [-m MUTATIONS-PER-INPUT] [-s SEED] [-d DICT]... PATH...
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
#define MAX_TOKENS     1024

struct input {
    uint8_t *data;
    size_t size;
};

struct token {
    const uint8_t *data;
    size_t size;
};

static const char *prog = "fuzz-standalone";
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
        fprintf(stderr, "%s: cannot use %s\n", prog, path);
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

/* Tokens worth inserting: JSON syntax, escapes, numbers near the edges, bad UTF-8; then
 * those of the dictionaries given. */
#define T(s)                                                                                       \
    {                                                                                              \
        (const uint8_t *)(s), sizeof(s) - 1                                                        \
    }
static struct token tokens[MAX_TOKENS] = {
    T("{"),
    T("}"),
    T("["),
    T("]"),
    T("\""),
    T(","),
    T(":"),
    T("\\"),
    T("\\u"),
    T("\\ud800"),
    T("\\udc00"),
    T("\\ud83d\\ude00"),
    T("\\u0000"),
    T("e"),
    T("E+"),
    T("e-"),
    T("-"),
    T("0"),
    T("."),
    T("1e21"),
    T("1e-7"),
    T("1e400"),
    T("5e-324"),
    T("-0"),
    T("null"),
    T("true"),
    T("NaN"),
    T("Infinity"),
    T("\xff"),
    T("\xc0\x80"),
    T("\xed\xa0\x80"),
    T("\xf0\x9f\x98"),
    T("\x00"),
    T(" "),
    T("\n"),
    T("\"a\":1"),
    T("[[[["),
    T("]]]]"),
};
#undef T
static size_t token_count, builtin_token_count;

/* One dictionary entry's value: the text between the first and the last '"' of the line,
 * with \\, \" and \xHH escapes (libFuzzer's -dict format). */
static void add_token(const char *line)
{
    const char *open = strchr(line, '"'), *close = strrchr(line, '"');
    uint8_t *value;
    size_t n = 0;

    if (open == NULL || close == open || token_count == MAX_TOKENS)
        return;
    value = malloc((size_t)(close - open));
    if (value == NULL)
        exit(2);
    for (const char *p = open + 1; p < close; p++) {
        if (*p == '\\' && p[1] == 'x' && p + 3 < close) {
            char hex[3] = {p[2], p[3], '\0'};
            value[n++] = (uint8_t)strtoul(hex, NULL, 16);
            p += 3;
        } else {
            value[n++] = (uint8_t)(*p == '\\' && p + 1 < close ? *++p : *p);
        }
    }
    tokens[token_count].data = value;
    tokens[token_count].size = n;
    token_count++;
}

static void add_dictionary(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[1024];

    if (f == NULL) {
        fprintf(stderr, "%s: cannot read %s\n", prog, path);
        exit(2);
    }
    while (fgets(line, sizeof(line), f) != NULL)
        if (line[strspn(line, " \t")] != '#')
            add_token(line);
    fclose(f);
}

static size_t mutate(uint8_t *buf, size_t size)
{
    size_t at = size ? rng() % (size + 1) : 0;
    const struct token *t;
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
        t = &tokens[rng() % token_count];
        n = t->size;
        if (size + n > FUZZ_MAX_INPUT)
            return size;
        memmove(buf + at + n, buf + at, size - at);
        memcpy(buf + at, t->data, n);
        return size + n;
    }
}

/* The target sees a buffer of exactly @size bytes, as under libFuzzer, so that the
 * sanitizers catch a read past its end. */
static void run_one(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size > 0 ? size : 1);

    if (copy == NULL)
        exit(2);
    memcpy(copy, data, size);
    LLVMFuzzerTestOneInput(copy, size);
    free(copy);
}

int main(int argc, char **argv)
{
    unsigned long mutations = 100;
    unsigned long long runs = 0;
    uint8_t *buf = malloc(FUZZ_MAX_INPUT);
    int i;

    if (argc > 0 && strrchr(argv[0], '/') != NULL)
        prog = strrchr(argv[0], '/') + 1;
    else if (argc > 0)
        prog = argv[0];
    while (token_count < MAX_TOKENS && tokens[token_count].data != NULL)
        token_count++;
    builtin_token_count = token_count;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
            mutations = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
            add_dictionary(argv[++i]);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            rng_state = strtoull(argv[++i], NULL, 10) | 1;
        else
            add_path(argv[i]);
    }
    if (buf == NULL || seed_count == 0) {
        fprintf(stderr, "usage: %s [-m N] [-s SEED] [-d DICT]... PATH...\n", prog);
        return 2;
    }
    for (size_t s = 0; s < seed_count; s++) {
        size_t size = seeds[s].size;

        run_one(seeds[s].data, size);
        runs++;
        memcpy(buf, seeds[s].data, size);
        for (unsigned long m = 0; m < mutations; m++, runs++) {
            if (m % 8 == 0) { /* start again from the seed now and then */
                size = seeds[s].size;
                memcpy(buf, seeds[s].data, size);
            }
            size = mutate(buf, size);
            run_one(buf, size);
        }
    }
    printf("%s: %llu executions over %zu seeds, no crash\n", prog, runs, seed_count);
    for (size_t s = 0; s < seed_count; s++)
        free(seeds[s].data);
    for (size_t t = builtin_token_count; t < token_count; t++)
        free((void *)tokens[t].data);
    free(buf);
    return 0;
}
