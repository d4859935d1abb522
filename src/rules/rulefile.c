/*
 * rulefile.c: loads Prometheus rule files into a tw_ruleset (see rules.h).
 *
 * libyaml builds the document; the loader walks it with the checks of
 * Prometheus's rulefmt (model/rulefmt/rulefmt.go): strict fields, unique
 * group names, one of record/alert, valid names, templates that compile,
 * and no for/keep_firing_for/annotations on recording rules. Every problem
 * is reported with FILE:LINE and loading goes on, so one run lists them all.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "../core/yaml_load.h"
#include "ruleset.h"
#include "trainwatch/error.h"

#define RULE_FILE_MAX ((size_t)TW_YAML_MAX_SIZE)
#define RULES_MAX 10000 /* YAML aliases could otherwise repeat a group without end */

typedef struct loader {
    const char *file;
    yaml_document_t *doc;
    tw_rule_problem_fn report;
    void *arg;
    int status;
    size_t *rule_total;
} loader;

static void report_problem(loader *l, size_t line, int status, const char *fmt, va_list ap)
{
    char text[1024];
    int n = snprintf(text, sizeof text, "%s:%zu: ", l->file, line);
    vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    /* an invalid file outranks one that is only unsupported */
    if (l->status == TW_OK || (status == TW_ECONFIG && l->status == TW_EUNSUPPORTED))
        l->status = status;
    if (l->report)
        l->report(l->arg, text, status == TW_EUNSUPPORTED);
}

static void problem(loader *l, const yaml_node_t *at, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void problem_at_line(loader *l, size_t line, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Reports a problem at a node (NULL: line 0, the file as a whole). */
static void problem(loader *l, const yaml_node_t *at, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report_problem(l, at ? at->start_mark.line + 1 : 0, status, fmt, ap);
    va_end(ap);
}

static void problem_at_line(loader *l, size_t line, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report_problem(l, line, status, fmt, ap);
    va_end(ap);
}

/* ---- durations ------------------------------------------------------ */

bool tw_parse_duration(const char *s, int64_t *ms)
{
    if (!strcmp(s, "0")) {
        *ms = 0;
        return true;
    }
    size_t n = tw_pq_scan_duration(s, ms);
    return n > 0 && s[n] == '\0';
}

void tw_format_duration(int64_t ms, char *out, size_t cap)
{
    if (ms == 0) {
        snprintf(out, cap, "0s");
        return;
    }
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"y", 31536000000LL}, {"w", 604800000}, {"d", 86400000}, {"h", 3600000},
                 {"m", 60000},         {"s", 1000},      {"ms", 1}};
    size_t n = 0;
    out[0] = '\0';
    for (size_t u = 0; u < sizeof units / sizeof units[0] && n < cap; u++) {
        if (ms >= units[u].ms) {
            int w = snprintf(out + n, cap - n, "%lld%s", (long long)(ms / units[u].ms), units[u].unit);
            if (w < 0)
                return;
            n += (size_t)w;
            ms %= units[u].ms;
        }
    }
}

/* ---- YAML helpers --------------------------------------------------- */

static yaml_node_t *node_at(loader *l, int index) { return yaml_document_get_node(l->doc, index); }

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool expect_type(loader *l, const yaml_node_t *n, yaml_node_type_t type, const char *what)
{
    if (n && n->type == type)
        return true;
    problem(l, n, TW_ECONFIG, "%s must be a %s", what,
            type == YAML_MAPPING_NODE ? "mapping" : type == YAML_SEQUENCE_NODE ? "list" : "string");
    return false;
}

/* YAML allows a key twice; Prometheus's parser does not, and neither do we. */
static bool repeated_key(loader *l, const yaml_node_t *map, const yaml_node_pair_t *at)
{
    const char *key = scalar(node_at(l, at->key));
    for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; key && p < at; p++) {
        const char *other = scalar(node_at(l, p->key));
        if (other && !strcmp(other, key)) {
            problem(l, node_at(l, at->key), TW_ECONFIG, "mapping key \"%s\" already defined", key);
            return true;
        }
    }
    return false;
}

static char *dup_scalar(loader *l, const yaml_node_t *n, const char *what)
{
    if (!expect_type(l, n, YAML_SCALAR_NODE, what))
        return NULL;
    char *s = strdup(scalar(n));
    if (!s)
        problem(l, n, TW_ENOMEM, "out of memory");
    return s;
}

