/* idem-fingerprint: the canonical form or the fingerprint of a request read on stdin,
 * to answer "why did my retry conflict?". */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"

#include "cli.h"
#include "core/parse.h"

/* Past --max-bytes, the rest of stdin is counted (to name the input's size) up to this. */
#define COUNT_MAX ((size_t)1 << 30)

static const char usage_text[] =
    "usage: idem-fingerprint --tool NAME --payload-version N [OPTIONS] < arguments.json\n"
    "       idem-fingerprint --canonical [--tool NAME --payload-version N] [OPTIONS] < x.json\n"
    "       idem-fingerprint --help | --version\n"
    "\n"
    "Reads one JSON value on stdin: the arguments of a tool call.\n"
    "\n"
    "  --tool NAME            the tool name ([a-z0-9_.-], 1-64 bytes)\n"
    "  --payload-version N    the request's payload version (>= 1), as in\n"
    "                         idem_request.payload_version\n"
    "                         With both: print the request's fingerprint, the lower-case\n"
    "                         hex SHA-256 of the RFC 8785 bytes of\n"
    "                         {\"arguments\":<stdin>,\"tool\":NAME,\"version\":N}.\n"
    "  --canonical            print the RFC 8785 canonical bytes instead: of the input\n"
    "                         alone, or with --tool and --payload-version, of the whole\n"
    "                         request that the fingerprint hashes.\n"
    "  -n, --no-newline       leave out the final newline: print exactly the bytes that\n"
    "                         are hashed (canonical JSON has no newline of its own)\n"
    "  --max-bytes N          longest accepted input (default 1048576)\n"
    "  -h, --help             this text\n"
    "  -V, --version          print the program's version\n"
    "\n"
    "The output ends with a newline, unless -n is given.\n"
    "\n"
    "Two requests conflict when their fingerprints differ; compare the --canonical\n"
    "output of both to see where.\n"
    "\n"
    "Exit status:\n"
    "   0  done\n"
    "  64  usage error\n"
    "  65  invalid JSON (the message gives line, column and byte position), or the\n"
    "      input is longer than --max-bytes (the message gives both sizes)\n"
    "  71  out of memory\n"
    "  74  cannot read stdin or write stdout\n";

struct args {
    int canonical;
    int newline;
    int show_version;
    const char *tool;
    int payload_version;
    int have_payload_version;
    size_t max_bytes;
};

#define usage_error(...) cli_usage_error("idem-fingerprint", __VA_ARGS__)

static const char version_hint[] =
    "--version prints the program's version and takes nothing else; the payload version "
    "is --payload-version N";

/* One option; 0, or a usage error's exit status. */
static int parse_option(struct args *a, int c, const char *arg, const char *text)
{
    long long n;

    switch (c) {
    case 'c':
        a->canonical = 1;
        return 0;
    case 'n':
        a->newline = 0;
        return 0;
    case 't':
        a->tool = arg;
        return 0;
    case 'p':
        if (idem__parse_whole(&n, arg, 1, INT_MAX) != 0)
            return usage_error("--payload-version: '%s' is not an integer >= 1", arg);
        a->payload_version = (int)n;
        a->have_payload_version = 1;
        return 0;
    case 'm':
        if (idem__parse_whole(&n, arg, 1, LLONG_MAX) != 0 || (unsigned long long)n > SIZE_MAX)
            return usage_error("--max-bytes: '%s' is not a positive integer", arg);
        a->max_bytes = (size_t)n;
        return 0;
    case 'V':
        a->show_version = 1;
        return 0;
    default:
        if (optopt == 'V')
            return usage_error("%s", version_hint);
        return usage_error("unknown option or missing value: %s", text);
    }
}

/* Returns -1 when the program should go on, else its exit status. */
static int parse_args(struct args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"canonical", no_argument, NULL, 'c'},
        {"no-newline", no_argument, NULL, 'n'},
        {"tool", required_argument, NULL, 't'},
        {"payload-version", required_argument, NULL, 'p'},
        {"max-bytes", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "nhV", longopts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage_text, stdout);
            return 0;
        }
        if ((rc = parse_option(a, c, optarg, argv[optind - 1])) != 0)
            return rc;
    }
    if (a->show_version && argc != 2)
        return usage_error("%s", version_hint);
    if (a->show_version) {
        printf("idem-fingerprint %s\n", idem_version());
        return 0;
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if ((a->tool != NULL) != (a->have_payload_version != 0))
        return usage_error("%s", "--tool and --payload-version go together");
    if (!a->canonical && a->tool == NULL)
        return usage_error("%s", "give --tool and --payload-version, or --canonical");
    return -1;
}

