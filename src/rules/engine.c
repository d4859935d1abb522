/*
 * engine.c: evaluates rule groups over a registry's samples (see rules.h).
 *
 * Each tick, the groups that are due sample the registry into the store (one
 * slot, only the metric names the rules read), then evaluate their rules in
 * order: recording rules write their results back into the slot, so later
 * rules see them as Prometheus's do; alerting rules update their active
 * alerts with Prometheus's state machine (rules/alerting.go): a new result is
 * pending, firing once held for `for`, kept firing for `keep_firing_for`
 * after it disappears, then resolved and kept 15 minutes to be re-sent.
 * Alerts are handed to the sink when they need sending: firing ones every
 * resend delay, with endsAt 4 x max(interval, resend delay) ahead, and
 * resolved ones each evaluation after they resolve.
 *
 * Samples get the target labels a scraping Prometheus would give them, and
 * sent alerts its external labels, so an alert from here and the same rule's
 * in that Prometheus have one label set (Alertmanager's identity of an
 * alert). A mutex lets the /alerts page read the state from the HTTP thread.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/json.h"
#include "../core/say.h"
#include "ruleset.h"
#include "trainwatch/error.h"

#define RESOLVED_RETENTION_MS (15 * 60 * 1000)
#define SLOTS_MAX 65536
#define ALERTS_PER_RULE_MAX 1000

struct tw_active_alert {
    tw_lset labels;       /* alert labels, alertname included */
    tw_lset annotations;
    uint64_t fingerprint;
    enum { ALERT_INACTIVE, ALERT_PENDING, ALERT_FIRING } state;
    double value;
    int64_t active_at, fired_at, resolved_at, last_sent_at, keep_firing_since;
    bool seen;            /* in this evaluation's result */
};

struct tw_alerting {
    tw_ruleset *rs;
    tw_store *store;
    tw_registry *registry;
    int64_t default_interval_ms, resend_ms;
    char *generator_url;
    tw_alert_sink_fn sink;
    void *sink_arg;
    FILE *log;
    size_t firing, fired_total;
    int64_t last_t;       /* the newest sample's time: the ring only moves forward */
    tw_family *f_alerts, *f_evals, *f_failures;
    tw_lset target, external; /* see tw_alerting_options */
    bool honor_labels;
    char *page_url;
    pthread_mutex_t lock; /* the state, between the ticking thread and tw_alerting_page */
};

/* ---- set-up ----------------------------------------------------------- */

typedef struct needs {
    tw_store *store;
    int64_t longest_ms;
    int status;
} needs;

static void note_selector(const tw_pq_node *sel, void *arg)
{
    needs *n = arg;
    int64_t span = sel->u.sel.range_ms + sel->u.sel.offset_ms;
    if (span > n->longest_ms)
        n->longest_ms = span;
    if (n->status == TW_OK && n->store)
        n->status = tw_store_want(n->store, sel->u.sel.metric);
}

static int64_t group_interval(const tw_alerting *a, const tw_rule_group *g)
{
    return g->has_interval ? g->interval_ms : a->default_interval_ms;
}

static int register_metrics(tw_alerting *a)
{
    const char *alert_labels[] = {"alertname", "alertstate"}, *group_labels[] = {"rule_group"};
    tw_family_options fo[] = {
        {.name = "trainwatch_alerts", .help = "Alerts of each rule by state (pending, firing), as Prometheus's ALERTS.",
         .type = TW_METRIC_GAUGE, .label_count = 2, .label_names = alert_labels},
        {.name = "trainwatch_rule_group_evaluations", .help = "Evaluations of each rule group.",
         .type = TW_METRIC_COUNTER, .label_count = 1, .label_names = group_labels},
        {.name = "trainwatch_rule_evaluation_failures", .help = "Rule evaluations that failed, by group.",
         .type = TW_METRIC_COUNTER, .label_count = 1, .label_names = group_labels},
    };
    tw_family **dst[] = {&a->f_alerts, &a->f_evals, &a->f_failures};
    for (size_t i = 0; i < 3; i++) {
        int rc = tw_family_register(a->registry, &fo[i], dst[i]);
        if (rc != TW_OK)
            return rc;
    }
    return TW_OK;
}

