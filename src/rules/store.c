/*
 * store.c: the ring of recent samples (see store.h).
 *
 * Slots are a ring of timestamps; slot k of every series is its value at
 * times[k]. Series live in a chained hash table keyed by their canonical
 * label text, and in an array for iteration.
 */
#include "store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

/* Prometheus's stale marker, and a neighbour for "no sample". */
const uint64_t tw_store_stale_bits = 0x7ff0000000000002ULL;
const uint64_t tw_store_none_bits = 0x7ff0000000000003ULL;

#define TABLE_SIZE 1024

struct tw_store {
    size_t capacity, head, len; /* head: index of the open (newest) slot */
    int64_t *times;
    tw_series *table[TABLE_SIZE];
    tw_series **all;
    size_t count, cap_all;
    char **wanted;
    size_t wanted_count;
};

static double from_bits(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static uint64_t to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

double tw_store_stale(void) { return from_bits(tw_store_stale_bits); }
double tw_store_none(void) { return from_bits(tw_store_none_bits); }

bool tw_store_is_marker(double v)
{
    uint64_t b = to_bits(v);
    return b == tw_store_stale_bits || b == tw_store_none_bits;
}

static bool is_none(double v) { return to_bits(v) == tw_store_none_bits; }
static bool is_stale(double v) { return to_bits(v) == tw_store_stale_bits; }

int tw_store_new(size_t capacity, tw_store **out)
{
    tw_store *s = calloc(1, sizeof *s);
    if (!s || capacity < 2 || !(s->times = calloc(capacity, sizeof *s->times))) {
        free(s);
        return capacity < 2 ? TW_EINVAL : TW_ENOMEM;
    }
    s->capacity = capacity;
    s->head = capacity - 1;
    *out = s;
    return TW_OK;
}

void tw_store_free(tw_store *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->count; i++) {
        tw_lset_free(&s->all[i]->labels);
        free(s->all[i]->key);
        free(s->all[i]->values);
        free(s->all[i]);
    }
    for (size_t i = 0; i < s->wanted_count; i++)
        free(s->wanted[i]);
    free(s->wanted);
    free(s->all);
    free(s->times);
    free(s);
}

int tw_store_want(tw_store *s, const char *name)
{
    if (tw_store_wants(s, name) && s->wanted_count)
        return TW_OK;
    char **grown = realloc(s->wanted, (s->wanted_count + 1) * sizeof *grown);
    if (!grown)
        return TW_ENOMEM;
    s->wanted = grown;
    if (!(s->wanted[s->wanted_count] = strdup(name)))
        return TW_ENOMEM;
    s->wanted_count++;
    return TW_OK;
}

bool tw_store_wants(const tw_store *s, const char *name)
{
    if (s->wanted_count == 0)
        return true;
    for (size_t i = 0; i < s->wanted_count; i++) {
        if (!strcmp(s->wanted[i], name))
            return true;
    }
    return false;
}

size_t tw_store_capacity(const tw_store *s) { return s->capacity; }
size_t tw_store_series_count(const tw_store *s) { return s->count; }
tw_series *tw_store_series_at(const tw_store *s, size_t i) { return s->all[i]; }

void tw_store_begin(tw_store *s, int64_t t)
{
    s->head = (s->head + 1) % s->capacity;
    s->times[s->head] = t;
    if (s->len < s->capacity)
        s->len++;
    double none = tw_store_none();
    for (size_t i = 0; i < s->count; i++)
        s->all[i]->values[s->head] = none;
}

