/*
 * functions.c: the PromQL functions trainwatch evaluates, as one table.
 *
 * Each entry gives the name, the argument and return types the parser checks,
 * and the implementation. Range functions share one driver (range_call) that
 * hands each series' samples in the window to a small reducer. The numerics
 * (Kahan-Neumaier sums, rate extrapolation, the regression in deriv) follow
 * Prometheus 2.x's promql/functions.go so results agree with a Prometheus
 * given the same samples.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "promql.h"
#include "trainwatch/error.h"

/* ---- helpers -------------------------------------------------------- */

static void kahan_add(double inc, double *sum, double *c)
{
    double t = *sum + inc;
    if (fabs(*sum) >= fabs(inc))
        *c += (*sum - t) + inc;
    else
        *c += (inc - t) + *sum;
    *sum = t;
}

typedef double (*reducer)(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep);

typedef struct range_job {
    reducer reduce;
    const tw_pq_node *sel;
    int64_t t;
    bool keep_name;
    tw_vector *out;
} range_job;

static int range_series(const tw_series *s, const tw_point *p, size_t n, void *arg)
{
    range_job *j = arg;
    bool keep = true;
    double v = j->reduce(j->sel, j->t, p, n, &keep);
    if (!keep)
        return TW_OK;
    tw_lset l;
    if (tw_lset_copy(&s->labels, &l) != TW_OK)
        return TW_ENOMEM;
    if (!j->keep_name)
        tw_lset_del(&l, TW_NAME_LABEL);
    return tw_vector_push(j->out, &l, v);
}

static int range_call(const tw_pq_context *c, const tw_pq_node *sel, reducer r, bool keep_name, tw_vector *out)
{
    range_job j = {r, sel, c->t, keep_name, out};
    return tw_pq_eval_range(c, sel, range_series, &j);
}

/* ---- *_over_time ---------------------------------------------------- */

static double avg_r(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    (void)sel, (void)t, (void)keep;
    double mean = 0, c = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
        count++;
        if (isinf(mean)) {
            if (isinf(p[i].v) && (mean > 0) == (p[i].v > 0))
                continue;
            if (!isinf(p[i].v) && !isnan(p[i].v))
                continue;
        }
        kahan_add(p[i].v / count - mean / count, &mean, &c);
    }
    return isinf(mean) ? mean : mean + c;
}

static double sum_r(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    (void)sel, (void)t, (void)keep;
    double sum = 0, c = 0;
    for (size_t i = 0; i < n; i++)
        kahan_add(p[i].v, &sum, &c);
    return isinf(sum) ? sum : sum + c;
}

static double min_r(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    (void)sel, (void)t, (void)keep;
    double m = p[0].v;
    for (size_t i = 0; i < n; i++) {
        if (p[i].v < m || isnan(m))
            m = p[i].v;
    }
    return m;
}

static double max_r(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    (void)sel, (void)t, (void)keep;
    double m = p[0].v;
    for (size_t i = 0; i < n; i++) {
        if (p[i].v > m || isnan(m))
            m = p[i].v;
    }
    return m;
}

static double count_r(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    (void)sel, (void)t, (void)keep, (void)p;
    return (double)n;
}

static double last_r(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    (void)sel, (void)t, (void)keep;
    return p[n - 1].v;
}

static double changes_r(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    (void)sel, (void)t, (void)keep;
    double changes = 0;
    for (size_t i = 1; i < n; i++) {
        if (p[i].v != p[i - 1].v && !(isnan(p[i].v) && isnan(p[i - 1].v)))
            changes++;
    }
    return changes;
}

/* ---- rate, increase, delta ------------------------------------------ */

static double extrapolated(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep, bool counter,
                           bool per_second)
{
    if (n < 2) {
        *keep = false;
        return 0;
    }
    int64_t range_start = t - (sel->u.sel.range_ms + sel->u.sel.offset_ms), range_end = t - sel->u.sel.offset_ms;
    double result = p[n - 1].v - p[0].v;
    if (counter) {
        double last = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i].v < last)
                result += last;
            last = p[i].v;
        }
    }
    double to_start = (double)(p[0].t - range_start) / 1000, to_end = (double)(range_end - p[n - 1].t) / 1000;
    double sampled = (double)(p[n - 1].t - p[0].t) / 1000, average = sampled / (double)(n - 1);
    if (counter && result > 0 && p[0].v >= 0) {
        double to_zero = sampled * (p[0].v / result);
        if (to_zero < to_start)
            to_start = to_zero;
    }
    double threshold = average * 1.1, interval = sampled;
    interval += to_start < threshold ? to_start : average / 2;
    interval += to_end < threshold ? to_end : average / 2;
    /* the factor first, then the product: the order Prometheus 2.42 rounds in */
    double factor = interval / sampled;
    if (per_second)
        factor /= (double)sel->u.sel.range_ms / 1000;
    return result * factor;
}

