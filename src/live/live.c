/*
 * live.c: records to live metrics and warnings (see live.h).
 *
 * Series handles are looked up once per rank (the first record of a rank)
 * and kept, so a record costs a few atomic updates. Stall detection keeps the
 * last 32 intervals between new steps per rank and compares the time since
 * the last step with ten times their median.
 */
#include "../core/clock.h"
#include "trainwatch/live.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainwatch/error.h"

#define RANKS_MAX 4096
#define INTERVALS 32

typedef struct live_rank {
    bool ready;
    tw_gauge *loss, *step, *epoch, *lr, *ips, *last_progress, *stalled, *nan_streak, *interval;
    tw_histogram *step_time, *data_wait;
    tw_counter *nan, *stalls;
    tw_counter *events[TW_EV_COUNT];
    tw_counter *records[3];
    double last_step_wall;
    double last_pos;
    bool have_pos;
    double intervals[INTERVALS];
    int interval_count, interval_head;
    bool is_stalled;
    bool nan_reported;
    double streak;
    char rank_text[16];
} live_rank;

struct tw_live {
    tw_registry *registry;
    char *job;
    double stall_after;
    FILE *warnings;
    unsigned long warning_count;
    tw_family *f_loss, *f_step, *f_epoch, *f_lr, *f_ips, *f_last, *f_stalled, *f_step_time, *f_data_wait, *f_nan,
        *f_stalls, *f_events, *f_records, *f_eval, *f_nan_streak, *f_interval;
    live_rank *ranks[RANKS_MAX];
};


static int family(tw_live *l, const char *name, const char *help, tw_metric_type type, size_t extra_label,
                  const char *extra, tw_family **out)
{
    const char *labels[] = {"job", "rank", extra};
    tw_family_options o = {.name = name, .help = help, .type = type, .label_count = 2 + extra_label,
                           .label_names = labels, .series_limit = 10000};
    return tw_family_register(l->registry, &o, out);
}

int tw_live_new(const tw_live_options *o, tw_live **out)
{
    tw_live *l = calloc(1, sizeof *l);
    if (!l)
        return TW_ENOMEM;
    l->registry = o->registry ? o->registry : tw_registry_default();
    l->job = strdup(o->job ? o->job : "trainwatch");
    l->stall_after = o->stall_after;
    l->warnings = o->warnings;
    int rc = l->job ? TW_OK : TW_ENOMEM;
#define FAM(var, name, help, type, n, extra)                                                                   \
    if (rc == TW_OK)                                                                                           \
    rc = family(l, name, help, type, n, extra, &l->var)
    FAM(f_loss, "trainwatch_train_loss", "Training loss, as the log last printed it.", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_step, "trainwatch_train_step", "Training progress: the global step of the last step record.", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_epoch, "trainwatch_train_epoch", "Epoch of the last step record.", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_lr, "trainwatch_learning_rate", "Learning rate of the last step record.", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_ips, "trainwatch_samples_per_second", "Throughput the log reports (ips).", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_last, "trainwatch_last_progress_timestamp_seconds", "When the last new training step was seen (unix time).", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_stalled, "trainwatch_stalled", "1 while no training step has been seen for the stall time.", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_step_time, "trainwatch_step_duration_seconds", "Step time the log reports (batch_cost, time, ms/step).", TW_METRIC_HISTOGRAM, 0, NULL);
    FAM(f_data_wait, "trainwatch_data_wait_seconds", "Data-loader wait per step the log reports (reader_cost, data_time).", TW_METRIC_HISTOGRAM, 0, NULL);
    FAM(f_nan, "trainwatch_nan_loss_total", "Step records whose loss was NaN or Inf.", TW_METRIC_COUNTER, 0, NULL);
    FAM(f_stalls, "trainwatch_stalls_total", "Stalls detected (no progress for the stall time).", TW_METRIC_COUNTER, 0, NULL);
    FAM(f_events, "trainwatch_log_events_total", "Events found in the log, by kind.", TW_METRIC_COUNTER, 1, "event");
    FAM(f_records, "trainwatch_records_total", "Records parsed from the log, by kind.", TW_METRIC_COUNTER, 1, "kind");
    FAM(f_eval, "trainwatch_eval_metric", "Last value of each evaluation metric.", TW_METRIC_GAUGE, 1, "name");
    FAM(f_nan_streak, "trainwatch_nan_loss_streak", "Consecutive step records whose loss was NaN or Inf (0 after a finite loss).", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_interval, "trainwatch_step_interval_seconds", "Usual wall time between new steps: the median of the last 32.", TW_METRIC_GAUGE, 0, NULL);
#undef FAM
    if (rc != TW_OK) {
        tw_live_free(l);
        return rc;
    }
    *out = l;
    return TW_OK;
}

