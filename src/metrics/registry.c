/*
 * registry.c: registries, families and series (see metrics.h).
 *
 * Registration validates names the way Prometheus does and enforces the
 * guards (label count, series limit). Series live in a per-family hash table
 * under the family's mutex; once created a cell never moves, so handles stay
 * valid and updates need no lock at all: they are C11 atomics on the cell.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/clock.h"
#include "internal.h"
#include "trainwatch/error.h"

const double tw_step_time_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
const size_t tw_step_time_bucket_count = sizeof tw_step_time_buckets / sizeof tw_step_time_buckets[0];

double tw_bits_to_double(uint64_t bits)
{
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

uint64_t tw_double_to_bits(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

/* ---- names ---------------------------------------------------------- */

static bool valid_metric_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                  (p != s && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static bool valid_label_name(const char *s)
{
    if (!s || !*s || strncmp(s, "__", 2) == 0 || strcmp(s, "le") == 0 || strcmp(s, "quantile") == 0)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (p != s && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

/* ---- buckets -------------------------------------------------------- */

size_t tw_buckets_linear(double start, double width, size_t count, double *out)
{
    if (count == 0 || !(width > 0) || !isfinite(start))
        return 0;
    for (size_t i = 0; i < count; i++)
        out[i] = start + width * (double)i;
    return count;
}

size_t tw_buckets_exponential(double start, double factor, size_t count, double *out)
{
    if (count == 0 || !(start > 0) || !(factor > 1))
        return 0;
    double v = start;
    for (size_t i = 0; i < count; i++, v *= factor)
        out[i] = v;
    return count;
}

/* ---- registries ------------------------------------------------------ */

static int register_dropped_counter(tw_registry *r)
{
    return tw_counter_new(r, "trainwatch_dropped_series_total",
                          "Series refused because a family reached its series limit.", &r->dropped);
}

int tw_registry_new(tw_registry **out)
{
    tw_registry *r = calloc(1, sizeof *r);
    if (!r)
        return TW_ENOMEM;
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->collect_lock, NULL);
    int rc = register_dropped_counter(r);
    if (rc != TW_OK) {
        tw_registry_free(r);
        return rc;
    }
    *out = r;
    return TW_OK;
}

static void family_free(tw_family *f)
{
    for (size_t i = 0; i < f->count; i++) {
        tw_cell *c = f->order[i];
        for (size_t k = 0; k < f->label_count; k++)
            free(c->labels[k]);
        free((void *)c->buckets);
        free(c->stripes);
        free(c);
    }
    for (size_t k = 0; k < f->label_count; k++)
        free(f->label_names[k]);
    pthread_mutex_destroy(&f->lock);
    free(f->order);
    free(f->table);
    free(f->bounds);
    free(f->name);
    free(f->help);
    free(f);
}

void tw_registry_free(tw_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->family_count; i++)
        family_free(r->families[i]);
    for (size_t i = 0; i < r->collector_count; i++) {
        if (r->collectors[i].release)
            r->collectors[i].release(r->collectors[i].arg);
    }
    free(r->families);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->collect_lock);
    free(r);
}

static tw_registry *default_registry;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void make_default(void)
{
    if (tw_registry_new(&default_registry) != TW_OK)
        default_registry = NULL;
}

tw_registry *tw_registry_default(void)
{
    pthread_once(&default_once, make_default);
    return default_registry;
}

int tw_registry_add_collector(tw_registry *r, tw_collector_fn fn, void *arg, void (*release)(void *arg))
{
    pthread_mutex_lock(&r->lock);
    int rc = TW_ELIMIT;
    if (r->collector_count < TW_COLLECTORS_MAX) {
        r->collectors[r->collector_count].fn = fn;
        r->collectors[r->collector_count].arg = arg;
        r->collectors[r->collector_count].release = release;
        r->collector_count++;
        rc = TW_OK;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* ---- families -------------------------------------------------------- */

static char *base_name(const tw_family_options *o)
{
    size_t n = strlen(o->name);
    if (o->type == TW_METRIC_COUNTER && ends_with(o->name, "_total"))
        n -= 6;
    else if (o->type == TW_METRIC_INFO && ends_with(o->name, "_info"))
        n -= 5;
    return strndup(o->name, n);
}

static int check_options(const tw_family_options *o)
{
    if (!valid_metric_name(o->name) || o->label_count > TW_LABELS_MAX)
        return o->label_count > TW_LABELS_MAX ? TW_ELIMIT : TW_ENAME;
    for (size_t i = 0; i < o->label_count; i++) {
        if (!valid_label_name(o->label_names[i]))
            return TW_ENAME;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(o->label_names[i], o->label_names[j]) == 0)
                return TW_ENAME;
        }
    }
    if (o->type == TW_METRIC_HISTOGRAM && o->buckets) {
        for (size_t i = 0; i < o->bucket_count; i++) {
            if (!isfinite(o->buckets[i]) || (i > 0 && !(o->buckets[i] > o->buckets[i - 1])))
                return TW_EINVAL;
        }
    }
    return TW_OK;
}