static double rate_r(const tw_pq_node *s, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    return extrapolated(s, t, p, n, keep, true, true);
}

static double increase_r(const tw_pq_node *s, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    return extrapolated(s, t, p, n, keep, true, false);
}

static double delta_r(const tw_pq_node *s, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    return extrapolated(s, t, p, n, keep, false, false);
}

/* Least-squares slope per second, x measured from the first sample. */
static double deriv_r(const tw_pq_node *sel, int64_t t, const tw_point *p, size_t n, bool *keep)
{
    (void)sel, (void)t;
    if (n < 2) {
        *keep = false;
        return 0;
    }
    double count = 0, sx = 0, cx = 0, sy = 0, cy = 0, sxy = 0, cxy = 0, sx2 = 0, cx2 = 0;
    bool constant = true;
    for (size_t i = 0; i < n; i++) {
        if (constant && i > 0 && p[i].v != p[0].v)
            constant = false;
        count += 1;
        double x = (double)(p[i].t - p[0].t) / 1e3;
        kahan_add(x, &sx, &cx);
        kahan_add(p[i].v, &sy, &cy);
        kahan_add(x * p[i].v, &sxy, &cxy);
        kahan_add(x * x, &sx2, &cx2);
    }
    if (constant)
        return isinf(p[0].v) ? NAN : 0;
    sx += cx, sy += cy, sxy += cxy, sx2 += cx2;
    double cov = sxy - sx * sy / count, var = sx2 - sx * sx / count;
    return cov / var;
}

/* ---- function entry points ------------------------------------------ */

#define RANGE_FN(fname, reducer_fn, keep)                                                                       \
    static int fname(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)         \
    {                                                                                                          \
        (void)scalar;                                                                                          \
        return range_call(c, args[0], reducer_fn, keep, out);                                                  \
    }

RANGE_FN(fn_avg_over_time, avg_r, false)
RANGE_FN(fn_sum_over_time, sum_r, false)
RANGE_FN(fn_min_over_time, min_r, false)
RANGE_FN(fn_max_over_time, max_r, false)
RANGE_FN(fn_count_over_time, count_r, false)
RANGE_FN(fn_last_over_time, last_r, true)
RANGE_FN(fn_changes, changes_r, false)
RANGE_FN(fn_rate, rate_r, false)
RANGE_FN(fn_increase, increase_r, false)
RANGE_FN(fn_delta, delta_r, false)
RANGE_FN(fn_deriv, deriv_r, false)

static int fn_time(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    (void)args, (void)out;
    *scalar = (double)c->t / 1000;
    return TW_OK;
}

/* Applies f(v, a, b) to every sample of args[0], with scalar arguments a, b. */
static int map_vector(const tw_pq_context *c, tw_pq_node *const *args, size_t scalars, tw_vector *out,
                      double (*f)(double v, double a, double b))
{
    double s[2] = {0, 0}, ignored;
    for (size_t i = 0; i < scalars; i++) {
        tw_vector none = {0};
        int rc = tw_pq_eval(c, args[i + 1], &none, &s[i]);
        tw_vector_free(&none);
        if (rc != TW_OK)
            return rc;
    }
    int rc = tw_pq_eval(c, args[0], out, &ignored);
    for (size_t i = 0; i < out->count; i++) {
        out->items[i].v = f(out->items[i].v, s[0], s[1]);
        tw_lset_del(&out->items[i].labels, TW_NAME_LABEL);
    }
    return rc;
}

static double abs_f(double v, double a, double b) { return (void)a, (void)b, fabs(v); }
static double clamp_min_f(double v, double a, double b) { return (void)b, fmax(a, v); }
static double clamp_max_f(double v, double a, double b) { return (void)b, fmin(a, v); }
static double clamp_f(double v, double a, double b) { return fmax(a, fmin(b, v)); }

static int fn_abs(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    (void)scalar;
    return map_vector(c, args, 0, out, abs_f);
}

static int fn_clamp_min(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    (void)scalar;
    return map_vector(c, args, 1, out, clamp_min_f);
}

static int fn_clamp_max(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    (void)scalar;
    return map_vector(c, args, 1, out, clamp_max_f);
}

