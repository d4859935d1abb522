/*
 * eval.c: evaluates a tw_pq_node tree at one timestamp (see promql.h).
 *
 * The semantics follow Prometheus 2.x's engine (promql/engine.go): which
 * operations drop the metric name, how one-to-one matching pairs series, what
 * a comparison keeps, and how aggregations group. Every intermediate vector
 * is owned by the function that made it and freed before it returns.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "promql.h"
#include "trainwatch/error.h"

static int eval_error(const tw_pq_context *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int eval_error(const tw_pq_context *c, int status, const char *fmt, ...)
{
    if (c->err && c->err_cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->err_cap, fmt, ap);
        va_end(ap);
    }
    return status;
}

void tw_vector_free(tw_vector *v)
{
    for (size_t i = 0; i < v->count; i++)
        tw_lset_free(&v->items[i].labels);
    free(v->items);
    v->items = NULL;
    v->count = v->cap = 0;
}

int tw_vector_push(tw_vector *v, tw_lset *labels, double value)
{
    if (v->count == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 8;
        tw_sample *grown = realloc(v->items, cap * sizeof *grown);
        if (!grown) {
            tw_lset_free(labels);
            return TW_ENOMEM;
        }
        v->items = grown;
        v->cap = cap;
    }
    v->items[v->count++] = (tw_sample){*labels, value};
    labels->items = NULL;
    labels->count = 0;
    return TW_OK;
}

/* ---- selectors ------------------------------------------------------ */

bool tw_matchers_match(const tw_pq_node *sel, const tw_lset *labels)
{
    const char *name = tw_lset_get(labels, TW_NAME_LABEL);
    if (!name || strcmp(name, sel->u.sel.metric))
        return false;
    for (size_t i = 0; i < sel->u.sel.matcher_count; i++) {
        const tw_matcher *m = &sel->u.sel.matchers[i];
        const char *v = tw_lset_get(labels, m->name);
        if (!v)
            v = "";
        bool ok;
        switch (m->op) {
        case TW_MATCH_EQ: ok = !strcmp(v, m->value); break;
        case TW_MATCH_NE: ok = strcmp(v, m->value) != 0; break;
        case TW_MATCH_RE: ok = tw_regex_match(m->re, v); break;
        default: ok = !tw_regex_match(m->re, v); break;
        }
        if (!ok)
            return false;
    }
    return true;
}

static int eval_instant_selector(const tw_pq_context *c, const tw_pq_node *n, tw_vector *out)
{
    int64_t at = c->t - n->u.sel.offset_ms;
    for (size_t i = 0; i < tw_store_series_count(c->store); i++) {
        tw_series *s = tw_store_series_at(c->store, i);
        tw_point p;
        if (!tw_matchers_match(n, &s->labels) || !tw_store_instant(c->store, s, at, TW_LOOKBACK_MS, &p))
            continue;
        tw_lset l;
        if (tw_lset_copy(&s->labels, &l) != TW_OK || tw_vector_push(out, &l, p.v) != TW_OK)
            return TW_ENOMEM;
    }
    return TW_OK;
}

int tw_pq_eval_range(const tw_pq_context *c, const tw_pq_node *sel,
                     int (*per_series)(const tw_series *s, const tw_point *pts, size_t n, void *arg), void *arg)
{
    size_t cap = tw_store_capacity(c->store);
    tw_point *pts = malloc(cap * sizeof *pts);
    if (!pts)
        return TW_ENOMEM;
    int64_t to = c->t - sel->u.sel.offset_ms, from = to - sel->u.sel.range_ms;
    int rc = TW_OK;
    for (size_t i = 0; i < tw_store_series_count(c->store) && rc == TW_OK; i++) {
        tw_series *s = tw_store_series_at(c->store, i);
        if (!tw_matchers_match(sel, &s->labels))
            continue;
        size_t n = tw_store_range(c->store, s, from, to, pts, cap);
        if (n > 0)
            rc = per_series(s, pts, n, arg);
    }
    free(pts);
    return rc;
}

