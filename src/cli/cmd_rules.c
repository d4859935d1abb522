/*
 * cmd_rules.c: `trainwatch rules check|export|defaults`.
 *
 * check validates rule files the way `promtool check rules` does and also
 * names what trainwatch's evaluator would refuse; export writes the built-in
 * rules plus the user's as one file for a central Prometheus; defaults prints
 * the built-in rules. The three actions are a table, like the subcommands.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trainwatch/actions.h"
#include "trainwatch/error.h"
#include "trainwatch/rules.h"

static const char check_usage[] =
    "usage: trainwatch rules check [--lint=all|duplicate-rules|none] [--lint-fatal] FILE...\n";

/* promtool's --lint: a comma-separated list; an unknown item is warned about
 * on stdout, as promtool does, and ignored. Returns whether to lint. */
static bool lint_setting(const char *value)
{
    bool lint = false;
    for (const char *item = value;; item++) {
        size_t n = strcspn(item, ",");
        if ((n == 3 && !strncmp(item, "all", 3)) || (n == 15 && !strncmp(item, "duplicate-rules", 15)))
            lint = true;
        else if (!(n == 4 && !strncmp(item, "none", 4)))
            printf("WARNING: unknown lint option %.*s\n", (int)n, item);
        item += n;
        if (!*item)
            return lint;
    }
}

/* Exit status: 1 invalid, else 3 a lint with --lint-fatal, else 4 a
 * construct trainwatch does not evaluate, else 0. */
static int rules_check(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"lint", 1, 0, 'l'}, {"lint-fatal", 0, 0, 'f'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    bool lint = true, fatal = false;
    optind = 1;
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 'l') {
            lint = lint_setting(optarg);
        } else if (opt == 'f') {
            fatal = true;
        } else if (opt == 'h') {
            fputs(check_usage, stdout);
            return TW_RULES_CHECK_OK;
        } else {
            fprintf(stderr,
                    "trainwatch rules check: unknown or incomplete option '%s' (--lint=all|duplicate-rules|none, "
                    "--lint-fatal)\n",
                    argv[optind - 1]);
            return TW_RULES_CHECK_FAILED;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "trainwatch rules check: no rule files (trainwatch rules check FILE...)\n");
        return TW_RULES_CHECK_FAILED;
    }
    bool invalid = false, unsupported = false, linted = false;
    for (int i = optind; i < argc; i++) {
        int status = tw_rules_check_file(argv[i], lint, tw_actions_check, &linted);
        invalid |= status == TW_RULES_CHECK_FAILED;
        unsupported |= status == TW_RULES_CHECK_UNSUPPORTED;
    }
    if (invalid)
        return TW_RULES_CHECK_FAILED;
    if (linted && fatal)
        return TW_RULES_CHECK_LINT;
    return unsupported ? TW_RULES_CHECK_UNSUPPORTED : TW_RULES_CHECK_OK;
}

static void to_stderr(void *arg, const char *text, bool unsupported)
{
    (void)arg;
    fprintf(stderr, "trainwatch rules export: %s%s\n", text, unsupported ? " (not evaluated by trainwatch)" : "");
}

/* The built-in rules with their runbook_url links made absolute under base
 * (the docs/ of a trainwatch checkout as your git server shows it);
 * malloc'd. */
static char *with_runbook_base(const char *text, const char *base)
{
    static const char link[] = "runbook_url: \"docs/";
    size_t n = 0, blen = base ? strlen(base) : 0;
    while (blen && base[blen - 1] == '/')
        blen--;
    for (const char *p = text; base && (p = strstr(p, link)); p += sizeof link - 1)
        n++;
    char *out = malloc(strlen(text) + n * (blen + 1) + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = text, *hit; *p; p = hit + sizeof link - 1) {
        hit = base ? strstr(p, link) : NULL;
        if (!hit) {
            strcpy(o, p);
            return out;
        }
        size_t head = (size_t)(hit - p) + strlen("runbook_url: \"");
        memcpy(o, p, head);
        o += head;
        memcpy(o, base, blen);
        o += blen;
        *o++ = '/';
        memcpy(o, "docs/", 5);
        o += 5;
    }
    *o = '\0';
    return out;
}