static int fn_clamp(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    (void)scalar;
    int rc = map_vector(c, args, 2, out, clamp_f);
    /* clamp with max < min returns nothing */
    double lo = 0, hi = 0;
    tw_vector none = {0};
    if (rc == TW_OK && tw_pq_eval(c, args[1], &none, &lo) == TW_OK && tw_pq_eval(c, args[2], &none, &hi) == TW_OK &&
        hi < lo)
        tw_vector_free(out);
    tw_vector_free(&none);
    return rc;
}

/* absent(v): 1 with the labels of v's equality matchers when v is empty. */
static int fn_absent(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    (void)scalar;
    tw_vector in = {0};
    double ignored;
    int rc = tw_pq_eval(c, args[0], &in, &ignored);
    bool empty = in.count == 0;
    tw_vector_free(&in);
    if (rc != TW_OK || !empty)
        return rc;
    tw_lset l = {0};
    const tw_pq_node *sel = args[0];
    if (sel->kind == TW_PQ_SELECTOR) {
        for (size_t i = 0; i < sel->u.sel.matcher_count; i++) {
            const tw_matcher *m = &sel->u.sel.matchers[i];
            if (m->op != TW_MATCH_EQ || !strcmp(m->name, TW_NAME_LABEL))
                continue;
            bool repeated = false;
            for (size_t k = 0; k < sel->u.sel.matcher_count; k++)
                repeated |= k != i && !strcmp(sel->u.sel.matchers[k].name, m->name) && sel->u.sel.matchers[k].op == TW_MATCH_EQ;
            if (!repeated && tw_lset_set(&l, m->name, m->value) != TW_OK) {
                tw_lset_free(&l);
                return TW_ENOMEM;
            }
        }
    }
    return tw_vector_push(out, &l, 1);
}

static int fn_vector(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    (void)scalar;
    double v;
    tw_vector none = {0};
    int rc = tw_pq_eval(c, args[0], &none, &v);
    tw_vector_free(&none);
    tw_lset l = {0};
    return rc == TW_OK ? tw_vector_push(out, &l, v) : rc;
}

static int fn_scalar(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    tw_vector in = {0};
    double ignored;
    int rc = tw_pq_eval(c, args[0], &in, &ignored);
    *scalar = in.count == 1 ? in.items[0].v : NAN;
    tw_vector_free(&in);
    (void)out;
    return rc;
}

/* ---- histogram_quantile ------------------------------------------------ */

typedef struct bucket {
    double upper, count;
} bucket;

typedef struct histogram {
    uint64_t sig;
    tw_lset labels; /* without le and __name__ */
    bucket *buckets;
    size_t count, cap;
} histogram;

static int by_upper(const void *a, const void *b)
{
    double x = ((const bucket *)a)->upper, y = ((const bucket *)b)->upper;
    return (x > y) - (x < y);
}

/* Prometheus's bucketQuantile: linear interpolation inside the bucket that
 * holds the rank, after merging equal bounds and forcing counts monotonic. */
static double bucket_quantile(double q, bucket *b, size_t n)
{
    if (isnan(q))
        return NAN;
    if (q < 0)
        return -INFINITY;
    if (q > 1)
        return INFINITY;
    qsort(b, n, sizeof *b, by_upper);
    if (n == 0 || !isinf(b[n - 1].upper) || b[n - 1].upper < 0)
        return NAN;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && b[m - 1].upper == b[i].upper)
            b[m - 1].count += b[i].count;
        else
            b[m++] = b[i];
    }
    n = m;
    double max = NAN;
    for (size_t i = 0; i < n; i++) {
        if (isnan(max) || b[i].count > max)
            max = b[i].count;
        else if (b[i].count < max)
            b[i].count = max;
    }
    if (n < 2 || b[n - 1].count == 0)
        return NAN;
    double rank = q * b[n - 1].count;
    size_t k = 0;
    while (k < n - 1 && !(b[k].count >= rank))
        k++;
    if (k == n - 1)
        return b[n - 2].upper;
    if (k == 0 && b[0].upper <= 0)
        return b[0].upper;
    double start = 0, end = b[k].upper, count = b[k].count;
    if (k > 0) {
        start = b[k - 1].upper;
        count -= b[k - 1].count;
        rank -= b[k - 1].count;
    }
    return start + (end - start) * (rank / count);
}