static bool duration_field(loader *l, const yaml_node_t *n, const char *what, int64_t *ms)
{
    const char *s = scalar(n);
    if (!s || !tw_parse_duration(s, ms)) {
        problem(l, n, TW_ECONFIG, "%s: not a valid duration string: \"%s\"", what, s ? s : "");
        return false;
    }
    return true;
}

static void free_pairs(tw_rule_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(p[i].name);
        free(p[i].text);
        tw_template_free(p[i].tmpl);
    }
    free(p);
}

/* labels: or annotations: a mapping of names to templates */
static void load_pairs(loader *l, const yaml_node_t *map, const char *what, tw_rule_pair **out, size_t *count)
{
    if (!expect_type(l, map, YAML_MAPPING_NODE, what))
        return;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(l, p->key), *v = node_at(l, p->value);
        const char *name = scalar(k), *text = scalar(v);
        if (repeated_key(l, map, p))
            continue;
        if (!name || !text) {
            problem(l, k, TW_ECONFIG, "%s: names and values must be strings", what);
            continue;
        }
        if (!tw_valid_label_name(name) || !strcmp(name, TW_NAME_LABEL)) {
            problem(l, k, TW_ECONFIG, "invalid %s name: %s", !strcmp(what, "labels") ? "label" : "annotation", name);
            continue;
        }
        char err[256];
        tw_template *t = NULL;
        int rc = tw_template_compile(text, &t, err, sizeof err);
        if (rc != TW_OK) {
            problem(l, v, rc == TW_EUNSUPPORTED ? TW_EUNSUPPORTED : TW_ECONFIG, "%s %s: template: %s", what, name, err);
            continue;
        }
        tw_rule_pair *grown = realloc(*out, (*count + 1) * sizeof *grown);
        if (!grown) {
            tw_template_free(t);
            problem(l, k, TW_ENOMEM, "out of memory");
            return;
        }
        *out = grown;
        grown[*count] = (tw_rule_pair){strdup(name), strdup(text), t};
        (*count)++;
    }
}

static void free_rule(tw_rule *r)
{
    free(r->alert);
    free(r->record);
    free(r->expr_text);
    tw_pq_free(r->expr);
    free_pairs(r->labels, r->label_count);
    free_pairs(r->annotations, r->annotation_count);
    free(r->file);
    free(r->active); /* engine state is freed by the engine first */
}

static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p >> 5) == 6 ? 1 : (*p >> 4) == 14 ? 2 : (*p >> 3) == 30 ? 3 : -1;
        if (n < 0)
            return false;
        p++;
        for (int i = 0; i < n; i++, p++) {
            if ((*p & 0xc0) != 0x80)
                return false;
        }
    }
    return true;
}

static void load_expr(loader *l, tw_rule *r, const yaml_node_t *n)
{
    char err[512];
    int rc = tw_pq_parse(r->expr_text, &r->expr, err, sizeof err);
    if (rc != TW_OK) {
        problem(l, n, rc == TW_EUNSUPPORTED ? TW_EUNSUPPORTED : TW_ECONFIG, "%s %s: expr: %s%s",
                r->alert ? "alert" : "record", r->alert ? r->alert : r->record,
                rc == TW_EUNSUPPORTED ? "not evaluated by trainwatch: " : "could not parse expression: ", err);
        return;
    }
    if (r->expr->type != TW_PQ_VECTOR && r->expr->type != TW_PQ_SCALAR) {
        problem(l, n, TW_ECONFIG, "%s: expr must be an instant vector or a scalar", r->alert ? r->alert : r->record);
        tw_pq_free(r->expr);
        r->expr = NULL;
    }
}