static uint64_t key_hash(const char *k)
{
    uint64_t h = 14695981039346656037ULL;
    for (; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ULL;
    return h;
}

static tw_series *lookup(tw_store *s, const char *key, uint64_t h)
{
    for (tw_series *x = s->table[h % TABLE_SIZE]; x; x = x->next) {
        if (!strcmp(x->key, key))
            return x;
    }
    return NULL;
}

static int add_series(tw_store *s, const tw_lset *labels, char *key, uint64_t h, const void *owner,
                      tw_series **out)
{
    tw_series *x = calloc(1, sizeof *x);
    if (!x || !(x->values = malloc(s->capacity * sizeof *x->values)) || tw_lset_copy(labels, &x->labels) != TW_OK)
        goto fail;
    if (s->count == s->cap_all) {
        size_t cap = s->cap_all ? 2 * s->cap_all : 64;
        tw_series **grown = realloc(s->all, cap * sizeof *grown);
        if (!grown)
            goto fail;
        s->all = grown;
        s->cap_all = cap;
    }
    double none = tw_store_none();
    for (size_t i = 0; i < s->capacity; i++)
        x->values[i] = none;
    x->key = key;
    x->owner = owner;
    x->next = s->table[h % TABLE_SIZE];
    s->table[h % TABLE_SIZE] = x;
    s->all[s->count++] = x;
    *out = x;
    return TW_OK;
fail:
    if (x) {
        tw_lset_free(&x->labels);
        free(x->values);
    }
    free(x);
    free(key);
    return TW_ENOMEM;
}

int tw_store_put(tw_store *s, const tw_lset *labels, double value, const void *owner)
{
    if (s->len == 0)
        return TW_EINVAL;
    char *key = tw_lset_text(labels);
    if (!key)
        return TW_ENOMEM;
    uint64_t h = key_hash(key);
    tw_series *x = lookup(s, key, h);
    if (x) {
        free(key);
    } else {
        int rc = add_series(s, labels, key, h, owner, &x);
        if (rc != TW_OK)
            return rc;
    }
    x->values[s->head] = value;
    return TW_OK;
}

/* The newest slot before the open one where the series has a sample. */
static bool previous_value(const tw_store *s, const tw_series *x)
{
    for (size_t n = 1; n < s->len; n++) {
        double v = x->values[(s->head + s->capacity - n) % s->capacity];
        if (!is_none(v))
            return !is_stale(v);
    }
    return false;
}

void tw_store_end(tw_store *s, const void *owner)
{
    if (s->len == 0)
        return;
    for (size_t i = 0; i < s->count; i++) {
        tw_series *x = s->all[i];
        if (x->owner == owner && is_none(x->values[s->head]) && previous_value(s, x))
            x->values[s->head] = tw_store_stale();
    }
}

/* Slot index n steps back from the newest (n = 0: newest). */
static size_t slot(const tw_store *s, size_t n) { return (s->head + s->capacity - n) % s->capacity; }

size_t tw_store_range(const tw_store *s, const tw_series *x, int64_t from, int64_t to, tw_point *out, size_t cap)
{
    /* walk back to find the oldest slot inside the window */
    size_t first = s->len; /* in steps back; s->len means none */
    for (size_t n = 0; n < s->len; n++) {
        int64_t t = s->times[slot(s, n)];
        if (t < from)
            break;
        if (t <= to)
            first = n;
    }
    size_t count = 0;
    if (first == s->len)
        return 0;
    for (size_t n = first + 1; n-- > 0;) {
        size_t k = slot(s, n);
        if (s->times[k] > to)
            break;
        double v = x->values[k];
        if (tw_store_is_marker(v) || count == cap)
            continue;
        out[count++] = (tw_point){s->times[k], v};
    }
    return count;
}

bool tw_store_instant(const tw_store *s, const tw_series *x, int64_t t, int64_t lookback, tw_point *out)
{
    for (size_t n = 0; n < s->len; n++) {
        size_t k = slot(s, n);
        int64_t at = s->times[k];
        if (at > t)
            continue;
        if (at < t - lookback)
            return false;
        double v = x->values[k];
        if (is_none(v))
            continue;
        if (is_stale(v))
            return false;
        *out = (tw_point){at, v};
        return true;
    }
    return false;
}