/* The names a family writes must not collide with another family's. */
static bool same_exposed_name(const tw_family *a, const char *base)
{
    return strcmp(a->name, base) == 0;
}

int tw_family_register(tw_registry *r, const tw_family_options *o, tw_family **out)
{
    int rc = check_options(o);
    if (rc != TW_OK)
        return rc;
    tw_family *f = calloc(1, sizeof *f);
    if (!f)
        return TW_ENOMEM;
    pthread_mutex_init(&f->lock, NULL);
    f->registry = r;
    f->type = o->type;
    f->name = base_name(o);
    f->help = strdup(o->help ? o->help : "");
    f->label_count = o->label_count;
    f->series_limit = o->series_limit ? o->series_limit : TW_SERIES_LIMIT_DEFAULT;
    bool ok = f->name && f->help;
    for (size_t i = 0; i < o->label_count && ok; i++)
        ok = (f->label_names[i] = strdup(o->label_names[i])) != NULL;
    if (ok && o->type == TW_METRIC_HISTOGRAM) {
        const double *b = o->buckets ? o->buckets : tw_step_time_buckets;
        size_t n = o->buckets ? o->bucket_count : tw_step_time_bucket_count;
        f->bounds = malloc(sizeof(double) * (n ? n : 1));
        ok = f->bounds != NULL;
        if (ok) {
            memcpy(f->bounds, b, sizeof(double) * n);
            f->bound_count = n;
        }
    }
    if (!ok) {
        family_free(f);
        return TW_ENOMEM;
    }
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->family_count; i++) {
        if (same_exposed_name(r->families[i], f->name)) {
            pthread_mutex_unlock(&r->lock);
            family_free(f);
            return TW_EEXIST;
        }
    }
    if (r->family_count == r->family_cap) {
        size_t cap = r->family_cap ? r->family_cap * 2 : 16;
        tw_family **families = realloc(r->families, sizeof *families * cap);
        if (!families) {
            pthread_mutex_unlock(&r->lock);
            family_free(f);
            return TW_ENOMEM;
        }
        r->families = families;
        r->family_cap = cap;
    }
    r->families[r->family_count++] = f;
    pthread_mutex_unlock(&r->lock);
    *out = f;
    return TW_OK;
}

void tw_family_unregister(tw_family *f)
{
    tw_registry *r = f->registry;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->family_count; i++) {
        if (r->families[i] == f) {
            memmove(&r->families[i], &r->families[i + 1], sizeof *r->families * (r->family_count - i - 1));
            r->family_count--;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    family_free(f);
}

/* ---- series ---------------------------------------------------------- */

static uint64_t hash_labels(const char *const *values, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)values[i]; *p; p++)
            h = (h ^ *p) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
    }
    return h;
}

static bool labels_equal(const tw_cell *c, const char *const *values, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(c->labels[i], values[i]) != 0)
            return false;
    }
    return true;
}

static int grow_table(tw_family *f)
{
    size_t size = f->table_size ? f->table_size * 2 : 16;
    tw_cell **table = calloc(size, sizeof *table);
    if (!table)
        return TW_ENOMEM;
    for (size_t i = 0; i < f->count; i++) {
        tw_cell *c = f->order[i];
        c->next = table[c->hash & (size - 1)];
        table[c->hash & (size - 1)] = c;
    }
    free(f->table);
    f->table = table;
    f->table_size = size;
    return TW_OK;
}