int tw_alerting_new(tw_ruleset *rs, const tw_alerting_options *o, tw_alerting **out)
{
    tw_alerting *a = calloc(1, sizeof *a);
    if (!a) {
        tw_ruleset_free(rs);
        return TW_ENOMEM;
    }
    a->rs = rs;
    a->registry = o->registry ? o->registry : tw_registry_default();
    a->default_interval_ms = (int64_t)((o->default_interval > 0 ? o->default_interval : 15) * 1000);
    a->resend_ms = (int64_t)((o->resend_delay > 0 ? o->resend_delay : 60) * 1000);
    a->sink = o->sink;
    a->sink_arg = o->sink_arg;
    a->log = o->log;
    a->generator_url = o->generator_url ? strdup(o->generator_url) : NULL;
    a->page_url = o->page_url ? strdup(o->page_url) : NULL;
    a->honor_labels = o->honor_labels;
    pthread_mutex_init(&a->lock, NULL);
    /* the ring holds the longest range (plus offset) and the lookback, at the shortest interval */
    needs n = {0};
    int64_t shortest = INT64_MAX;
    for (size_t i = 0; i < rs->group_count; i++) {
        int64_t iv = group_interval(a, &rs->groups[i]);
        if (iv < shortest)
            shortest = iv;
        for (size_t k = 0; k < rs->groups[i].rule_count; k++)
            tw_pq_walk_selectors(rs->groups[i].rules[k].expr, note_selector, &n);
    }
    size_t slots = 8;
    if (rs->group_count) {
        int64_t want = (n.longest_ms + TW_LOOKBACK_MS) / shortest + 4;
        slots = want > SLOTS_MAX ? SLOTS_MAX : (size_t)want;
    }
    int rc = tw_store_new(slots, &a->store);
    if (rc == TW_OK)
        rc = tw_store_want(a->store, "ALERTS");
    for (size_t i = 0; i < o->target_label_count && rc == TW_OK; i++)
        rc = tw_lset_set(&a->target, o->target_labels[i].name, o->target_labels[i].value);
    for (size_t i = 0; i < o->external_label_count && rc == TW_OK; i++)
        rc = tw_lset_set(&a->external, o->external_labels[i].name, o->external_labels[i].value);
    n.store = a->store;
    for (size_t i = 0; i < rs->group_count && rc == TW_OK; i++) {
        for (size_t k = 0; k < rs->groups[i].rule_count; k++) {
            tw_pq_walk_selectors(rs->groups[i].rules[k].expr, note_selector, &n);
            if (rs->groups[i].rules[k].record)
                n.status = n.status ? n.status : tw_store_want(a->store, rs->groups[i].rules[k].record);
        }
        rc = n.status;
    }
    if (rc == TW_OK)
        rc = register_metrics(a);
    if (rc != TW_OK) {
        tw_alerting_free(a);
        return rc;
    }
    *out = a;
    return TW_OK;
}

static void free_alert(tw_active_alert *al)
{
    tw_lset_free(&al->labels);
    tw_lset_free(&al->annotations);
}

void tw_alerting_free(tw_alerting *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->rs->group_count; i++) {
        for (size_t k = 0; k < a->rs->groups[i].rule_count; k++) {
            tw_rule *r = &a->rs->groups[i].rules[k];
            for (size_t j = 0; j < r->active_count; j++)
                free_alert(&r->active[j]);
            r->active_count = 0;
        }
    }
    tw_family *fams[] = {a->f_alerts, a->f_evals, a->f_failures};
    for (size_t i = 0; i < 3; i++) {
        if (fams[i])
            tw_family_unregister(fams[i]);
    }
    tw_ruleset_free(a->rs);
    tw_store_free(a->store);
    tw_lset_free(&a->target);
    tw_lset_free(&a->external);
    pthread_mutex_destroy(&a->lock);
    free(a->generator_url);
    free(a->page_url);
    free(a);
}