void tw_live_free(tw_live *l)
{
    if (!l)
        return;
    for (int i = 0; i < RANKS_MAX; i++)
        free(l->ranks[i]);
    tw_family *all[] = {l->f_loss, l->f_step,      l->f_epoch,     l->f_lr,  l->f_ips,    l->f_last,    l->f_stalled,
                        l->f_step_time, l->f_data_wait, l->f_nan, l->f_stalls, l->f_events, l->f_records, l->f_eval,
                        l->f_nan_streak, l->f_interval};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i])
            tw_family_unregister(all[i]);
    }
    free(l->job);
    free(l);
}

unsigned long tw_live_warnings(const tw_live *l) { return l->warning_count; }

static void warn(tw_live *l, int rank, const tw_record *r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void warn(tw_live *l, int rank, const tw_record *r, const char *fmt, ...)
{
    l->warning_count++;
    if (!l->warnings)
        return;
    fprintf(l->warnings, "trainwatch: %s rank %d: ", l->job, rank < 0 ? 0 : rank);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(l->warnings, fmt, ap);
    va_end(ap);
    if (r && r->source.file)
        fprintf(l->warnings, " (%s:%llu)", r->source.file, (unsigned long long)r->source.line);
    fputc('\n', l->warnings);
    fflush(l->warnings);
}

static tw_cell *series(tw_family *f, const char *job, const char *rank, const char *extra)
{
    const char *values[] = {job, rank, extra};
    tw_cell *c = NULL;
    return tw_family_series(f, values, &c) == TW_OK ? c : NULL;
}

static live_rank *rank_state(tw_live *l, int rank)
{
    if (rank < 0)
        rank = 0;
    if (rank >= RANKS_MAX)
        rank = RANKS_MAX - 1;
    live_rank *s = l->ranks[rank];
    if (s && s->ready)
        return s;
    if (!s && !(s = l->ranks[rank] = calloc(1, sizeof *s)))
        return NULL;
    char r[16];
    snprintf(r, sizeof r, "%d", rank);
    /* the gauges of values appear with their first value (set_gauge): a
     * rank that has only printed warnings has no step 0 and no "last
     * progress" in 1970 for an alert rule to take at its word */
    snprintf(s->rank_text, sizeof s->rank_text, "%s", r);
    s->stalled = series(l->f_stalled, l->job, r, NULL);
    s->step_time = series(l->f_step_time, l->job, r, NULL);
    s->data_wait = series(l->f_data_wait, l->job, r, NULL);
    s->nan = series(l->f_nan, l->job, r, NULL);
    s->stalls = series(l->f_stalls, l->job, r, NULL);
    static const tw_event_kind shown[] = {TW_EV_OOM, TW_EV_EXCEPTION, TW_EV_NAN, TW_EV_WARNING, TW_EV_CHECKPOINT};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++)
        s->events[shown[i]] = series(l->f_events, l->job, r, tw_event_name(shown[i]));
    for (int k = 0; k < 3; k++)
        s->records[k] = series(l->f_records, l->job, r, tw_record_kind_name((tw_record_kind)k));
    s->ready = s->stalled && s->step_time && s->data_wait && s->nan && s->stalls;
    return s->ready ? s : NULL;
}

/* Sets one of a rank's gauges, creating its series at the first value. */
static void set_gauge(const tw_live *l, live_rank *s, tw_gauge **g, tw_family *f, double v)
{
    if (!*g)
        *g = series(f, l->job, s->rank_text, NULL);
    if (*g)
        tw_gauge_set(*g, v);
}

static double median(const double *v, int n)
{
    double tmp[INTERVALS];
    memcpy(tmp, v, sizeof(double) * (size_t)n);
    for (int i = 1; i < n; i++) {
        double x = tmp[i];
        int j = i - 1;
        while (j >= 0 && tmp[j] > x) {
            tmp[j + 1] = tmp[j];
            j--;
        }
        tmp[j + 1] = x;
    }
    return n ? tmp[n / 2] : NAN;
}

static double position(const tw_record *r)
{
    if (r->global_step >= 0)
        return (double)r->global_step;
    if (r->step >= 0 && r->epoch >= 0 && r->step_total > 0)
        return (double)r->epoch * (double)r->step_total + (double)r->step;
    return r->step >= 0 ? (double)r->step : NAN;
}