static bool load_rule(loader *l, const yaml_node_t *map, tw_rule *r)
{
    if (!expect_type(l, map, YAML_MAPPING_NODE, "a rule"))
        return false;
    r->line = (int)map->start_mark.line + 1;
    r->file = strdup(l->file);
    const yaml_node_t *expr_node = NULL, *for_node = NULL, *keep_node = NULL, *ann_node = NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(l, p->key), *v = node_at(l, p->value);
        const char *key = scalar(k);
        if (repeated_key(l, map, p))
            continue;
        if (!key) {
            problem(l, k, TW_ECONFIG, "rule field names must be strings");
        } else if (!strcmp(key, "alert")) {
            r->alert = dup_scalar(l, v, "alert");
        } else if (!strcmp(key, "record")) {
            r->record = dup_scalar(l, v, "record");
        } else if (!strcmp(key, "expr")) {
            r->expr_text = dup_scalar(l, v, "expr");
            expr_node = v;
        } else if (!strcmp(key, "for")) {
            r->has_for = duration_field(l, v, "for", &r->for_ms);
            for_node = v;
        } else if (!strcmp(key, "keep_firing_for")) {
            r->has_keep_firing = duration_field(l, v, "keep_firing_for", &r->keep_firing_ms);
            keep_node = v;
        } else if (!strcmp(key, "labels")) {
            load_pairs(l, v, "labels", &r->labels, &r->label_count);
        } else if (!strcmp(key, "annotations")) {
            load_pairs(l, v, "annotations", &r->annotations, &r->annotation_count);
            ann_node = v;
        } else {
            problem(l, k, TW_ECONFIG, "field %s not found in type rulefmt.Rule", key);
        }
    }
    if ((r->alert != NULL) == (r->record != NULL)) {
        problem(l, map, TW_ECONFIG, r->alert ? "only one of 'record' and 'alert' must be set"
                                             : "one of 'record' or 'alert' must be set");
        return false;
    }
    if (!r->expr_text || !*r->expr_text) {
        problem(l, map, TW_ECONFIG, "field 'expr' must be set in rule");
        return false;
    }
    if (r->record) {
        if (ann_node)
            problem(l, ann_node, TW_ECONFIG, "invalid field 'annotations' in recording rule");
        if (for_node)
            problem(l, for_node, TW_ECONFIG, "invalid field 'for' in recording rule");
        if (keep_node)
            problem(l, keep_node, TW_ECONFIG, "invalid field 'keep_firing_for' in recording rule");
        if (!tw_valid_metric_name(r->record))
            problem(l, map, TW_ECONFIG, "invalid recording rule name: %s", r->record);
    } else if (!*r->alert || !valid_utf8(r->alert)) {
        problem(l, map, TW_ECONFIG, "invalid alert name: %s", r->alert);
    }
    load_expr(l, r, expr_node);
    return true;
}

static void free_group(tw_rule_group *g)
{
    for (size_t i = 0; i < g->rule_count; i++)
        free_rule(&g->rules[i]);
    free(g->rules);
    free(g->name);
    free(g->file);
}

static bool load_group(loader *l, const yaml_node_t *map, tw_rule_group *g)
{
    if (!expect_type(l, map, YAML_MAPPING_NODE, "a group"))
        return false;
    g->file = strdup(l->file);
    const yaml_node_t *rules = NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(l, p->key), *v = node_at(l, p->value);
        const char *key = scalar(k);
        if (repeated_key(l, map, p))
            continue;
        if (!key) {
            problem(l, k, TW_ECONFIG, "group field names must be strings");
        } else if (!strcmp(key, "name")) {
            g->name = dup_scalar(l, v, "group name");
        } else if (!strcmp(key, "interval")) {
            g->has_interval = duration_field(l, v, "interval", &g->interval_ms);
            if (g->has_interval && g->interval_ms == 0) {
                problem(l, v, TW_ECONFIG, "interval: must be greater than 0");
                g->has_interval = false;
            }
        } else if (!strcmp(key, "limit")) {
            const char *s = scalar(v);
            char *end = NULL;
            g->limit = s ? strtol(s, &end, 10) : -1;
            if (!s || *end || g->limit < 0)
                problem(l, v, TW_ECONFIG, "limit must be a non-negative integer");
        } else if (!strcmp(key, "rules")) {
            rules = v;
        } else {
            problem(l, k, TW_ECONFIG, "field %s not found in type rulefmt.RuleGroup", key);
        }
    }
    if (!g->name || !*g->name) {
        problem(l, map, TW_ECONFIG, "Groupname must not be empty");
        return false;
    }
    if (!rules)
        return true;
    if (rules->type == YAML_SCALAR_NODE && !*scalar(rules))
        return true; /* rules: (empty) */
    if (!expect_type(l, rules, YAML_SEQUENCE_NODE, "rules"))
        return true;
    size_t n = (size_t)(rules->data.sequence.items.top - rules->data.sequence.items.start);
    if (n > RULES_MAX || *l->rule_total + n > RULES_MAX) {
        problem(l, rules, TW_ECONFIG, "more than %d rules", RULES_MAX);
        return true;
    }
    *l->rule_total += n;
    g->rules = calloc(n ? n : 1, sizeof *g->rules);
    if (!g->rules) {
        problem(l, rules, TW_ENOMEM, "out of memory");
        return true;
    }
    for (yaml_node_item_t *it = rules->data.sequence.items.start; it < rules->data.sequence.items.top; it++) {
        tw_rule *r = &g->rules[g->rule_count++];
        load_rule(l, node_at(l, *it), r);
    }
    return true;
}

