/*
 * ruleset.h: the loaded form of rule files, shared by the loader
 * (rulefile.c), the exporter (export.c) and the engine (engine.c).
 */
#ifndef TW_RULES_RULESET_H
#define TW_RULES_RULESET_H

#include "labels.h"
#include "promql.h"
#include "template.h"
#include "trainwatch/rules.h"

typedef struct tw_rule_pair {
    char *name;
    char *text;           /* as written (exported verbatim) */
    tw_template *tmpl;    /* compiled */
} tw_rule_pair;

typedef struct tw_active_alert tw_active_alert;

typedef struct tw_rule {
    char *alert;          /* exactly one of alert and record */
    char *record;
    char *expr_text;
    tw_pq_node *expr;
    int64_t for_ms, keep_firing_ms;
    bool has_for, has_keep_firing;
    tw_rule_pair *labels, *annotations;
    size_t label_count, annotation_count;
    char *file;
    int line;
    /* engine state */
    tw_active_alert *active;
    size_t active_count, active_cap;
    bool failing;
} tw_rule;

typedef struct tw_rule_group {
    char *name;
    char *file;
    int64_t interval_ms;  /* 0: the default */
    bool has_interval;
    long limit;
    tw_rule *rules;
    size_t rule_count;
    int64_t next_ms;      /* engine: next evaluation */
} tw_rule_group;

struct tw_ruleset {
    tw_rule_group *groups;
    size_t group_count;
    tw_rule_action *actions; /* the files' actions: sections (not Prometheus's) */
    size_t action_count;
};

/* Prometheus durations: 1h30m, 5m, 250ms, 0; false when malformed. */
bool tw_parse_duration(const char *s, int64_t *ms);
/* Prometheus's model.Duration text for ms (e.g. 1h30m, 5m, 250ms, 0s). */
void tw_format_duration(int64_t ms, char *out, size_t cap);

#endif
