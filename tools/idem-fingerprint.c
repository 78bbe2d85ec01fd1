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

/* Exit codes (sysexits.h). */
#define EXIT_USAGE   64
#define EXIT_DATAERR 65
#define EXIT_OSERR   71
#define EXIT_IOERR   74

static const char usage_text[] =
    "usage: idem-fingerprint --tool NAME --version N [--max-bytes N] < arguments.json\n"
    "       idem-fingerprint --canonical [--tool NAME --version N] [--max-bytes N] < x.json\n"
    "\n"
    "Reads one JSON value on stdin: the arguments of a tool call.\n"
    "\n"
    "  --tool NAME      the tool name ([a-z0-9_.-], 1-64 bytes)\n"
    "  --version N      the payload version (>= 1)\n"
    "                   With both: print the request's fingerprint, the lower-case hex\n"
    "                   SHA-256 of the RFC 8785 bytes of\n"
    "                   {\"arguments\":<stdin>,\"tool\":NAME,\"version\":N}.\n"
    "  --canonical      print RFC 8785 canonical bytes instead (no trailing newline):\n"
    "                   of the input alone, or with --tool and --version, of the\n"
    "                   whole request that the fingerprint hashes.\n"
    "  --max-bytes N    longest accepted input (default 1048576)\n"
    "  --help           this text\n"
    "\n"
    "Two requests conflict when their fingerprints differ; compare the --canonical\n"
    "output of both to see where.\n"
    "\n"
    "Exit status: 0 done; 64 usage error; 65 invalid input (the message gives line,\n"
    "column and byte position); 71 out of memory; 74 cannot read stdin.\n";

struct args {
    int canonical;
    const char *tool;
    int version;
    int have_version;
    size_t max_bytes;
};

#define usage_error(...) cli_usage_error("idem-fingerprint", __VA_ARGS__)

/* Returns -1 when the program should go on, else its exit status. */
static int parse_args(struct args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"canonical", no_argument, NULL, 'c'},     {"tool", required_argument, NULL, 't'},
        {"version", required_argument, NULL, 'v'}, {"max-bytes", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    long long n;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            a->canonical = 1;
            break;
        case 't':
            a->tool = optarg;
            break;
        case 'v':
            if (cli_parse_number(&n, optarg, 1, INT_MAX) != 0)
                return usage_error("--version: '%s' is not an integer >= 1", optarg);
            a->version = (int)n;
            a->have_version = 1;
            break;
        case 'm':
            if (cli_parse_number(&n, optarg, 1, LLONG_MAX) != 0 || (unsigned long long)n > SIZE_MAX)
                return usage_error("--max-bytes: '%s' is not a positive integer", optarg);
            a->max_bytes = (size_t)n;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        default:
            return usage_error("unknown option or missing value: %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if ((a->tool != NULL) != (a->have_version != 0))
        return usage_error("%s", "--tool and --version go together");
    if (!a->canonical && a->tool == NULL)
        return usage_error("%s", "give --tool and --version, or --canonical");
    return -1;
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
            fprintf(stderr, "idem-fingerprint: input is longer than %zu bytes (--max-bytes)\n",
                    max_bytes);
            return EXIT_DATAERR;
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
    return json_pack("{sOsssi}", "arguments", arguments, "tool", a->tool, "version", a->version);
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
    int rc = idem_fingerprint_compute(&fp, a->tool, a->version, arguments, &err);

    if (rc != 0)
        return fail(&err, rc);
    idem_fingerprint_hex(hex, &fp);
    printf("%s\n", hex);
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
    rc = idem_json_parse(&arguments, text, len, &opts, &err);
    free(text);
    if (rc != 0)
        return fail(&err, rc);
    rc = a->canonical ? print_canonical(arguments, a) : print_fingerprint(arguments, a);
    json_decref(arguments);
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "idem-fingerprint: cannot write stdout: %s\n", strerror(errno));
        return EXIT_IOERR;
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct args a = {0, NULL, 0, 0, IDEM_JSON_MAX_BYTES_DEFAULT};
    int rc = parse_args(&a, argc, argv);
    idem_error err = IDEM_ERROR_INIT;

    if (rc >= 0)
        return rc;
    if (a.tool != NULL && (idem_validate_tool(a.tool, &err) != 0 ||
                           idem_validate_payload_version(a.version, &err) != 0))
        return usage_error("%s", err.message);
    return run(&a);
}