static tw_cell *new_cell(tw_family *f, const char *const *values, uint64_t hash)
{
    tw_cell *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->family = f;
    c->hash = hash;
    c->created = tw_wall_clock();
    bool ok = true;
    for (size_t i = 0; i < f->label_count && ok; i++)
        ok = (c->labels[i] = strdup(values[i])) != NULL;
    if (ok && (f->type == TW_METRIC_COUNTER || f->type == TW_METRIC_HISTOGRAM))
        ok = (c->stripes = aligned_alloc(64, sizeof(tw_stripe) * (TW_STRIPES + 1))) != NULL;
    if (c->stripes)
        memset(c->stripes, 0, sizeof(tw_stripe) * (TW_STRIPES + 1));
    if (ok && f->type == TW_METRIC_HISTOGRAM) {
        c->bucket_row = (f->bound_count + 1 + 7) & ~(size_t)7;
        size_t bytes = sizeof *c->buckets * c->bucket_row * (TW_STRIPES + 1);
        ok = (c->buckets = aligned_alloc(64, bytes)) != NULL;
        if (ok)
            memset((void *)c->buckets, 0, bytes);
    }
    if (f->type == TW_METRIC_INFO)
        atomic_store(&c->bits, tw_double_to_bits(1));
    if (!ok) {
        for (size_t i = 0; i < f->label_count; i++)
            free(c->labels[i]);
        free(c->stripes);
        free((void *)c->buckets);
        free(c);
        return NULL;
    }
    return c;
}

int tw_family_series(tw_family *f, const char *const *values, tw_cell **out)
{
    *out = NULL;
    for (size_t i = 0; i < f->label_count; i++) {
        if (!values || !values[i])
            return TW_ELABELS;
    }
    uint64_t hash = hash_labels(values, f->label_count);
    pthread_mutex_lock(&f->lock);
    if (f->table_size) {
        for (tw_cell *c = f->table[hash & (f->table_size - 1)]; c; c = c->next) {
            if (c->hash == hash && labels_equal(c, values, f->label_count)) {
                pthread_mutex_unlock(&f->lock);
                *out = c;
                return TW_OK;
            }
        }
    }
    int rc = TW_OK;
    if (f->count >= f->series_limit) {
        rc = TW_ELIMIT;
    } else if ((f->count + 1) * 4 > f->table_size * 3 && (rc = grow_table(f)) != TW_OK) {
    } else if (f->count == f->order_cap) {
        size_t cap = f->order_cap ? f->order_cap * 2 : 8;
        tw_cell **order = realloc(f->order, sizeof *order * cap);
        if (!order)
            rc = TW_ENOMEM;
        else
            f->order = order, f->order_cap = cap;
    }
    tw_cell *c = NULL;
    if (rc == TW_OK && !(c = new_cell(f, values, hash)))
        rc = TW_ENOMEM;
    if (rc == TW_OK) {
        c->next = f->table[hash & (f->table_size - 1)];
        f->table[hash & (f->table_size - 1)] = c;
        f->order[f->count++] = c;
    }
    pthread_mutex_unlock(&f->lock);
    if (rc == TW_ELIMIT && f->registry->dropped)
        tw_counter_inc(f->registry->dropped);
    *out = c;
    return rc;
}

static int single(tw_registry *r, const tw_family_options *o, tw_cell **out)
{
    tw_family *f;
    int rc = tw_family_register(r, o, &f);
    if (rc != TW_OK)
        return rc;
    rc = tw_family_series(f, NULL, out);
    if (rc != TW_OK)
        tw_family_unregister(f);
    return rc;
}

int tw_counter_new(tw_registry *r, const char *name, const char *help, tw_counter **out)
{
    tw_family_options o = {.name = name, .help = help, .type = TW_METRIC_COUNTER};
    return single(r, &o, out);
}

int tw_gauge_new(tw_registry *r, const char *name, const char *help, tw_gauge **out)
{
    tw_family_options o = {.name = name, .help = help, .type = TW_METRIC_GAUGE};
    return single(r, &o, out);
}

int tw_histogram_new(tw_registry *r, const char *name, const char *help, const double *buckets, size_t count,
                     tw_histogram **out)
{
    tw_family_options o = {
        .name = name, .help = help, .type = TW_METRIC_HISTOGRAM, .buckets = buckets, .bucket_count = count};
    return single(r, &o, out);
}

int tw_info_new(tw_registry *r, const char *name, const char *help, size_t label_count, const char *const *label_names,
                const char *const *label_values)
{
    tw_family_options o = {
        .name = name, .help = help, .type = TW_METRIC_INFO, .label_count = label_count, .label_names = label_names};
    tw_family *f;
    int rc = tw_family_register(r, &o, &f);
    if (rc != TW_OK)
        return rc;
    tw_cell *c;
    rc = tw_family_series(f, label_values, &c);
    if (rc != TW_OK)
        tw_family_unregister(f);
    return rc;
}

