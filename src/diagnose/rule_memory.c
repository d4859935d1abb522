/*
 * rule_memory.c: device memory the framework reports (max_mem_reserved,
 * memory, max_mem, Peak GPU Memory...): steady growth with a projection of
 * the step where it would run out. Out-of-memory errors are rule_oom.c.
 */
#include <math.h>
#include <stdlib.h>

#include "diagnose.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* A jump then flat (a peak counter after one huge batch): the index of the
 * point after the one rise that makes most of the range, with the series
 * flat before it and after it; 0 when the series is not such a jump (a
 * steady climb is many small rises; a jump and back is a spike of
 * check_memory_spike's). Not in the last tenth: a rise at the end may be
 * growth starting. */
static size_t memory_jump(const double *v, size_t n)
{
    if (n < 10)
        return 0;
    size_t k = 0;
    double lo = v[0], hi = v[0], rise = 0;
    for (size_t i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
        if (v[i] - v[i - 1] > rise) {
            rise = v[i] - v[i - 1];
            k = i;
        }
    }
    if (k == 0 || k >= n - n / 10 || !(rise > 0.75 * (hi - lo)) || !(rise > 0.5 * v[k - 1]))
        return 0;
    for (size_t i = 0; i < k; i++) {
        if (fabs(v[i] - v[k - 1]) > 0.2 * rise)
            return 0;
    }
    for (size_t i = k; i < n; i++) {
        if (fabs(v[i] - v[k]) > 0.2 * rise)
            return 0;
    }
    return k;
}

static void check_memory(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    double *v = malloc(sizeof(double) * TW_SERIES_MAX);
    double *pos = malloc(sizeof(double) * TW_SERIES_MAX);
    double *tmp = malloc(sizeof(double) * TW_SERIES_MAX);
    if (!v || !pos || !tmp)
        goto done;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || !rk->used)
            continue;
        size_t n = tw_series_values(&rk->series, TW_F_MEM, v, pos);
        if (n < 10)
            continue;
        /* least squares of memory over position */
        double mx = 0, my = 0;
        for (size_t k = 0; k < n; k++)
            mx += pos[k], my += v[k];
        mx /= (double)n;
        my /= (double)n;
        double sxy = 0, sxx = 0, syy = 0;
        for (size_t k = 0; k < n; k++) {
            sxy += (pos[k] - mx) * (v[k] - my);
            sxx += (pos[k] - mx) * (pos[k] - mx);
            syy += (v[k] - my) * (v[k] - my);
        }
        if (sxx <= 0 || syy <= 0)
            continue;
        double slope = sxy / sxx, corr = sxy / sqrt(sxx * syy);
        size_t q = n / 4;
        for (size_t k = 0; k < q; k++)
            tmp[k] = v[k];
        double first = tw_median(tmp, q);
        for (size_t k = 0; k < q; k++)
            tmp[k] = v[n - q + k];
        double last = tw_median(tmp, q);
        double growth = first > 0 ? (last - first) / first : 0;
        if (!(growth >= t->mem_growth && corr >= 0.7 && slope > 0) || memory_jump(v, n) > 0)
            continue; /* a jump then flat is a spike (check_memory_spike), not growth */
        char a[32], b[32];
        tw_finding *f = tw_finding_add(out, "memory_growth", TW_SEV_WARNING,
                                       "Device memory grows steadily on rank %d: +%s%% over the run", rk->rank,
                                       tw_fmt_number(growth * 100, 0, a, sizeof a));
        if (!f)
            break;
        tw_finding_at(f, run, &rk->last, rk->rank);
        f->value = growth;
        tw_finding_evidence(f, "median %s GiB in the first quarter, %s GiB in the last (step %.0f)",
                            tw_fmt_number(first / GIB, 2, a, sizeof a), tw_fmt_number(last / GIB, 2, b, sizeof b),
                            pos[n - 1]);
        tw_finding_evidence(f, "slope %s MiB per step, correlation with progress %.2f",
                            tw_fmt_number(slope / (1024 * 1024), 3, a, sizeof a), corr);
        if (t->device_memory > 0) {
            double at = pos[n - 1] + (t->device_memory - v[n - 1]) / slope;
            tw_finding_evidence(f, "at this rate the %.1f GiB device is full around step %.0f", t->device_memory / GIB,
                                at);
            f->projection = (struct tw_projection){true, pos[n - 1], v[n - 1], slope, at, t->device_memory};
            if (at < pos[n - 1] * 2)
                f->severity = TW_SEV_ERROR;
        } else {
            tw_finding_evidence(f, "pass --device-memory GIB to project the step at which it runs out");
        }
        tw_finding_recommend(
            f, "Something keeps tensors alive across steps: accumulating losses without .item()/.numpy(), growing "
               "caches or lists, retain_graph, metrics holding outputs. Call "
               "paddle.device.cuda.empty_cache()/torch.cuda.empty_cache() only to confirm; fix the reference.");
    }
done:
    free(v);
    free(pos);
    free(tmp);
}

