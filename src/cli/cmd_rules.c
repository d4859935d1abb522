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

typedef struct check_counts {
    size_t invalid, unsupported;
} check_counts;

static void print_problem(void *arg, const char *text, bool unsupported)
{
    check_counts *c = arg;
    if (unsupported)
        c->unsupported++;
    else
        c->invalid++;
    printf("  %s: %s\n", unsupported ? "UNSUPPORTED" : "FAILED", text);
}

static void print_duplicate(void *arg, const char *name, const char *const *label_names,
                            const char *const *label_values, size_t label_count)
{
    FILE *out = arg;
    fprintf(out, "Metric: %s\nLabel(s):\n", name);
    for (size_t i = 0; i < label_count; i++)
        fprintf(out, "\t%s: %s\n", label_names[i], label_values[i]);
}

/* promtool's duplicate-rules lint, worded as promtool words it (on stderr,
 * instead of the SUCCESS line). Returns true when it found something. */
static bool lint_duplicates(const tw_ruleset *rs)
{
    size_t count;
    if (tw_ruleset_duplicates(rs, NULL, NULL, &count) != TW_OK || count == 0)
        return false;
    fprintf(stderr, "  FAILED:\nlint error %zu duplicate rule(s) found.\n", count);
    tw_ruleset_duplicates(rs, print_duplicate, stderr, &count);
    fprintf(stderr, "Might cause inconsistency while recording expressions\n");
    return true;
}

/* Exit statuses of check: promtool's (1 for anything invalid, unreadable or
 * mistyped, 3 for a lint with --lint-fatal), and one of ours for files that
 * are valid for Prometheus but hold what trainwatch does not evaluate. */
enum {
    CHECK_OK = 0,
    CHECK_FAILED = 1, /* promtool's failureExitCode */
    CHECK_LINT = 3,   /* promtool's lintErrExitCode */
    CHECK_UNSUPPORTED = 4,
};

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

/* The file's actions: section (trainwatch's own): each bad one printed;
 * false when there was one. */
static bool actions_valid(const tw_ruleset *rs, size_t *count)
{
    const tw_rule_action *actions;
    size_t bad = 0;
    *count = tw_ruleset_actions(rs, &actions);
    for (size_t i = 0; i < *count; i++) {
        char err[600];
        if (tw_actions_check(actions[i].spec, actions[i].where, err, sizeof err) != TW_OK && ++bad)
            printf("  FAILED: %s\n", err);
    }
    return bad == 0;
}

/* Checks one file: CHECK_OK, CHECK_FAILED or CHECK_UNSUPPORTED, with
 * *linted set when the lint found something. */
static int check_file(const char *path, bool lint, bool *linted)
{
    tw_ruleset *rs;
    if (tw_ruleset_new(&rs) != TW_OK)
        return CHECK_FAILED;
    printf("Checking %s\n", path);
    fflush(stdout); /* promtool's order when stdout and stderr are one terminal */
    check_counts c = {0};
    int rc = tw_ruleset_load_file(rs, path, print_problem, &c);
    bool found = (rc == TW_OK || rc == TW_EUNSUPPORTED) && lint && lint_duplicates(rs);
    int status = CHECK_OK;
    *linted |= found;
    size_t actions = 0;
    if (rc == TW_OK && !actions_valid(rs, &actions)) {
        status = CHECK_FAILED;
    } else if (rc == TW_OK) {
        if (!found)
            printf("  SUCCESS: %zu rules found\n", tw_ruleset_rule_count(rs));
        if (actions)
            printf("  and %zu action%s (trainwatch's own: rules export leaves them out)\n", actions,
                   actions == 1 ? "" : "s");
    } else if (c.invalid == 0 && c.unsupported > 0) {
        printf("  valid for Prometheus, but %zu construct%s not evaluated by trainwatch\n", c.unsupported,
               c.unsupported == 1 ? " is" : "s are");
        status = CHECK_UNSUPPORTED;
    } else {
        if (c.invalid == 0) /* an I/O error, already printed by the loader */
            printf("  FAILED: %s\n", tw_strerror(rc));
        status = CHECK_FAILED;
    }
    printf("\n");
    tw_ruleset_free(rs);
    return status;
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
            return CHECK_OK;
        } else {
            fprintf(stderr, "trainwatch rules check: unknown or incomplete option '%s' (--lint=all|duplicate-rules|none, "
                            "--lint-fatal)\n", argv[optind - 1]);
            return CHECK_FAILED;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "trainwatch rules check: no rule files (trainwatch rules check FILE...)\n");
        return CHECK_FAILED;
    }
    bool invalid = false, unsupported = false, linted = false;
    for (int i = optind; i < argc; i++) {
        int status = check_file(argv[i], lint, &linted);
        invalid |= status == CHECK_FAILED;
        unsupported |= status == CHECK_UNSUPPORTED;
    }
    if (invalid)
        return CHECK_FAILED;
    if (linted && fatal)
        return CHECK_LINT;
    return unsupported ? CHECK_UNSUPPORTED : CHECK_OK;
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
    static const struct option longopts[] = {
        {"rules", 1, 0, 'r'},       {"no-default-rules", 0, 0, 'n'}, {"output", 1, 0, 'o'},
        {"runbook-base", 1, 0, 'b'}, {0, 0, 0, 0}};
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
        case 'n': defaults = false; break;
        case 'o': output = optarg; break;
        case 'b': runbook_base = optarg; break;
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