/* ---- updates: atomics only ------------------------------------------- */

/* Each thread gets a stripe number once; the first TW_STRIPES threads own
 * theirs for the life of the process (numbers are never reused), later ones
 * share stripe TW_STRIPES. */
static atomic_uint next_slot;
static _Thread_local unsigned my_slot = UINT32_MAX;

static inline unsigned slot(void)
{
    if (my_slot == UINT32_MAX) {
        unsigned s = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
        my_slot = s < TW_STRIPES ? s : TW_STRIPES;
    }
    return my_slot;
}

static void add_double(_Atomic uint64_t *bits, double v)
{
    uint64_t old = atomic_load_explicit(bits, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(bits, &old, tw_double_to_bits(tw_bits_to_double(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* Adds to a stripe word: a plain load and store for its only writer,
 * an atomic read-modify-write on the shared stripe. */
static inline void stripe_add(_Atomic uint64_t *p, uint64_t v, unsigned s)
{
    if (s < TW_STRIPES)
        atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + v, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

static inline void stripe_add_double(_Atomic uint64_t *p, double v, unsigned s)
{
    if (s < TW_STRIPES)
        atomic_store_explicit(p,
                              tw_double_to_bits(tw_bits_to_double(atomic_load_explicit(p, memory_order_relaxed)) + v),
                              memory_order_relaxed);
    else
        add_double(p, v);
}

/* Updates take NULL, the handle a refused series leaves (TW_ELIMIT), and do
 * nothing: a series past its family's limit is counted once, at lookup, and
 * never takes the process down at its every update. */
void tw_counter_inc(tw_counter *c)
{
    if (!c)
        return;
    unsigned s = slot();
    stripe_add(&c->stripes[s].count, 1, s);
}

int tw_counter_add(tw_counter *c, double v)
{
    if (!(v >= 0))
        return TW_EINVAL;
    if (!c)
        return TW_OK;
    unsigned s = slot();
    if (v == floor(v) && v < 1e15)
        stripe_add(&c->stripes[s].count, (uint64_t)v, s);
    else
        stripe_add_double(&c->stripes[s].bits, v, s);
    return TW_OK;
}

void tw_gauge_set(tw_gauge *g, double v)
{
    if (g)
        atomic_store_explicit(&g->bits, tw_double_to_bits(v), memory_order_relaxed);
}

void tw_gauge_add(tw_gauge *g, double v)
{
    if (g)
        add_double(&g->bits, v);
}

void tw_gauge_inc(tw_gauge *g)
{
    tw_gauge_add(g, 1);
}
void tw_gauge_dec(tw_gauge *g)
{
    tw_gauge_add(g, -1);
}

void tw_histogram_observe(tw_histogram *h, double v)
{
    if (!h)
        return;
    const tw_family *f = h->family;
    /* binary search for the first bound >= v; NaN lands in +Inf */
    size_t lo = 0, hi = f->bound_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v <= f->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    unsigned s = slot();
    stripe_add(&h->buckets[s * h->bucket_row + lo], 1, s);
    stripe_add_double(&h->stripes[s].bits, v, s);
}

double tw_cell_value(const tw_cell *c)
{
    if (c->family->type != TW_METRIC_COUNTER)
        return tw_bits_to_double(atomic_load_explicit(&c->bits, memory_order_relaxed));
    uint64_t count = 0;
    double frac = 0;
    for (unsigned s = 0; s <= TW_STRIPES; s++) {
        count += atomic_load_explicit(&c->stripes[s].count, memory_order_relaxed);
        frac += tw_bits_to_double(atomic_load_explicit(&c->stripes[s].bits, memory_order_relaxed));
    }
    return (double)count + frac;
}

uint64_t tw_histogram_bucket(const tw_cell *c, size_t i)
{
    uint64_t n = 0;
    for (unsigned s = 0; s <= TW_STRIPES; s++)
        n += atomic_load_explicit(&c->buckets[s * c->bucket_row + i], memory_order_relaxed);
    return n;
}

double tw_histogram_sum(const tw_cell *c)
{
    double sum = 0;
    for (unsigned s = 0; s <= TW_STRIPES; s++)
        sum += tw_bits_to_double(atomic_load_explicit(&c->stripes[s].bits, memory_order_relaxed));
    return sum;
}