size_t tw_alerting_firing(const tw_alerting *a) { return a->firing; }
size_t tw_alerting_fired_total(const tw_alerting *a) { return a->fired_total; }

/* ---- sampling --------------------------------------------------------- */

static bool want_family(const char *family, tw_metric_type type, void *arg)
{
    const tw_store *s = ((const tw_alerting *)arg)->store;
    static const char *const suffixes[][4] = {
        [TW_METRIC_COUNTER] = {"_total"}, [TW_METRIC_GAUGE] = {""}, [TW_METRIC_HISTOGRAM] = {"_bucket", "_sum", "_count"},
        [TW_METRIC_INFO] = {"_info"}};
    char name[256];
    for (size_t i = 0; i < 4 && suffixes[type][i]; i++) {
        snprintf(name, sizeof name, "%s%s", family, suffixes[type][i]);
        if (tw_store_wants(s, name))
            return true;
    }
    return false;
}

/* The target's labels on a scraped series, as Prometheus's scrape sets
 * them (scrape/scrape.go mutateSampleLabels): honor_labels keeps the
 * series' own; otherwise the target's win and each series label they
 * displace moves to exported_NAME (exported_exported_NAME if that is
 * taken, and so on). */
static int add_target_labels(const tw_alerting *a, tw_lset *l)
{
    int rc = TW_OK;
    tw_lset displaced = {0};
    for (size_t i = 0; i < a->target.count && rc == TW_OK; i++) {
        const tw_label *t = &a->target.items[i];
        const char *own = tw_lset_get(l, t->name);
        if (own && *own && a->honor_labels)
            continue;
        if (own && *own)
            rc = tw_lset_set(&displaced, t->name, own);
        if (rc == TW_OK)
            rc = tw_lset_set(l, t->name, t->value);
    }
    /* shortest names first, as Prometheus resolves them */
    size_t done = 0;
    for (size_t len = 1; rc == TW_OK && done < displaced.count; len++) {
        for (size_t i = 0; i < displaced.count && rc == TW_OK; i++) {
            if (strlen(displaced.items[i].name) != len)
                continue;
            done++;
            size_t n = strlen(displaced.items[i].name);
            char *name = malloc(n + 1), *longer;
            if (name)
                memcpy(name, displaced.items[i].name, n + 1);
            do {
                longer = name ? malloc(strlen(name) + 10) : NULL;
                if (longer)
                    sprintf(longer, "exported_%s", name);
                free(name);
                name = longer;
            } while (name && tw_lset_get(l, name));
            rc = name ? tw_lset_set(l, name, displaced.items[i].value) : TW_ENOMEM;
            free(name);
        }
    }
    tw_lset_free(&displaced);
    return rc;
}

static void put_sample(const tw_sample_view *v, void *arg)
{
    tw_alerting *a = arg;
    if (!tw_store_wants(a->store, v->name))
        return;
    tw_lset l = {0};
    int rc = tw_lset_set(&l, TW_NAME_LABEL, v->name);
    for (size_t i = 0; i < v->label_count && rc == TW_OK; i++)
        rc = tw_lset_set(&l, v->label_names[i], v->label_values[i]);
    if (rc == TW_OK && a->target.count)
        rc = add_target_labels(a, &l);
    if (rc == TW_OK)
        tw_store_put(a->store, &l, v->value, NULL);
    tw_lset_free(&l);
}

static void sample(tw_alerting *a, int64_t t)
{
    tw_store_begin(a->store, t);
    tw_registry_visit(a->registry, want_family, put_sample, a);
    tw_store_end(a->store, NULL);
}

/* ---- alert state ------------------------------------------------------ */