/* ---- arithmetic ----------------------------------------------------- */

/* The value of lhs op rhs, and whether a comparison keeps the sample. */
static double apply(tw_pq_op op, double l, double r, bool *keep)
{
    *keep = true;
    switch (op) {
    case TW_OP_ADD: return l + r;
    case TW_OP_SUB: return l - r;
    case TW_OP_MUL: return l * r;
    case TW_OP_DIV: return l / r;
    case TW_OP_MOD: return fmod(l, r);
    case TW_OP_POW: return pow(l, r);
    case TW_OP_EQ: *keep = l == r; return l;
    case TW_OP_NE: *keep = l != r; return l;
    case TW_OP_GT: *keep = l > r; return l;
    case TW_OP_LT: *keep = l < r; return l;
    case TW_OP_GE: *keep = l >= r; return l;
    case TW_OP_LE: *keep = l <= r; return l;
    default: return NAN;
    }
}

static bool drops_name(tw_pq_op op) { return op <= TW_OP_POW; }
static bool comparison(tw_pq_op op) { return op >= TW_OP_EQ && op <= TW_OP_LE; }

static int eval_vector_scalar(const tw_pq_node *n, tw_vector *vec, double scalar, bool scalar_left, tw_vector *out)
{
    tw_pq_op op = n->u.bin.op;
    for (size_t i = 0; i < vec->count; i++) {
        tw_sample *s = &vec->items[i];
        double l = scalar_left ? scalar : s->v, r = scalar_left ? s->v : scalar;
        bool keep;
        double v = apply(op, l, r, &keep);
        if (comparison(op) && scalar_left)
            v = r; /* the vector's value, whichever side it is on */
        if (n->u.bin.return_bool) {
            v = keep ? 1 : 0;
            keep = true;
        }
        if (!keep)
            continue;
        if (drops_name(op) || n->u.bin.return_bool)
            tw_lset_del(&s->labels, TW_NAME_LABEL);
        if (tw_vector_push(out, &s->labels, v) != TW_OK)
            return TW_ENOMEM;
    }
    return TW_OK;
}

typedef struct sig_entry {
    uint64_t sig;
    size_t index;
} sig_entry;

static int cmp_sig(const void *a, const void *b)
{
    uint64_t x = ((const sig_entry *)a)->sig, y = ((const sig_entry *)b)->sig;
    return x < y ? -1 : x > y;
}

static sig_entry *signatures(const tw_vector *v, const tw_pq_node *n)
{
    sig_entry *e = malloc((v->count ? v->count : 1) * sizeof *e);
    if (!e)
        return NULL;
    for (size_t i = 0; i < v->count; i++)
        e[i] = (sig_entry){tw_lset_signature(&v->items[i].labels, &n->u.bin.matching, n->u.bin.on), i};
    qsort(e, v->count, sizeof *e, cmp_sig);
    return e;
}

static const sig_entry *find_sig(const sig_entry *e, size_t count, uint64_t sig)
{
    sig_entry key = {sig, 0};
    return bsearch(&key, e, count, sizeof *e, cmp_sig);
}

static int eval_set_op(const tw_pq_context *c, const tw_pq_node *n, tw_vector *l, tw_vector *r, tw_vector *out)
{
    (void)c;
    sig_entry *rs = signatures(r, n), *ls = signatures(l, n);
    int rc = rs && ls ? TW_OK : TW_ENOMEM;
    for (size_t i = 0; i < l->count && rc == TW_OK; i++) {
        uint64_t sig = tw_lset_signature(&l->items[i].labels, &n->u.bin.matching, n->u.bin.on);
        bool in_right = find_sig(rs, r->count, sig) != NULL;
        if (n->u.bin.op == TW_OP_OR || (n->u.bin.op == TW_OP_AND) == in_right)
            rc = tw_vector_push(out, &l->items[i].labels, l->items[i].v);
    }
    if (n->u.bin.op == TW_OP_OR) {
        for (size_t i = 0; i < r->count && rc == TW_OK; i++) {
            uint64_t sig = tw_lset_signature(&r->items[i].labels, &n->u.bin.matching, n->u.bin.on);
            if (!find_sig(ls, l->count, sig))
                rc = tw_vector_push(out, &r->items[i].labels, r->items[i].v);
        }
    }
    free(rs);
    free(ls);
    return rc;
}

