/*
 * minmax.c: bounded min/max-per-bucket series (see minmax.h).
 */
#include "minmax.h"

#include <math.h>
#include <stdbool.h>

static tw_minmax_bucket merged(const tw_minmax_bucket *a, const tw_minmax_bucket *b)
{
    tw_minmax_bucket m = *a;
    if (b->v_min < m.v_min)
        m.v_min = b->v_min, m.t_min = b->t_min;
    if (b->v_max > m.v_max)
        m.v_max = b->v_max, m.t_max = b->t_max;
    m.n += b->n;
    return m;
}

void tw_minmax_add(tw_minmax *s, double t, double v)
{
    if (!isfinite(v))
        return;
    if (s->per_bucket == 0)
        s->per_bucket = 1;
    s->samples++;
    if (s->count > 0 && s->b[s->count - 1].n < s->per_bucket) {
        tw_minmax_bucket *b = &s->b[s->count - 1];
        tw_minmax_bucket one = {t, v, t, v, 1};
        *b = merged(b, &one);
        return;
    }
    if (s->count == TW_MINMAX_BUCKETS) {
        for (int i = 0; i < TW_MINMAX_BUCKETS / 2; i++)
            s->b[i] = merged(&s->b[2 * i], &s->b[2 * i + 1]);
        s->count = TW_MINMAX_BUCKETS / 2;
        s->per_bucket *= 2;
        /* every bucket is full now: the sample starts the next one */
    }
    s->b[s->count++] = (tw_minmax_bucket){t, v, t, v, 1};
}

size_t tw_minmax_points(const tw_minmax *s, double *t, double *v)
{
    size_t n = 0;
    for (int i = 0; i < s->count; i++) {
        const tw_minmax_bucket *b = &s->b[i];
        bool max_first = b->t_max < b->t_min;
        t[n] = max_first ? b->t_max : b->t_min;
        v[n++] = max_first ? b->v_max : b->v_min;
        if (b->t_max != b->t_min || b->v_max != b->v_min) {
            t[n] = max_first ? b->t_min : b->t_max;
            v[n++] = max_first ? b->v_min : b->v_max;
        }
    }
    return n;
}
