/*
 * check.c: `trainwatch rules check` of one rule file, worded the way
 * `promtool check rules` words it ("Checking FILE", "  SUCCESS: N rules
 * found", "  FAILED: ...", the duplicate-rules lint on stderr), plus what
 * trainwatch adds: the constructs its evaluator would refuse (UNSUPPORTED)
 * and the file's actions: section, each entry checked by the caller's
 * validator (the actions folder's tw_actions_check: rules/ does not depend
 * on actions/). cli/cmd_rules.c reads the options and sums the statuses up.
 */
#include <stdio.h>

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

/* The file's actions: section (trainwatch's own): each bad one printed;
 * false when there was one. */
static bool actions_valid(const tw_ruleset *rs, tw_rule_action_check_fn check, size_t *count)
{
    const tw_rule_action *actions;
    size_t bad = 0;
    *count = tw_ruleset_actions(rs, &actions);
    for (size_t i = 0; i < *count; i++) {
        char err[600];
        if (check && check(actions[i].spec, actions[i].where, err, sizeof err) != TW_OK && ++bad)
            printf("  FAILED: %s\n", err);
    }
    return bad == 0;
}

int tw_rules_check_file(const char *path, bool lint, tw_rule_action_check_fn check, bool *linted)
{
    tw_ruleset *rs;
    if (tw_ruleset_new(&rs) != TW_OK)
        return TW_RULES_CHECK_FAILED;
    printf("Checking %s\n", path);
    fflush(stdout); /* promtool's order when stdout and stderr are one terminal */
    check_counts c = {0};
    int rc = tw_ruleset_load_file(rs, path, print_problem, &c);
    bool found = (rc == TW_OK || rc == TW_EUNSUPPORTED) && lint && lint_duplicates(rs);
    int status = TW_RULES_CHECK_OK;
    *linted |= found;
    size_t actions = 0;
    if (rc == TW_OK && !actions_valid(rs, check, &actions)) {
        status = TW_RULES_CHECK_FAILED;
    } else if (rc == TW_OK) {
        if (!found)
            printf("  SUCCESS: %zu rules found\n", tw_ruleset_rule_count(rs));
        if (actions)
            printf("  and %zu action%s (trainwatch's own: rules export leaves them out)\n", actions,
                   actions == 1 ? "" : "s");
    } else if (c.invalid == 0 && c.unsupported > 0) {
        printf("  valid for Prometheus, but %zu construct%s not evaluated by trainwatch\n", c.unsupported,
               c.unsupported == 1 ? " is" : "s are");
        status = TW_RULES_CHECK_UNSUPPORTED;
    } else {
        if (c.invalid == 0) /* an I/O error, already printed by the loader */
            printf("  FAILED: %s\n", tw_strerror(rc));
        status = TW_RULES_CHECK_FAILED;
    }
    printf("\n");
    tw_ruleset_free(rs);
    return status;
}