static void log_line(tw_alerting *a, tw_say_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void log_line(tw_alerting *a, tw_say_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tw_vsay_to(a->log, level, "rules", fmt, ap);
    va_end(ap);
}

static int render_pairs(const tw_rule_pair *p, size_t n, const tw_template_data *d, tw_lset *out)
{
    for (size_t i = 0; i < n; i++) {
        char *text = tw_template_render(p[i].tmpl, d);
        int rc = text ? tw_lset_set(out, p[i].name, text) : TW_ENOMEM;
        free(text);
        if (rc != TW_OK)
            return rc;
    }
    return TW_OK;
}

static tw_active_alert *find_alert(tw_rule *r, uint64_t fp, const tw_lset *labels)
{
    for (size_t i = 0; i < r->active_count; i++) {
        if (r->active[i].fingerprint == fp && tw_lset_equal(&r->active[i].labels, labels))
            return &r->active[i];
    }
    return NULL;
}

static int add_alert(tw_rule *r, tw_active_alert **out)
{
    if (r->active_count == r->active_cap) {
        size_t cap = r->active_cap ? 2 * r->active_cap : 4;
        tw_active_alert *grown = realloc(r->active, cap * sizeof *grown);
        if (!grown)
            return TW_ENOMEM;
        r->active = grown;
        r->active_cap = cap;
    }
    *out = &r->active[r->active_count++];
    memset(*out, 0, sizeof **out);
    return TW_OK;
}

/* The labels of one alert: the sample's without __name__, the rule's, alertname. */
static int alert_labels(const tw_rule *r, const tw_sample *s, const tw_template_data *d, tw_lset *out)
{
    int rc = tw_lset_copy(&s->labels, out);
    if (rc != TW_OK)
        return rc;
    tw_lset_del(out, TW_NAME_LABEL);
    rc = render_pairs(r->labels, r->label_count, d, out);
    return rc == TW_OK ? tw_lset_set(out, "alertname", r->alert) : rc;
}

static const char *state_name(int state) { return state == ALERT_FIRING ? "firing" : state == ALERT_PENDING ? "pending" : "inactive"; }

static void describe(const tw_active_alert *al, char *out, size_t cap)
{
    char *text = tw_lset_text(&al->labels);
    snprintf(out, cap, "%s", text ? text : "?");
    free(text);
}

static int update_alerts(tw_alerting *a, tw_rule_group *g, tw_rule *r, tw_vector *v, int64_t t)
{
    for (size_t i = 0; i < r->active_count; i++)
        r->active[i].seen = false;
    if (g->limit > 0 && (long)v->count > g->limit)
        return TW_ELIMIT;
    for (size_t i = 0; i < v->count; i++) {
        tw_sample *s = &v->items[i];
        tw_template_data d = {.labels = &s->labels, .value = s->v, .external_url = a->generator_url};
        tw_lset labels = {0}, annotations = {0};
        int rc = alert_labels(r, s, &d, &labels);
        if (rc == TW_OK)
            rc = render_pairs(r->annotations, r->annotation_count, &d, &annotations);
        if (rc != TW_OK) {
            tw_lset_free(&labels);
            tw_lset_free(&annotations);
            return rc;
        }
        uint64_t fp = tw_lset_hash(&labels);
        tw_active_alert *al = find_alert(r, fp, &labels);
        if (al && al->state != ALERT_INACTIVE) {
            tw_lset_free(&labels);
            tw_lset_free(&al->annotations);
            al->annotations = annotations;
            al->value = s->v;
            al->seen = true;
            continue;
        }
        if (al) { /* a resolved alert comes back: a new one replaces it */
            free_alert(al);
        } else if (r->active_count >= ALERTS_PER_RULE_MAX || add_alert(r, &al) != TW_OK) {
            tw_lset_free(&labels);
            tw_lset_free(&annotations);
            return r->active_count >= ALERTS_PER_RULE_MAX ? TW_ELIMIT : TW_ENOMEM;
        }
        *al = (tw_active_alert){.labels = labels, .annotations = annotations, .fingerprint = fp,
                                .state = ALERT_PENDING, .value = s->v, .active_at = t, .seen = true};
    }
    for (size_t i = 0; i < r->active_count;) {
        tw_active_alert *al = &r->active[i];
        char what[512];
        if (!al->seen) {
            bool keep = false;
            if (al->state == ALERT_FIRING && r->keep_firing_ms > 0) {
                if (!al->keep_firing_since)
                    al->keep_firing_since = t;
                keep = t - al->keep_firing_since < r->keep_firing_ms;
            }
            if (!keep) {
                bool drop = al->state == ALERT_PENDING || (al->resolved_at && t - al->resolved_at > RESOLVED_RETENTION_MS);
                if (al->state == ALERT_FIRING) {
                    describe(al, what, sizeof what);
                    log_line(a, TW_SAY_INFO, "alert resolved: %s", what);
                }
                if (al->state != ALERT_INACTIVE) {
                    al->state = ALERT_INACTIVE;
                    al->resolved_at = t;
                }
                if (drop) {
                    free_alert(al);
                    r->active[i] = r->active[--r->active_count];
                    continue;
                }
                i++;
                continue;
            }
        } else {
            al->keep_firing_since = 0;
        }
        if (al->state == ALERT_PENDING && t - al->active_at >= r->for_ms) {
            al->state = ALERT_FIRING;
            al->fired_at = t;
            a->fired_total++;
            describe(al, what, sizeof what);
            char value[64];
            tw_format_go_float(al->value, value, sizeof value);
            const char *summary = tw_lset_get(&al->annotations, "summary");
            log_line(a, TW_SAY_WARN, "alert firing: %s value=%s%s%s", what, value, summary ? ": " : "", summary ? summary : "");
        }
        i++;
    }
    return TW_OK;
}

/* ALERTS{alertname, alertstate, ...} 1 into the store, as Prometheus records it. */
static void record_alerts_series(tw_alerting *a, tw_rule *r)
{
    for (size_t i = 0; i < r->active_count; i++) {
        tw_active_alert *al = &r->active[i];
        if (al->state == ALERT_INACTIVE)
            continue;
        tw_lset l = {0};
        if (tw_lset_copy(&al->labels, &l) == TW_OK && tw_lset_set(&l, TW_NAME_LABEL, "ALERTS") == TW_OK &&
            tw_lset_set(&l, "alertstate", state_name(al->state)) == TW_OK)
            tw_store_put(a->store, &l, 1, r);
        tw_lset_free(&l);
    }
    tw_store_end(a->store, r);
}

static void export_counts(tw_alerting *a, tw_rule *r)
{
    size_t pending = 0, firing = 0;
    for (size_t i = 0; i < r->active_count; i++) {
        pending += r->active[i].state == ALERT_PENDING;
        firing += r->active[i].state == ALERT_FIRING;
    }
    const char *v1[] = {r->alert, "pending"}, *v2[] = {r->alert, "firing"};
    tw_gauge *g;
    if (tw_family_series(a->f_alerts, v1, &g) == TW_OK)
        tw_gauge_set(g, (double)pending);
    if (tw_family_series(a->f_alerts, v2, &g) == TW_OK)
        tw_gauge_set(g, (double)firing);
}

/* ---- sending ---------------------------------------------------------- */

typedef struct outbox {
    tw_alert_notice *items;
    tw_alert_label *labels;
    size_t count, label_used;
} outbox;

static bool needs_sending(const tw_alerting *a, const tw_active_alert *al, int64_t t)
{
    if (al->state == ALERT_PENDING)
        return false;
    if (al->resolved_at > al->last_sent_at)
        return true;
    return al->last_sent_at + a->resend_ms <= t; /* firing, or resolved within the retention */
}

static void send_alerts(tw_alerting *a, tw_rule_group *g, tw_rule *r, int64_t t)
{
    if (!a->sink)
        return;
    size_t n = 0, labels = 0;
    for (size_t i = 0; i < r->active_count; i++) {
        if (needs_sending(a, &r->active[i], t)) {
            n++;
            labels += r->active[i].labels.count + a->external.count + r->active[i].annotations.count;
        }
    }
    if (!n)
        return;
    tw_alert_notice *items = calloc(n, sizeof *items);
    tw_alert_label *pool = calloc(labels ? labels : 1, sizeof *pool);
    char **urls = calloc(n, sizeof *urls);
    tw_lset *sent = calloc(n, sizeof *sent); /* the labels with the external ones */
    if (!items || !pool || !urls || !sent) {
        free(items);
        free(pool);
        free(urls);
        free(sent);
        return;
    }
    int64_t interval = group_interval(a, g), delta = interval > a->resend_ms ? interval : a->resend_ms;
    size_t k = 0, used = 0;
    for (size_t i = 0; i < r->active_count; i++) {
        tw_active_alert *al = &r->active[i];
        if (!needs_sending(a, al, t))
            continue;
        bool changed = al->state == ALERT_FIRING ? al->last_sent_at < al->fired_at : al->last_sent_at < al->resolved_at;
        al->last_sent_at = t;
        tw_alert_notice *x = &items[k];
        const tw_lset *ls = &al->labels;
        if (a->external.count && tw_lset_copy(&al->labels, &sent[k]) == TW_OK) {
            for (size_t j = 0; j < a->external.count; j++) {
                const char *have = tw_lset_get(&sent[k], a->external.items[j].name);
                if (!have || !*have)
                    tw_lset_set(&sent[k], a->external.items[j].name, a->external.items[j].value);
            }
            ls = &sent[k];
        }
        x->labels = pool + used;
        for (size_t j = 0; j < ls->count; j++)
            pool[used++] = (tw_alert_label){ls->items[j].name, ls->items[j].value};
        x->label_count = ls->count;
        x->annotations = pool + used;
        for (size_t j = 0; j < al->annotations.count; j++)
            pool[used++] = (tw_alert_label){al->annotations.items[j].name, al->annotations.items[j].value};
        x->annotation_count = al->annotations.count;
        x->resolved = al->state == ALERT_INACTIVE;
        x->changed = changed;
        x->starts_at = (double)al->active_at / 1000;
        x->ends_at = (double)(x->resolved ? al->resolved_at : t + 4 * delta) / 1000;
        x->value = al->value;
        x->fingerprint = ls == &al->labels ? al->fingerprint : tw_lset_hash(ls);
        if (a->page_url) {
            x->generator_url = a->page_url;
        } else if (a->generator_url) {
            char *expr = r->expr_text;
            size_t len = strlen(a->generator_url) + 3 * strlen(expr) + 64;
            urls[k] = malloc(len);
            if (urls[k]) {
                /* Prometheus's /graph link with the expression, URL-encoded */
                int w = snprintf(urls[k], len, "%s/graph?g0.expr=", a->generator_url);
                char *o = urls[k] + (w > 0 ? w : 0);
                for (const unsigned char *p = (const unsigned char *)expr; *p; p++) {
                    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                        strchr("-_.~", *p))
                        *o++ = (char)*p;
                    else
                        o += sprintf(o, "%%%02X", *p);
                }
                strcpy(o, "&g0.tab=1");
            }
            x->generator_url = urls[k];
        }
        k++;
    }
    a->sink(a->sink_arg, items, k);
    for (size_t i = 0; i < n; i++) {
        free(urls[i]);
        tw_lset_free(&sent[i]);
    }
    free(sent);
    free(urls);
    free(items);
    free(pool);
}