static int fn_histogram_quantile(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar)
{
    (void)scalar;
    double q, ignored;
    tw_vector none = {0}, in = {0};
    int rc = tw_pq_eval(c, args[0], &none, &q);
    tw_vector_free(&none);
    if (rc == TW_OK)
        rc = tw_pq_eval(c, args[1], &in, &ignored);
    histogram *h = NULL;
    size_t count = 0;
    if (rc == TW_OK && in.count && !(h = calloc(in.count, sizeof *h)))
        rc = TW_ENOMEM;
    tw_name_list le = {1, (char *[]){"le"}};
    for (size_t i = 0; i < in.count && rc == TW_OK; i++) {
        tw_sample *s = &in.items[i];
        const char *bound = tw_lset_get(&s->labels, "le");
        char *end;
        double upper = bound ? strtod(bound, &end) : 0;
        if (!bound || end == bound || *end)
            continue; /* no or malformed le: skipped, as Prometheus does */
        /* the metric name is part of the group, so two histograms never merge */
        uint64_t sig = tw_lset_signature(&s->labels, &le, false);
        const char *name = tw_lset_get(&s->labels, TW_NAME_LABEL);
        for (const char *p = name ? name : ""; *p; p++)
            sig = (sig ^ (unsigned char)*p) * 1099511628211ULL;
        histogram *g = NULL;
        for (size_t k = 0; k < count && !g; k++) {
            if (h[k].sig == sig)
                g = &h[k];
        }
        if (!g) {
            g = &h[count++];
            g->sig = sig;
            if ((rc = tw_lset_copy(&s->labels, &g->labels)) != TW_OK)
                break;
            tw_lset_del(&g->labels, "le");
            tw_lset_del(&g->labels, TW_NAME_LABEL);
        }
        if (g->count == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 16;
            bucket *grown = realloc(g->buckets, cap * sizeof *grown);
            if (!grown) {
                rc = TW_ENOMEM;
                break;
            }
            g->buckets = grown;
            g->cap = cap;
        }
        g->buckets[g->count++] = (bucket){upper, s->v};
    }
    for (size_t k = 0; k < count; k++) {
        if (rc == TW_OK)
            rc = tw_vector_push(out, &h[k].labels, bucket_quantile(q, h[k].buckets, h[k].count));
        tw_lset_free(&h[k].labels);
        free(h[k].buckets);
    }
    free(h);
    tw_vector_free(&in);
    return rc;
}

#define S TW_PQ_SCALAR
#define V TW_PQ_VECTOR
#define M TW_PQ_MATRIX

static const tw_pq_function functions[] = {
    {"avg_over_time", V, 1, 1, {M}, fn_avg_over_time},
    {"min_over_time", V, 1, 1, {M}, fn_min_over_time},
    {"max_over_time", V, 1, 1, {M}, fn_max_over_time},
    {"sum_over_time", V, 1, 1, {M}, fn_sum_over_time},
    {"count_over_time", V, 1, 1, {M}, fn_count_over_time},
    {"last_over_time", V, 1, 1, {M}, fn_last_over_time},
    {"rate", V, 1, 1, {M}, fn_rate},
    {"increase", V, 1, 1, {M}, fn_increase},
    {"delta", V, 1, 1, {M}, fn_delta},
    {"deriv", V, 1, 1, {M}, fn_deriv},
    {"changes", V, 1, 1, {M}, fn_changes},
    {"absent", V, 1, 1, {V}, fn_absent},
    {"time", S, 0, 0, {S}, fn_time},
    {"abs", V, 1, 1, {V}, fn_abs},
    {"clamp_min", V, 2, 2, {V, S}, fn_clamp_min},
    {"clamp_max", V, 2, 2, {V, S}, fn_clamp_max},
    {"clamp", V, 3, 3, {V, S, S}, fn_clamp},
    {"vector", V, 1, 1, {S}, fn_vector},
    {"scalar", S, 1, 1, {V}, fn_scalar},
    {"histogram_quantile", V, 2, 2, {S, V}, fn_histogram_quantile},
};

const tw_pq_function *tw_pq_function_find(const char *name)
{
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
        if (!strcmp(functions[i].name, name))
            return &functions[i];
    }
    return NULL;
}

/* Prometheus 2.x functions outside the subset, so the error says so. */
bool tw_pq_function_unsupported(const char *name)
{
    static const char *const known[] = {
        "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "day_of_month",
        "day_of_week", "day_of_year", "days_in_month", "deg", "exp", "floor", "histogram_count", "histogram_fraction",
        "histogram_sum", "holt_winters", "hour", "idelta", "irate", "label_join", "label_replace",
        "ln", "log10", "log2", "minute", "month", "pi", "predict_linear", "present_over_time", "quantile_over_time",
        "rad", "resets", "round", "sgn", "sin", "sinh", "sort", "sort_desc", "sqrt", "stddev_over_time",
        "stdvar_over_time", "tan", "tanh", "timestamp", "year"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (!strcmp(known[i], name))
            return true;
    }
    return false;
}
