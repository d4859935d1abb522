/*
 * labels.h: label sets for the rule evaluator (see promql.h).
 *
 * A tw_lset is an owned array of name/value pairs kept sorted by name, with
 * the metric name stored as the label "__name__" like Prometheus does. Every
 * function that returns a new set allocates it; the caller frees it with
 * tw_lset_free. Functions returning int give TW_OK or TW_ENOMEM.
 */
#ifndef TW_RULES_LABELS_H
#define TW_RULES_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TW_NAME_LABEL "__name__"

typedef struct tw_label {
    char *name;
    char *value;
} tw_label;

typedef struct tw_lset {
    size_t count;
    tw_label *items;
} tw_lset;

typedef struct tw_name_list {
    size_t count;
    char **names;
} tw_name_list;

void tw_lset_free(tw_lset *s);
int tw_lset_copy(const tw_lset *from, tw_lset *to);
/* Sets (adds or replaces) a label; an empty value removes it, as in PromQL. */
int tw_lset_set(tw_lset *s, const char *name, const char *value);
void tw_lset_del(tw_lset *s, const char *name);
const char *tw_lset_get(const tw_lset *s, const char *name);
bool tw_lset_equal(const tw_lset *a, const tw_lset *b);
/* Keeps only the named labels (keep) or drops them (!keep). */
void tw_lset_filter(tw_lset *s, const tw_name_list *names, bool keep);
/* Canonical text: name{a="x",b="y"} (no name: {a="x"}); NULL on no memory. */
char *tw_lset_text(const tw_lset *s);
/* A signature over the labels a vector match looks at. */
uint64_t tw_lset_signature(const tw_lset *s, const tw_name_list *names, bool on);
uint64_t tw_lset_hash(const tw_lset *s);

bool tw_name_list_has(const tw_name_list *l, const char *name);
void tw_name_list_free(tw_name_list *l);

bool tw_valid_metric_name(const char *s);
bool tw_valid_label_name(const char *s);

#endif