static int eval_vector_vector(const tw_pq_context *c, const tw_pq_node *n, tw_vector *l, tw_vector *r, tw_vector *out)
{
    sig_entry *rs = signatures(r, n);
    if (!rs)
        return TW_ENOMEM;
    for (size_t i = 1; i < r->count; i++) {
        if (rs[i].sig == rs[i - 1].sig) {
            char *text = tw_lset_text(&r->items[rs[i].index].labels);
            int rc = eval_error(c, TW_EINVAL,
                                "found duplicate series for the match group on the right hand-side of the operation: %s; "
                                "many-to-many matching not allowed",
                                text ? text : "?");
            free(text);
            free(rs);
            return rc;
        }
    }
    uint64_t *seen = malloc((l->count ? l->count : 1) * sizeof *seen);
    size_t seen_count = 0;
    int rc = seen ? TW_OK : TW_ENOMEM;
    for (size_t i = 0; i < l->count && rc == TW_OK; i++) {
        tw_sample *ls = &l->items[i];
        uint64_t sig = tw_lset_signature(&ls->labels, &n->u.bin.matching, n->u.bin.on);
        const sig_entry *hit = find_sig(rs, r->count, sig);
        if (!hit)
            continue;
        bool keep;
        double v = apply(n->u.bin.op, ls->v, r->items[hit->index].v, &keep);
        if (n->u.bin.return_bool) {
            v = keep ? 1 : 0;
            keep = true;
        }
        if (!keep)
            continue;
        for (size_t k = 0; k < seen_count; k++) {
            if (seen[k] == sig)
                rc = eval_error(c, TW_EINVAL,
                                "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)");
        }
        if (rc != TW_OK)
            break;
        seen[seen_count++] = sig;
        if (drops_name(n->u.bin.op) || n->u.bin.return_bool)
            tw_lset_del(&ls->labels, TW_NAME_LABEL);
        tw_lset_filter(&ls->labels, &n->u.bin.matching, n->u.bin.on);
        rc = tw_vector_push(out, &ls->labels, v);
    }
    free(seen);
    free(rs);
    return rc;
}

static int eval_binary(const tw_pq_context *c, const tw_pq_node *n, tw_vector *out, double *scalar)
{
    tw_vector l = {0}, r = {0};
    double ls = 0, rs = 0;
    int rc = tw_pq_eval(c, n->u.bin.lhs, &l, &ls);
    if (rc == TW_OK)
        rc = tw_pq_eval(c, n->u.bin.rhs, &r, &rs);
    if (rc == TW_OK) {
        bool lvec = n->u.bin.lhs->type == TW_PQ_VECTOR, rvec = n->u.bin.rhs->type == TW_PQ_VECTOR;
        if (!lvec && !rvec) {
            bool keep;
            *scalar = apply(n->u.bin.op, ls, rs, &keep);
            if (n->u.bin.return_bool)
                *scalar = keep ? 1 : 0;
        } else if (n->u.bin.op >= TW_OP_AND) {
            rc = eval_set_op(c, n, &l, &r, out);
        } else if (lvec && rvec) {
            rc = eval_vector_vector(c, n, &l, &r, out);
        } else {
            rc = lvec ? eval_vector_scalar(n, &l, rs, false, out) : eval_vector_scalar(n, &r, ls, true, out);
        }
    }
    tw_vector_free(&l);
    tw_vector_free(&r);
    return rc;
}

/* ---- aggregation ---------------------------------------------------- */

typedef struct group {
    uint64_t sig;
    tw_lset labels;
    double value, mean, count;
} group;