const tw_rule tw_rule_memory = {"memory_growth", "device memory rising with progress", check_memory};

/* The first event of the rank at or just before step pos that names input
 * shapes ("input0=<ndarray float32 shape=[64000,16] ...>", "image shape
 * [1, 3, 2160, 3840]"): what the batch of a spike was. */
static const tw_event_note *shapes_near(const tw_run *run, int rank, double before, double pos)
{
    for (int i = 0; i < run->shape_note_count; i++) {
        const tw_event_note *e = &run->shape_notes[i];
        if (e->rank == rank && e->last_pos >= before && e->last_pos <= pos)
            return e;
    }
    return NULL;
}

static void spike_evidence(tw_finding *f, const tw_run *run, const tw_rank *rk, const tw_point *before,
                           const tw_point *peak)
{
    char where[600];
    const tw_event_note *e = shapes_near(run, rk->rank, before ? before->pos : peak->pos, peak->pos);
    if (e)
        tw_finding_evidence(f, "the log describes the batch: %s (%s)", e->detail[0] ? e->detail : e->message,
                            tw_where(run, e->file, e->line, where, sizeof where));
    tw_finding_recommend(
        f, "The peak, not the average, decides an OOM: look for unusually large batches (variable-length inputs or "
           "uncropped images: bucket, cap or crop them) or work done inside the step at that point (evaluation, "
           "checkpointing).");
}

/* The points of the rank that report memory, their values into v. */
static size_t memory_points(const tw_rank *rk, const tw_point **points, double *v)
{
    size_t n = 0;
    for (size_t k = 0; k < rk->series.count; k++) {
        const tw_point *p = &rk->series.points[k];
        if (!(p->fields & TW_F_MEM))
            continue;
        points[n] = p;
        v[n++] = p->mem;
    }
    return n;
}

/* One rise that stays: a peak counter (max_memory_allocated) after one
 * batch far larger than the rest. */
static bool report_jump(const tw_run *run, const tw_rank *rk, const tw_point **points, const double *v, size_t n,
                        tw_findings *out)
{
    size_t k = memory_jump(v, n);
    if (k == 0)
        return false;
    const tw_point *before = points[k - 1], *peak = points[k];
    char a[32], b[32], where[600];
    tw_fmt_bytes(peak->mem, a, sizeof a);
    tw_fmt_bytes(before->mem, b, sizeof b);
    tw_finding *f = tw_finding_add(out, "memory_spike", peak->mem >= 2 * before->mem ? TW_SEV_WARNING : TW_SEV_INFO,
                                   "Device memory jumped to %s at step %.0f on rank %d (from %s) and stayed there", a,
                                   peak->pos, rk->rank, b);
    if (!f)
        return true;
    tw_finding_at(f, run, peak, rk->rank);
    f->value = peak->mem / before->mem;
    tw_finding_evidence(f, "%s at step %.0f, %s at step %.0f (%s): one rise, flat before and after it over %zu "
                           "records (not growth)",
                        b, before->pos, a, peak->pos, tw_where(run, peak->file, peak->line, where, sizeof where), n);
    spike_evidence(f, run, rk, before, peak);
    return true;
}

/* A short excursion far above the usual level: one batch much larger than the
 * rest, an evaluation inside the step, a cache filled once. */
static void check_memory_spike(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    double *v = malloc(sizeof(double) * TW_SERIES_MAX);
    const tw_point **points = malloc(sizeof *points * TW_SERIES_MAX);
    if (!v || !points)
        goto done;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || !rk->used)
            continue;
        size_t n = memory_points(rk, points, v);
        if (n < 10 || report_jump(run, rk, points, v, n, out))
            continue;
        size_t peak_index = 0;
        for (size_t k = 1; k < n; k++)
            peak_index = v[k] > v[peak_index] ? k : peak_index;
        const tw_point *peak = points[peak_index];
        double median = tw_median(v, n);
        /* at the very end it is growth, not a spike */
        if (!(median > 0 && peak->mem > 1.5 * median && peak_index < n - n / 10))
            continue;
        char where[600], a[32], b[32];
        tw_fmt_number(peak->mem / GIB, 2, a, sizeof a);
        tw_fmt_number(median / GIB, 2, b, sizeof b);
        tw_finding *f = tw_finding_add(out, "memory_spike", TW_SEV_INFO,
                                       "Device memory spiked to %s GiB at step %.0f on rank %d (%s GiB usually)", a,
                                       peak->pos, rk->rank, b);
        if (!f)
            break;
        tw_finding_at(f, run, peak, rk->rank);
        f->value = peak->mem / median;
        tw_finding_evidence(f, "peak %s GiB at step %.0f (%s); median %s GiB over %zu records", a, peak->pos,
                            tw_where(run, peak->file, peak->line, where, sizeof where), b, n);
        spike_evidence(f, run, rk, peak_index > 0 ? points[peak_index - 1] : NULL, peak);
    }
done:
    free(v);
    free(points);
}

const tw_rule tw_rule_memory_spike = {"memory_spike", "device memory far above its usual level", check_memory_spike};