/* ---- evaluation ------------------------------------------------------- */

static int record_results(tw_alerting *a, tw_rule *r, tw_vector *v)
{
    for (size_t i = 0; i < v->count; i++) {
        tw_sample *s = &v->items[i];
        tw_template_data d = {.labels = &s->labels, .value = s->v, .external_url = a->generator_url};
        int rc = tw_lset_set(&s->labels, TW_NAME_LABEL, r->record);
        if (rc == TW_OK)
            rc = render_pairs(r->labels, r->label_count, &d, &s->labels);
        for (size_t k = 0; k < i && rc == TW_OK; k++) {
            if (tw_lset_equal(&v->items[k].labels, &s->labels))
                rc = TW_EEXIST; /* "vector contains metrics with the same labelset after applying rule labels" */
        }
        if (rc == TW_OK)
            rc = tw_store_put(a->store, &s->labels, s->v, r);
        if (rc != TW_OK)
            return rc;
    }
    tw_store_end(a->store, r);
    return TW_OK;
}

static void eval_rule(tw_alerting *a, tw_rule_group *g, tw_rule *r, int64_t t, tw_counter *failures)
{
    char err[512] = "";
    tw_pq_context c = {.store = a->store, .t = t, .err = err, .err_cap = sizeof err};
    tw_vector v = {0};
    double scalar = 0;
    int rc = r->expr ? tw_pq_eval(&c, r->expr, &v, &scalar) : TW_EINVAL;
    if (rc == TW_OK && r->expr->type == TW_PQ_SCALAR) {
        tw_lset none = {0};
        rc = tw_vector_push(&v, &none, scalar);
    }
    if (rc == TW_OK)
        rc = r->record ? record_results(a, r, &v) : update_alerts(a, g, r, &v, t);
    tw_vector_free(&v);
    if (rc != TW_OK) {
        if (failures)
            tw_counter_inc(failures);
        if (!r->failing)
            log_line(a, TW_SAY_ERROR, "rule %s in group %s (%s:%d) failed: %s", r->alert ? r->alert : r->record, g->name, r->file,
                     r->line, err[0] ? err : rc == TW_ELIMIT ? "exceeded the group's limit" : tw_strerror(rc));
        r->failing = true; /* a failed evaluation changes no alert, as in Prometheus */
        return;
    }
    r->failing = false;
    if (r->alert) {
        record_alerts_series(a, r);
        export_counts(a, r);
        send_alerts(a, g, r, t);
    }
}