static void aggregate_into(tw_pq_agg op, group *g, double v)
{
    g->count++;
    switch (op) {
    case TW_AGG_SUM: g->value += v; break;
    case TW_AGG_COUNT: g->value = g->count; break;
    case TW_AGG_MAX:
        if (g->value < v || isnan(g->value))
            g->value = v;
        break;
    case TW_AGG_MIN:
        if (g->value > v || isnan(g->value))
            g->value = v;
        break;
    case TW_AGG_AVG:
        if (isinf(g->mean)) {
            if (isinf(v) && (g->mean > 0) == (v > 0))
                break;
            if (!isinf(v) && !isnan(v))
                break;
        }
        /* divide both sides of the difference to avoid overflow, as Prometheus does */
        g->mean += v / g->count - g->mean / g->count;
        break;
    }
}

static int eval_aggregate(const tw_pq_context *c, const tw_pq_node *n, tw_vector *out)
{
    tw_vector in = {0};
    double ignored;
    int rc = tw_pq_eval(c, n->u.agg.expr, &in, &ignored);
    group *groups = rc == TW_OK ? calloc(in.count ? in.count : 1, sizeof *groups) : NULL;
    size_t count = 0;
    if (rc == TW_OK && !groups)
        rc = TW_ENOMEM;
    tw_pq_agg op = n->u.agg.op;
    for (size_t i = 0; i < in.count && rc == TW_OK; i++) {
        tw_sample *s = &in.items[i];
        tw_lset_del(&s->labels, TW_NAME_LABEL);
        tw_lset_filter(&s->labels, &n->u.agg.grouping, !n->u.agg.without);
        uint64_t sig = tw_lset_hash(&s->labels);
        group *g = NULL;
        for (size_t k = 0; k < count && !g; k++) {
            if (groups[k].sig == sig && tw_lset_equal(&groups[k].labels, &s->labels))
                g = &groups[k];
        }
        if (!g) {
            g = &groups[count++];
            g->sig = sig;
            g->labels = s->labels;
            s->labels = (tw_lset){0};
            g->count = 1;
            g->value = op == TW_AGG_COUNT ? 1 : s->v;
            g->mean = s->v;
            continue;
        }
        aggregate_into(op, g, s->v);
    }
    for (size_t k = 0; k < count; k++) {
        double v = op == TW_AGG_AVG ? groups[k].mean : groups[k].value;
        if (rc == TW_OK)
            rc = tw_vector_push(out, &groups[k].labels, v);
        else
            tw_lset_free(&groups[k].labels);
    }
    free(groups);
    tw_vector_free(&in);
    return rc;
}

/* ---- dispatch ------------------------------------------------------- */

int tw_pq_eval(const tw_pq_context *c, const tw_pq_node *n, tw_vector *out, double *scalar)
{
    switch (n->kind) {
    case TW_PQ_NUMBER:
        *scalar = n->u.number;
        return TW_OK;
    case TW_PQ_SELECTOR:
        if (n->type != TW_PQ_VECTOR)
            return eval_error(c, TW_EINVAL, "a range vector cannot be evaluated on its own");
        return eval_instant_selector(c, n, out);
    case TW_PQ_CALL:
        return n->u.call.fn->impl(c, n->u.call.args, out, scalar);
    case TW_PQ_AGGREGATE:
        return eval_aggregate(c, n, out);
    case TW_PQ_BINARY:
        return eval_binary(c, n, out, scalar);
    case TW_PQ_NEGATE: {
        int rc = tw_pq_eval(c, n->u.operand, out, scalar);
        if (rc != TW_OK)
            return rc;
        if (n->type == TW_PQ_SCALAR)
            *scalar = -*scalar;
        for (size_t i = 0; i < out->count; i++) {
            out->items[i].v = -out->items[i].v;
            tw_lset_del(&out->items[i].labels, TW_NAME_LABEL);
        }
        return TW_OK;
    }
    default:
        return eval_error(c, TW_EINVAL, "a string cannot be evaluated as a rule");
    }
}