static void on_step(tw_live *l, live_rank *s, const tw_record *r, double now)
{
    if (tw_has(r, TW_F_LOSS)) {
        set_gauge(l, s, &s->loss, l->f_loss, r->loss);
        s->streak = isfinite(r->loss) ? 0 : s->streak + 1;
        set_gauge(l, s, &s->nan_streak, l->f_nan_streak, s->streak);
        if (!isfinite(r->loss)) {
            tw_counter_inc(s->nan);
            if (!s->nan_reported) {
                s->nan_reported = true;
                warn(l, r->rank, r, "loss is %s at step %.0f", isnan(r->loss) ? "NaN" : "Inf", position(r));
            }
        }
    }
    if (tw_has(r, TW_F_LR))
        set_gauge(l, s, &s->lr, l->f_lr, r->lr);
    if (tw_has(r, TW_F_SAMPLES_PER_SEC))
        set_gauge(l, s, &s->ips, l->f_ips, r->samples_per_sec);
    if (tw_has(r, TW_F_BATCH_TIME))
        tw_histogram_observe(s->step_time, r->batch_time);
    if (tw_has(r, TW_F_DATA_TIME))
        tw_histogram_observe(s->data_wait, r->data_time);
    if (r->epoch >= 0)
        set_gauge(l, s, &s->epoch, l->f_epoch, (double)r->epoch);
    double pos = position(r);
    bool progress = !isnan(pos) && (!s->have_pos || pos != s->last_pos);
    if (!isnan(pos)) {
        set_gauge(l, s, &s->step, l->f_step, pos);
        s->last_pos = pos;
        s->have_pos = true;
    }
    if (!progress)
        return;
    if (s->last_step_wall > 0) {
        s->intervals[s->interval_head] = now - s->last_step_wall;
        s->interval_head = (s->interval_head + 1) % INTERVALS;
        if (s->interval_count < INTERVALS)
            s->interval_count++;
        set_gauge(l, s, &s->interval, l->f_interval, median(s->intervals, s->interval_count));
    }
    s->last_step_wall = now;
    set_gauge(l, s, &s->last_progress, l->f_last, now);
    if (s->is_stalled) {
        s->is_stalled = false;
        tw_gauge_set(s->stalled, 0);
        warn(l, r->rank, r, "progress resumed at step %.0f", pos);
    }
}

void tw_live_record(void *arg, const tw_record *r)
{
    tw_live *l = arg;
    live_rank *s = rank_state(l, r->rank);
    if (!s)
        return;
    double now = tw_wall_clock();
    tw_counter_inc(s->records[r->kind]);
    switch (r->kind) {
    case TW_REC_STEP:
        on_step(l, s, r, now);
        break;
    case TW_REC_EVAL: {
        char rank[16];
        snprintf(rank, sizeof rank, "%d", r->rank < 0 ? 0 : r->rank);
        for (int i = 0; i < r->metric_count; i++) {
            if (!tw_metric_is_result(r->metrics[i].name))
                continue;
            tw_gauge *g = series(l->f_eval, l->job, rank, r->metrics[i].name);
            if (g)
                tw_gauge_set(g, r->metrics[i].value);
        }
        break;
    }
    case TW_REC_EVENT:
        if ((unsigned)r->event < TW_EV_COUNT && !s->events[r->event]) {
            char rank[16];
            snprintf(rank, sizeof rank, "%d", r->rank < 0 ? 0 : r->rank);
            s->events[r->event] = series(l->f_events, l->job, rank, tw_event_name(r->event));
        }
        if ((unsigned)r->event < TW_EV_COUNT && s->events[r->event])
            tw_counter_inc(s->events[r->event]);
        if (r->event == TW_EV_OOM || r->event == TW_EV_EXCEPTION || r->event == TW_EV_NAN || r->event == TW_EV_SIGNAL)
            warn(l, r->rank, r, "%s: %s", tw_event_name(r->event), r->message);
        break;
    }
}

void tw_live_tick(tw_live *l, double now)
{
    for (int i = 0; i < RANKS_MAX; i++) {
        live_rank *s = l->ranks[i];
        if (!s || !s->ready || s->last_step_wall <= 0 || s->is_stalled)
            continue;
        double limit = l->stall_after;
        if (limit <= 0) {
            double m = median(s->intervals, s->interval_count);
            limit = fmax(TW_STALL_MIN_SECONDS, isnan(m) ? 0 : TW_STALL_FACTOR * m);
        }
        double quiet = now - s->last_step_wall;
        if (quiet < limit)
            continue;
        s->is_stalled = true;
        tw_gauge_set(s->stalled, 1);
        tw_counter_inc(s->stalls);
        warn(l, i, NULL, "no training progress for %.0f s after step %.0f (stall time %.0f s)", quiet, s->last_pos, limit);
    }
}