static void eval_group(tw_alerting *a, tw_rule_group *g, int64_t t)
{
    const char *labels[] = {g->name};
    tw_counter *evals = NULL, *failures = NULL;
    tw_family_series(a->f_evals, labels, &evals);
    tw_family_series(a->f_failures, labels, &failures);
    if (evals)
        tw_counter_inc(evals);
    for (size_t k = 0; k < g->rule_count; k++)
        eval_rule(a, g, &g->rules[k], t, failures);
}

static void count_firing(tw_alerting *a)
{
    a->firing = 0;
    for (size_t i = 0; i < a->rs->group_count; i++) {
        for (size_t k = 0; k < a->rs->groups[i].rule_count; k++) {
            tw_rule *r = &a->rs->groups[i].rules[k];
            for (size_t j = 0; j < r->active_count; j++)
                a->firing += r->active[j].state == ALERT_FIRING;
        }
    }
}

static void evaluate(tw_alerting *a, double now, bool all)
{
    /* rounded down, never ahead of the clock: Alertmanager takes a resolved
       alert whose endsAt is still in the future for a firing one */
    int64_t t = (int64_t)floor(now * 1000);
    if (t <= a->last_t)
        t = a->last_t + 1; /* the wall clock stepped back: keep the ring in order */
    bool due = false;
    for (size_t i = 0; i < a->rs->group_count; i++)
        due |= all || a->rs->groups[i].next_ms <= t;
    if (!due)
        return;
    pthread_mutex_lock(&a->lock);
    sample(a, t);
    a->last_t = t;
    for (size_t i = 0; i < a->rs->group_count; i++) {
        tw_rule_group *g = &a->rs->groups[i];
        if (!all && g->next_ms > t)
            continue;
        eval_group(a, g, t);
        int64_t iv = group_interval(a, g);
        /* the next multiple of the interval after t, so a slow tick does not pile up */
        g->next_ms = g->next_ms ? g->next_ms + iv : t + iv;
        if (g->next_ms <= t)
            g->next_ms = t + iv - (t - g->next_ms) % iv;
    }
    count_firing(a);
    pthread_mutex_unlock(&a->lock);
}

