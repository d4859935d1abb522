/*
 * lint.c: promtool's duplicate-rules lint over a loaded ruleset: rules,
 * alerting or recording, in any group, that share a name and the same
 * labels (as written, before templating). Sorted and reported the way
 * `promtool check rules` does, so `trainwatch rules check` prints the same.
 */
#include <stdlib.h>
#include <string.h>

#include "ruleset.h"
#include "trainwatch/error.h"

typedef struct rule_key {
    const char *name;
    const tw_rule_pair **labels;  /* sorted by name */
    size_t label_count;
} rule_key;

static int by_label_name(const void *a, const void *b)
{
    const tw_rule_pair *x = *(const tw_rule_pair *const *)a, *y = *(const tw_rule_pair *const *)b;
    return strcmp(x->name, y->name);
}

/* Prometheus's ordering: the name, then labels.Compare (pair by pair, name
 * then value; a prefix first). */
static int compare_keys(const rule_key *a, const rule_key *b)
{
    int c = strcmp(a->name, b->name);
    for (size_t i = 0; c == 0 && i < a->label_count && i < b->label_count; i++) {
        c = strcmp(a->labels[i]->name, b->labels[i]->name);
        if (c == 0)
            c = strcmp(a->labels[i]->text, b->labels[i]->text);
    }
    if (c == 0 && a->label_count != b->label_count)
        c = a->label_count < b->label_count ? -1 : 1;
    return c;
}

static int by_key(const void *a, const void *b) { return compare_keys(a, b); }

static int report(const rule_key *k, tw_rule_duplicate_fn fn, void *arg)
{
    size_t n = k->label_count;
    const char **names = malloc((n ? n : 1) * sizeof *names), **values = malloc((n ? n : 1) * sizeof *values);
    if (!names || !values) {
        free(names);
        free(values);
        return TW_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        names[i] = k->labels[i]->name;
        values[i] = k->labels[i]->text;
    }
    fn(arg, k->name, names, values, n);
    free(names);
    free(values);
    return TW_OK;
}

int tw_ruleset_duplicates(const tw_ruleset *rs, tw_rule_duplicate_fn fn, void *arg, size_t *count)
{
    *count = 0;
    size_t total = tw_ruleset_rule_count(rs), labels = 0, k = 0;
    for (size_t g = 0; g < rs->group_count; g++) {
        for (size_t i = 0; i < rs->groups[g].rule_count; i++)
            labels += rs->groups[g].rules[i].label_count;
    }
    rule_key *keys = calloc(total ? total : 1, sizeof *keys);
    const tw_rule_pair **pairs = calloc(labels ? labels : 1, sizeof *pairs);
    if (!keys || !pairs) {
        free(keys);
        free(pairs);
        return TW_ENOMEM;
    }
    const tw_rule_pair **next = pairs;
    for (size_t g = 0; g < rs->group_count; g++) {
        for (size_t i = 0; i < rs->groups[g].rule_count; i++) {
            const tw_rule *r = &rs->groups[g].rules[i];
            keys[k] = (rule_key){r->alert ? r->alert : r->record, next, r->label_count};
            for (size_t l = 0; l < r->label_count; l++)
                *next++ = &r->labels[l];
            qsort(keys[k].labels, keys[k].label_count, sizeof *keys[k].labels, by_label_name);
            k++;
        }
    }
    qsort(keys, k, sizeof *keys, by_key);
    const rule_key *last = NULL;
    int rc = TW_OK;
    for (size_t i = 0; i + 1 < k && rc == TW_OK; i++) {
        if (compare_keys(&keys[i], &keys[i + 1]) != 0 || (last && compare_keys(last, &keys[i]) == 0))
            continue;
        last = &keys[i];
        (*count)++;
        if (fn)
            rc = report(last, fn, arg);
    }
    free(keys);
    free(pairs);
    return rc;
}
