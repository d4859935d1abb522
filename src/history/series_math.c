/*
 * series_math.c: the little statistics compare.c and baseline.c share
 * over recorded series: a median, a series' noise (the median change
 * between successive values) and its value at a step.
 */
#include <math.h>
#include <stdlib.h>

#include "history_internal.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double tw_history_median(double *v, size_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double tw_history_noise(const tw_history_series *s)
{
    if (!s || s->count < 3)
        return 0;
    double *d = malloc(s->count * sizeof *d);
    if (!d)
        return 0;
    size_t n = 0;
    for (size_t i = 1; i < s->count; i++) {
        if (isfinite(s->value[i]) && isfinite(s->value[i - 1]))
            d[n++] = fabs(s->value[i] - s->value[i - 1]);
    }
    double m = n ? tw_history_median(d, n) : 0;
    free(d);
    return m;
}

double tw_history_value_at(const tw_history_series *s, double pos, size_t *hint)
{
    size_t start = 0;
    if (!hint)
        hint = &start;
    if (!s || !s->count || pos < s->pos[0] || pos > s->pos[s->count - 1])
        return NAN;
    size_t i = *hint < s->count ? *hint : 0;
    if (s->pos[i] > pos)
        i = 0;
    while (i + 1 < s->count && s->pos[i + 1] < pos)
        i++;
    *hint = i;
    if (i + 1 >= s->count)
        return s->value[s->count - 1];
    double x0 = s->pos[i], x1 = s->pos[i + 1];
    if (pos <= x0)
        return s->value[i];
    if (x1 == x0)
        return s->value[i + 1];
    return s->value[i] + (s->value[i + 1] - s->value[i]) * (pos - x0) / (x1 - x0);
}