void tw_alerting_tick(tw_alerting *a, double now) { evaluate(a, now, false); }
void tw_alerting_evaluate_all(tw_alerting *a, double now) { evaluate(a, now, true); }

/* ---- the /alerts page ------------------------------------------------- */

static const char *rule_state(const tw_rule *r)
{
    int worst = ALERT_INACTIVE;
    for (size_t i = 0; i < r->active_count; i++) {
        int state = (int)r->active[i].state;
        worst = state > worst ? state : worst;
    }
    return state_name(worst);
}

static void page_json_lset(FILE *out, const tw_lset *l)
{
    fputc('{', out);
    for (size_t i = 0; i < l->count; i++) {
        if (i)
            fputc(',', out);
        tw_json_cstring(out, l->items[i].name);
        fputc(':', out);
        tw_json_cstring(out, l->items[i].value);
    }
    fputc('}', out);
}

static void page_json(const tw_alerting *a, FILE *out)
{
    fputs("{\"rules\":[", out);
    bool first = true;
    for (size_t i = 0; i < a->rs->group_count; i++) {
        const tw_rule_group *g = &a->rs->groups[i];
        for (size_t k = 0; k < g->rule_count; k++) {
            const tw_rule *r = &g->rules[k];
            fputs(first ? "\n{" : ",\n{", out);
            first = false;
            fputs("\"group\":", out);
            tw_json_cstring(out, g->name);
            fputs(",\"name\":", out);
            tw_json_cstring(out, r->alert ? r->alert : r->record);
            fprintf(out, ",\"type\":\"%s\",\"query\":", r->alert ? "alerting" : "recording");
            tw_json_cstring(out, r->expr_text);
            fprintf(out, ",\"health\":\"%s\"", r->failing ? "err" : "ok");
            if (!r->alert) {
                fputc('}', out);
                continue;
            }
            fprintf(out, ",\"state\":\"%s\",\"duration\":%.3f,\"alerts\":[", rule_state(r), (double)r->for_ms / 1000);
            bool any = false;
            for (size_t j = 0; j < r->active_count; j++) {
                const tw_active_alert *al = &r->active[j];
                if (al->state == ALERT_INACTIVE)
                    continue;
                fputs(any ? ",{\"labels\":" : "{\"labels\":", out);
                any = true;
                page_json_lset(out, &al->labels);
                fputs(",\"annotations\":", out);
                page_json_lset(out, &al->annotations);
                fprintf(out, ",\"state\":\"%s\",\"activeAt\":%.3f,\"value\":", state_name(al->state),
                        (double)al->active_at / 1000);
                tw_json_number(out, al->value);
                fputc('}', out);
            }
            fputs("]}", out);
        }
    }
    fputs("\n]}\n", out);
}