static int rules_export(int argc, char **argv)
{
    static const struct option longopts[] = {{"rules", 1, 0, 'r'},
                                             {"no-default-rules", 0, 0, 'n'},
                                             {"output", 1, 0, 'o'},
                                             {"runbook-base", 1, 0, 'b'},
                                             {0, 0, 0, 0}};
    const char *files[64], *output = NULL, *runbook_base = NULL;
    size_t count = 0;
    bool defaults = true;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (count == 64) {
                fprintf(stderr, "trainwatch rules export: at most 64 rule files\n");
                return TW_EXIT_USAGE;
            }
            files[count++] = optarg;
            break;
        case 'n':
            defaults = false;
            break;
        case 'o':
            output = optarg;
            break;
        case 'b':
            runbook_base = optarg;
            break;
        default:
            fprintf(stderr, "trainwatch rules export: unknown or incomplete option '%s'\n", argv[optind - 1]);
            return TW_EXIT_USAGE;
        }
    }
    for (int i = optind; i < argc && count < 64; i++)
        files[count++] = argv[i];
    tw_ruleset *rs;
    if (tw_ruleset_new(&rs) != TW_OK)
        return TW_EXIT_USAGE;
    int rc = TW_OK;
    if (defaults) {
        char *text = with_runbook_base(tw_default_rules(), runbook_base);
        rc = text ? tw_ruleset_load_text(rs, "<default rules>", text, strlen(text), to_stderr, NULL) : TW_ENOMEM;
        free(text);
    }
    for (size_t i = 0; i < count; i++) {
        int r = tw_ruleset_load_file(rs, files[i], to_stderr, NULL);
        /* exported for Prometheus: constructs only we cannot run are fine there */
        if (r != TW_OK && r != TW_EUNSUPPORTED)
            rc = r;
    }
    int status = TW_EXIT_USAGE;
    if (rc == TW_OK) {
        FILE *out = output ? fopen(output, "w") : stdout;
        if (!out) {
            perror(output);
        } else {
            fprintf(out, "# Rules for Prometheus, written by trainwatch rules export.\n"
                         "# Series carry run and rank; a stock scrape configuration (no honor_labels) suits them:\n"
                         "# trainwatch prometheus-config prints scrape configs for it.\n");
            if (tw_ruleset_export(rs, out) == TW_OK)
                status = TW_EXIT_OK;
            else
                fprintf(stderr, "trainwatch rules export: %s: write error\n", output ? output : "<stdout>");
            if (output && fclose(out) != 0)
                status = TW_EXIT_USAGE;
        }
    }
    tw_ruleset_free(rs);
    return status;
}

static int rules_defaults(int argc, char **argv)
{
    (void)argc, (void)argv;
    fputs(tw_default_rules(), stdout);
    return fflush(stdout) == 0 ? TW_EXIT_OK : TW_EXIT_USAGE;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} actions[] = {{"check", rules_check}, {"export", rules_export}, {"defaults", rules_defaults}};

static const char usage_text[] =
    "usage: trainwatch rules check [--lint=all|duplicate-rules|none] [--lint-fatal] FILE...\n"
    "       trainwatch rules export [--rules FILE]... [--no-default-rules] [--runbook-base URL] [-o FILE]\n"
    "       trainwatch rules defaults\n\n"
    "check     validate Prometheus rule files (as promtool check rules, with its duplicate-rules\n"
    "          lint) and name what trainwatch's evaluator does not support; exit as promtool\n"
    "          (0 ok, 1 invalid, unreadable or bad usage, 3 duplicates with --lint-fatal),\n"
    "          or 4 valid for Prometheus but not evaluated by trainwatch\n"
    "export    write the built-in rules and FILEs as one rule file for Prometheus; --runbook-base\n"
    "          makes their runbook_url links (docs/alerts.md#ALERT) absolute under URL\n"
    "defaults  print the built-in rules\n";

static int run(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? TW_EXIT_USAGE : TW_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        if (!strcmp(argv[1], actions[i].name))
            return actions[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "trainwatch rules: unknown action '%s'\n%s", argv[1], usage_text);
    return TW_EXIT_USAGE;
}

const tw_command tw_cmd_rules = {
    .name = "rules",
    .summary = "check, export or print Prometheus alerting rules",
    .usage = usage_text,
    .run = run,
};