/* Count what is left on stdin, up to COUNT_MAX bytes; *more is set when it stopped early. */
static size_t count_rest(int *more)
{
    char buf[65536];
    size_t n = 0, got;

    while (n < COUNT_MAX && (got = fread(buf, 1, sizeof(buf), stdin)) > 0)
        n += got;
    *more = n >= COUNT_MAX && !feof(stdin) && !ferror(stdin);
    return n;
}

/* The input went past max_bytes after len bytes: say how long it is. */
static int too_large(size_t len, size_t max_bytes)
{
    int more = 0;

    len += count_rest(&more);
    fprintf(stderr,
            "idem-fingerprint: the input is %s%zu bytes, longer than the limit of %zu bytes; "
            "raise it with --max-bytes N\n",
            more ? "at least " : "", len, max_bytes);
    return EXIT_DATAERR;
}

/* Read stdin, at most max_bytes of it. Returns -1 when read, else the exit status. */
static int read_input(char **out, size_t *out_len, size_t max_bytes)
{
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap), *grown;

    while (buf != NULL) {
        if (len == cap) {
            cap *= 2;
            if ((grown = realloc(buf, cap)) == NULL)
                break;
            buf = grown;
        }
        len += fread(buf + len, 1, cap - len, stdin);
        if (len > max_bytes) {
            free(buf);
            return too_large(len, max_bytes);
        }
        if (ferror(stdin)) {
            free(buf);
            fprintf(stderr, "idem-fingerprint: cannot read stdin: %s\n", strerror(errno));
            return EXIT_IOERR;
        }
        if (feof(stdin)) {
            *out = buf;
            *out_len = len;
            return -1;
        }
    }
    free(buf);
    fprintf(stderr, "idem-fingerprint: out of memory reading stdin\n");
    return EXIT_OSERR;
}

static int fail(const idem_error *err, int code)
{
    fprintf(stderr, "idem-fingerprint: %s\n", err->message[0] ? err->message : idem_strerror(code));
    if (code == IDEM_ENOMEM)
        return EXIT_OSERR;
    return EXIT_DATAERR;
}

/* The value to print in canonical form: the input, or the whole request around it. */
static json_t *canonical_subject(json_t *arguments, const struct args *a)
{
    if (a->tool == NULL)
        return json_incref(arguments);
    return json_pack("{sOsssi}", "arguments", arguments, "tool", a->tool, "version",
                     a->payload_version);
}

static int print_canonical(json_t *arguments, const struct args *a)
{
    idem_error err = IDEM_ERROR_INIT;
    json_t *subject = canonical_subject(arguments, a);
    char *bytes = NULL;
    size_t len = 0;
    int rc;

    if (subject == NULL) {
        fprintf(stderr, "idem-fingerprint: out of memory\n");
        return EXIT_OSERR;
    }
    rc = idem_jcs_serialize(&bytes, &len, subject, &err);
    json_decref(subject);
    if (rc != 0)
        return fail(&err, rc);
    fwrite(bytes, 1, len, stdout);
    idem_free(bytes);
    return 0;
}

static int print_fingerprint(json_t *arguments, const struct args *a)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;
    char hex[IDEM_FINGERPRINT_HEX_SIZE];
    int rc = idem_fingerprint_compute(&fp, a->tool, a->payload_version, arguments, &err);

    if (rc != 0)
        return fail(&err, rc);
    idem_fingerprint_hex(hex, &fp);
    fputs(hex, stdout);
    return 0;
}

static int run(const struct args *a)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    json_t *arguments = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc;

    opts.max_bytes = a->max_bytes;
    rc = read_input(&text, &len, a->max_bytes);
    if (rc >= 0)
        return rc;
    /* Arguments of a request are read as the store reads them: a number a double would
     * change is refused. Plain canonical JSON follows RFC 8785 (every number a double). */
    if (a->tool != NULL)
        rc = idem_json_parse_arguments(&arguments, text, len, &opts, &err);
    else
        rc = idem_json_parse(&arguments, text, len, &opts, &err);
    free(text);
    if (rc != 0)
        return fail(&err, rc);
    rc = a->canonical ? print_canonical(arguments, a) : print_fingerprint(arguments, a);
    json_decref(arguments);
    if (rc == 0 && a->newline)
        putchar('\n');
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "idem-fingerprint: cannot write stdout: %s\n", strerror(errno));
        return EXIT_IOERR;
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct args a = {0, 1, 0, NULL, 0, 0, IDEM_JSON_MAX_BYTES_DEFAULT};
    int rc = parse_args(&a, argc, argv);
    idem_error err = IDEM_ERROR_INIT;

    if (rc >= 0)
        return rc;
    if (a.tool != NULL && (idem_validate_tool(a.tool, &err) != 0 ||
                           idem_validate_payload_version(a.payload_version, &err) != 0))
        return usage_error("%s", err.message);
    return run(&a);
}