static void html_text(FILE *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*s, out);
        }
    }
}

static void page_html(const tw_alerting *a, FILE *out)
{
    fputs("<!doctype html>\n<html><head><title>trainwatch alerts</title></head><body>\n"
          "<h1>Alerts</h1>\n<p><a href=\"/alerts?format=json\">as JSON</a></p>\n"
          "<table border=\"1\">\n<tr><th>group</th><th>rule</th><th>state</th><th>expression</th><th>alerts</th></tr>\n",
          out);
    for (size_t i = 0; i < a->rs->group_count; i++) {
        const tw_rule_group *g = &a->rs->groups[i];
        for (size_t k = 0; k < g->rule_count; k++) {
            const tw_rule *r = &g->rules[k];
            fputs("<tr><td>", out);
            html_text(out, g->name);
            fputs("</td><td id=\"", out);
            html_text(out, r->alert ? r->alert : r->record);
            fputs("\">", out);
            html_text(out, r->alert ? r->alert : r->record);
            fprintf(out, "</td><td>%s</td><td><code>", r->failing ? "failing" : r->alert ? rule_state(r) : "recording");
            html_text(out, r->expr_text);
            fputs("</code></td><td>", out);
            for (size_t j = 0; j < r->active_count; j++) {
                const tw_active_alert *al = &r->active[j];
                if (al->state == ALERT_INACTIVE)
                    continue;
                char *text = tw_lset_text(&al->labels);
                fprintf(out, "%s ", state_name(al->state));
                html_text(out, text ? text : "?");
                free(text);
                fputs("<br>", out);
            }
            fputs("</td></tr>\n", out);
        }
    }
    fputs("</table>\n</body></html>\n", out);
}

char *tw_alerting_page(tw_alerting *a, bool json, size_t *len)
{
    char *text = NULL;
    FILE *out = open_memstream(&text, len);
    if (!out)
        return NULL;
    pthread_mutex_lock(&a->lock);
    if (json)
        page_json(a, out);
    else
        page_html(a, out);
    pthread_mutex_unlock(&a->lock);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