/* actions: - {alert: SELECTOR, action: ACTION, cooldown: DURATION} */
static void load_action(loader *l, tw_ruleset *rs, const yaml_node_t *map)
{
    if (!expect_type(l, map, YAML_MAPPING_NODE, "an action"))
        return;
    const char *alert = NULL, *action = NULL;
    int64_t cooldown_ms = -1;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(l, p->key), *v = node_at(l, p->value);
        const char *key = scalar(k);
        if (repeated_key(l, map, p))
            continue;
        if (key && !strcmp(key, "alert"))
            alert = scalar(v);
        else if (key && !strcmp(key, "action"))
            action = scalar(v);
        else if (key && !strcmp(key, "cooldown"))
            (void)duration_field(l, v, "cooldown", &cooldown_ms);
        else
            problem(l, k, TW_ECONFIG, "field %s not found in an action (alert, action, cooldown)", key ? key : "?");
    }
    if (!alert || !*alert || !action || !*action) {
        problem(l, map, TW_ECONFIG, "an action needs alert: (a name, with optional {matchers}) and action:");
        return;
    }
    tw_rule_action *grown = realloc(rs->actions, (rs->action_count + 1) * sizeof *grown);
    if (!grown) {
        problem(l, map, TW_ENOMEM, "out of memory");
        return;
    }
    rs->actions = grown;
    tw_rule_action *a = &rs->actions[rs->action_count];
    size_t n = strlen(alert) + strlen(action) + 2, w = strlen(l->file) + 24;
    a->spec = malloc(n);
    a->where = malloc(w);
    if (!a->spec || !a->where) {
        free(a->spec);
        free(a->where);
        problem(l, map, TW_ENOMEM, "out of memory");
        return;
    }
    snprintf(a->spec, n, "%s=%s", alert, action);
    snprintf(a->where, w, "%s:%zu", l->file, map->start_mark.line + 1);
    a->cooldown = cooldown_ms < 0 ? -1 : (double)cooldown_ms / 1000;
    rs->action_count++;
}

static void load_actions(loader *l, tw_ruleset *rs, const yaml_node_t *list)
{
    if (!list || (list->type == YAML_SCALAR_NODE && !*scalar(list)))
        return;
    if (!expect_type(l, list, YAML_SEQUENCE_NODE, "actions"))
        return;
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
        if (rs->action_count >= RULES_MAX) {
            problem(l, list, TW_ECONFIG, "more than %d actions", RULES_MAX);
            return;
        }
        load_action(l, rs, node_at(l, *it));
    }
}

static void free_actions(tw_ruleset *rs, size_t from)
{
    for (size_t i = from; i < rs->action_count; i++) {
        free(rs->actions[i].spec);
        free(rs->actions[i].where);
    }
    rs->action_count = from;
}

size_t tw_ruleset_actions(const tw_ruleset *rs, const tw_rule_action **out)
{
    *out = rs->actions;
    return rs->action_count;
}

static void load_document(loader *l, tw_ruleset *rs, size_t first_group)
{
    yaml_node_t *root = yaml_document_get_root_node(l->doc);
    if (!root)
        return; /* an empty file has no groups */
    if (!expect_type(l, root, YAML_MAPPING_NODE, "a rule file"))
        return;
    const yaml_node_t *groups = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        const char *key = scalar(node_at(l, p->key));
        if (repeated_key(l, root, p))
            continue;
        if (key && !strcmp(key, "groups"))
            groups = node_at(l, p->value);
        else if (key && !strcmp(key, "actions"))
            load_actions(l, rs, node_at(l, p->value));
        else
            problem(l, node_at(l, p->key), TW_ECONFIG, "field %s not found in type rulefmt.RuleGroups", key ? key : "?");
    }
    if (!groups || (groups->type == YAML_SCALAR_NODE && !*scalar(groups)))
        return;
    if (!expect_type(l, groups, YAML_SEQUENCE_NODE, "groups"))
        return;
    for (yaml_node_item_t *it = groups->data.sequence.items.start; it < groups->data.sequence.items.top; it++) {
        if (rs->group_count - first_group >= RULES_MAX) {
            problem(l, groups, TW_ECONFIG, "more than %d groups", RULES_MAX);
            return;
        }
        tw_rule_group *grown = realloc(rs->groups, (rs->group_count + 1) * sizeof *grown);
        if (!grown) {
            problem(l, groups, TW_ENOMEM, "out of memory");
            return;
        }
        rs->groups = grown;
        tw_rule_group *g = &rs->groups[rs->group_count];
        *g = (tw_rule_group){0};
        yaml_node_t *gn = node_at(l, *it);
        if (!load_group(l, gn, g)) {
            free_group(g);
            continue;
        }
        for (size_t i = first_group; i < rs->group_count; i++) {
            if (!strcmp(rs->groups[i].name, g->name))
                problem(l, gn, TW_ECONFIG, "%d:%d: groupname: \"%s\" is repeated in the same file",
                        (int)gn->start_mark.line + 1, (int)gn->start_mark.column + 1, g->name);
        }
        rs->group_count++;
    }
}

/* ---- public --------------------------------------------------------- */

int tw_ruleset_new(tw_ruleset **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? TW_OK : TW_ENOMEM;
}

void tw_ruleset_free(tw_ruleset *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->group_count; i++)
        free_group(&rs->groups[i]);
    free(rs->groups);
    free_actions(rs, 0);
    free(rs->actions);
    free(rs);
}

size_t tw_ruleset_group_count(const tw_ruleset *rs) { return rs->group_count; }

size_t tw_ruleset_rule_count(const tw_ruleset *rs)
{
    size_t n = 0;
    for (size_t i = 0; i < rs->group_count; i++)
        n += rs->groups[i].rule_count;
    return n;
}

int tw_ruleset_load_text(tw_ruleset *rs, const char *name, const char *text, size_t len, tw_rule_problem_fn report,
                         void *arg)
{
    size_t total = tw_ruleset_rule_count(rs);
    loader l = {.file = name, .report = report, .arg = arg, .status = TW_OK, .rule_total = &total};
    if (memchr(text, '\0', len)) {
        problem(&l, NULL, TW_ECONFIG, "not a YAML rule file (binary data)");
        return l.status;
    }
    yaml_document_t doc;
    tw_yaml_problem bad;
    size_t further;
    int loaded = tw_yaml_load(text, len, &doc, &further, &bad);
    if (loaded != TW_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s:%zu:%zu: YAML: %s", name, bad.line, bad.column, bad.text);
        if (report && loaded == TW_ECONFIG)
            report(arg, msg, false);
        return loaded;
    }
    l.doc = &doc;
    size_t before = rs->group_count, actions_before = rs->action_count;
    load_document(&l, rs, before);
    if (further) /* a second document in the file is not a rule file either */
        problem_at_line(&l, further, TW_ECONFIG, "more than one YAML document in a rule file");
    yaml_document_delete(&doc);
    if (l.status != TW_OK && l.status != TW_EUNSUPPORTED) {
        /* all or nothing per file; rules only we cannot evaluate stay (for export) */
        for (size_t i = before; i < rs->group_count; i++)
            free_group(&rs->groups[i]);
        rs->group_count = before;
        free_actions(rs, actions_before);
    }
    return l.status;
}

int tw_ruleset_load_file(tw_ruleset *rs, const char *path, tw_rule_problem_fn report, void *arg)
{
    FILE *f = fopen(path, "rb");
    char msg[1024];
    if (!f) {
        int rc = tw_status_from_errno(errno);
        snprintf(msg, sizeof msg, "%s: %s", path, strerror(errno));
        if (report)
            report(arg, msg, false);
        return rc;
    }
    char *text = malloc(RULE_FILE_MAX + 1);
    size_t len = text ? fread(text, 1, RULE_FILE_MAX + 1, f) : 0;
    int read_error = ferror(f);
    fclose(f);
    if (!text)
        return TW_ENOMEM;
    int rc;
    if (read_error || len > RULE_FILE_MAX) {
        snprintf(msg, sizeof msg, "%s: %s", path, read_error ? "read error" : "larger than 16 MiB: not a rule file");
        if (report)
            report(arg, msg, false);
        rc = read_error ? TW_EIO : TW_ECONFIG;
    } else {
        rc = tw_ruleset_load_text(rs, path, text, len, report, arg);
    }
    free(text);
    return rc;
}
