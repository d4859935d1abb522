/*
 * live.c: records to live metrics and warnings (see live.h).
 *
 * Series handles are looked up once per rank (the first record of a rank)
 * and kept, so a record costs a few atomic updates. A series refused at its
 * family's limit (thousands of ranks) stays NULL: the registry counted it,
 * and updates on NULL do nothing. Ranks live in a hash table keyed by rank
 * number, any int, at most RANKS_MAX of them (more is said once, and their
 * records are counted and skipped). Stall detection keeps the last 32
 * intervals between new steps per rank and compares the time since the last
 * step with ten times their median; a rank that logged its end (finished, or
 * exit 0) is not stalled. With a baseline (the job's last runs), each rank's
 * recent step time is also set against the baseline's median: the median of
 * its last 32 reported step times, else its step rate over the last 32 steps.
 */
#include "trainwatch/live.h"
#include "../core/clock.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/say.h"
#include "trainwatch/error.h"

#define RANKS_MAX  65536
#define INTERVALS  32
#define NAMED_KEPT  32   /* scalar names whose series a rank keeps looked up */
#define NAMED_LIMIT 1000 /* series of trainwatch_train_metric / _eval_metric, all ranks */

/* The gauges of a rank's named scalars, by name, the first NAMED_KEPT kept. */
typedef struct named_gauges {
    struct {
        char name[TW_NAME_MAX];
        tw_gauge *gauge;
    } kept[NAMED_KEPT];
    int count;
} named_gauges;

typedef struct live_rank {
    int rank;
    tw_gauge *loss, *step, *epoch, *lr, *ips, *last_progress, *stalled, *nan_streak, *interval, *eta, *vs_baseline;
    tw_histogram *step_time, *data_wait;
    tw_counter *nan, *stalls;
    tw_counter *events[TW_EV_COUNT];
    bool event_looked_up[TW_EV_COUNT];
    tw_counter *records[3];
    named_gauges trains, evals;
    tw_counter *steps;
    double last_step_wall;
    double last_pos;
    bool have_pos;
    double intervals[INTERVALS];
    int interval_count, interval_head;
    /* the step rate over the last INTERVALS steps: when (the log's time,
     * else the wall clock) and where each was */
    double rate_time[INTERVALS], rate_pos[INTERVALS];
    int rate_count, rate_head;
    double seconds_per_step; /* over those steps; NAN until two */
    /* the last INTERVALS step times the log reported, for the baseline ratio */
    double batch_times[INTERVALS];
    int batch_count, batch_head;
    bool epoch_from_zero; /* an epoch 0 was logged: epochs count from 0 */
    bool is_stalled, finished;
    bool nan_reported;
    double streak;
    char rank_text[16];
} live_rank;

struct tw_live {
    tw_registry *registry;
    char *run;
    double stall_after;
    double max_steps;
    FILE *warnings;
    unsigned long warning_count;
    tw_family *f_loss, *f_step, *f_epoch, *f_lr, *f_ips, *f_last, *f_stalled, *f_step_time, *f_data_wait, *f_nan,
        *f_stalls, *f_events, *f_records, *f_eval, *f_nan_streak, *f_interval, *f_train, *f_steps, *f_eta,
        *f_vs_baseline, *f_baseline, *f_baseline_runs;
    tw_live_baseline baseline; /* runs 0: none */
    live_rank **ranks; /* open addressing by rank number; rank_cap slots, a power of two */
    size_t rank_count, rank_cap;
    unsigned long ranks_dropped;
    unsigned long stalls_seen;
    double longest_stall;
    int64_t longest_stall_step;
    int longest_stall_rank;
};

static int family(tw_live *l, const char *name, const char *help, tw_metric_type type, size_t extra_label,
                  const char *extra, tw_family **out)
{
    const char *labels[] = {"run", "rank", extra};
    bool named = extra && strcmp(extra, "name") == 0;
    tw_family_options o = {.name = name,
                           .help = help,
                           .type = type,
                           .label_count = 2 + extra_label,
                           .label_names = labels,
                           .series_limit = named ? NAMED_LIMIT : 10000};
    return tw_family_register(l->registry, &o, out);
}

/* A gauge family of the run's, not a rank's: labels run and the rest of labels. */
static int run_gauges(tw_live *l, const char *name, const char *help, const char *const *labels, size_t n,
                      tw_family **out)
{
    tw_family_options o = {.name = name, .help = help, .type = TW_METRIC_GAUGE, .label_count = n, .label_names = labels};
    return tw_family_register(l->registry, &o, out);
}

/* The baseline's gauges, labelled run only (they are the job's, not a
 * rank's), set once; the ratio's family, whose series appear with each
 * rank's first step time. */
static int baseline_gauges(tw_live *l, const tw_live_baseline *b)
{
    l->baseline = *b;
    int rc = family(l, "trainwatch_step_time_vs_baseline",
                    "Recent step time over the median step time of the job's last runs in the history "
                    "(trainwatch_baseline_step_seconds{stat=\"p50\"}).",
                    TW_METRIC_GAUGE, 0, NULL, &l->f_vs_baseline);
    const char *labels[] = {"run", "stat"};
    if (rc == TW_OK)
        rc = run_gauges(l, "trainwatch_baseline_step_seconds",
                        "Step time of the job's last runs in the history: the median of their p50s and p95s, and the "
                        "limit over which a run is slower than they were.",
                        labels, 2, &l->f_baseline);
    if (rc == TW_OK)
        rc = run_gauges(l, "trainwatch_baseline_runs",
                        "How many of the job's last runs in the history the baseline is from.", labels, 1,
                        &l->f_baseline_runs);
    const struct {
        const char *stat;
        double value;
    } stats[] = {{"p50", b->p50}, {"p95", b->p95}, {"limit", b->limit}};
    for (size_t i = 0; rc == TW_OK && i < sizeof stats / sizeof stats[0]; i++) {
        if (!isfinite(stats[i].value))
            continue;
        tw_cell *g = NULL;
        rc = tw_family_series(l->f_baseline, (const char *[]){l->run, stats[i].stat}, &g);
        if (g)
            tw_gauge_set(g, stats[i].value);
    }
    tw_cell *runs = NULL;
    if (rc == TW_OK)
        rc = tw_family_series(l->f_baseline_runs, (const char *[]){l->run}, &runs);
    if (runs)
        tw_gauge_set(runs, b->runs);
    return rc;
}

int tw_live_new(const tw_live_options *o, tw_live **out)
{
    tw_live *l = calloc(1, sizeof *l);
    if (!l)
        return TW_ENOMEM;
    l->registry = o->registry ? o->registry : tw_registry_default();
    l->run = strdup(o->run ? o->run : "trainwatch");
    l->stall_after = o->stall_after;
    l->max_steps = o->max_steps;
    l->warnings = o->warnings;
    int rc = l->run ? TW_OK : TW_ENOMEM;
#define FAM(var, name, help, type, n, extra)                                                                           \
    if (rc == TW_OK)                                                                                                   \
    rc = family(l, name, help, type, n, extra, &l->var)
    FAM(f_loss, "trainwatch_train_loss", "Training loss, as the log last printed it.", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_step, "trainwatch_train_step", "Training progress: the global step of the last step record.", TW_METRIC_GAUGE,
        0, NULL);
    FAM(f_epoch, "trainwatch_train_epoch", "Epoch of the last step record.", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_lr, "trainwatch_learning_rate", "Learning rate of the last step record.", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_ips, "trainwatch_samples_per_second", "Throughput the log reports (ips).", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_last, "trainwatch_last_progress_timestamp_seconds", "When the last new training step was seen (unix time).",
        TW_METRIC_GAUGE, 0, NULL);
    FAM(f_stalled, "trainwatch_stalled", "1 while no training step has been seen for the stall time.", TW_METRIC_GAUGE,
        0, NULL);
    FAM(f_step_time, "trainwatch_step_duration_seconds", "Step time the log reports (batch_cost, time, ms/step).",
        TW_METRIC_HISTOGRAM, 0, NULL);
    FAM(f_data_wait, "trainwatch_data_wait_seconds",
        "Data-loader wait per step the log reports (reader_cost, data_time).", TW_METRIC_HISTOGRAM, 0, NULL);
    FAM(f_nan, "trainwatch_nan_loss_total", "Step records whose loss was NaN or Inf.", TW_METRIC_COUNTER, 0, NULL);
    FAM(f_stalls, "trainwatch_stalls_total", "Stalls detected (no progress for the stall time).", TW_METRIC_COUNTER, 0,
        NULL);
    FAM(f_events, "trainwatch_log_events_total", "Events found in the log, by kind.", TW_METRIC_COUNTER, 1, "event");
    FAM(f_records, "trainwatch_records_total", "Records parsed from the log, by kind.", TW_METRIC_COUNTER, 1, "kind");
    FAM(f_eval, "trainwatch_eval_metric", "Last value of each evaluation metric.", TW_METRIC_GAUGE, 1, "name");
    FAM(f_train, "trainwatch_train_metric",
        "Last value of each other scalar of the step records (accuracy, grad_norm, loss parts, tokens/s...).",
        TW_METRIC_GAUGE, 1, "name");
    FAM(f_steps, "trainwatch_train_steps_total",
        "Training steps logged: the step counter at the first step record, then its advance.", TW_METRIC_COUNTER, 0,
        NULL);
    FAM(f_nan_streak, "trainwatch_nan_loss_streak",
        "Consecutive step records whose loss was NaN or Inf (0 after a finite loss).", TW_METRIC_GAUGE, 0, NULL);
    FAM(f_interval, "trainwatch_step_interval_seconds", "Usual wall time between new steps: the median of the last 32.",
        TW_METRIC_GAUGE, 0, NULL);
    FAM(f_eta, "trainwatch_eta_seconds",
        "Estimated time to the end of training: the planned steps left at the step rate of the last 32 steps, "
        "else the log's own ETA.",
        TW_METRIC_GAUGE, 0, NULL);
#undef FAM
    if (rc == TW_OK && o->baseline.runs > 0 && o->baseline.p50 > 0)
        rc = baseline_gauges(l, &o->baseline);
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
    for (size_t i = 0; i < l->rank_cap; i++)
        free(l->ranks[i]);
    free(l->ranks);
    tw_family *all[] = {l->f_loss,    l->f_step,      l->f_epoch,      l->f_lr,       l->f_ips,    l->f_last,
                        l->f_stalled, l->f_step_time, l->f_data_wait,  l->f_nan,      l->f_stalls, l->f_events,
                        l->f_records, l->f_eval,      l->f_nan_streak, l->f_interval, l->f_train,  l->f_steps,
                        l->f_eta,     l->f_vs_baseline, l->f_baseline, l->f_baseline_runs};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i])
            tw_family_unregister(all[i]);
    }
    free(l->run);
    free(l);
}

unsigned long tw_live_warnings(const tw_live *l)
{
    return l->warning_count;
}

static void warn(tw_live *l, int rank, const tw_record *r, const char *fmt, ...)
{
    l->warning_count++;
    if (!l->warnings || !tw_say_enabled(TW_SAY_WARN))
        return;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (r && r->source.file)
        tw_say_to(l->warnings, TW_SAY_WARN, "live", "%s rank %d: %s (%s:%llu)", l->run, rank < 0 ? 0 : rank, what,
                  r->source.file, (unsigned long long)r->source.line);
    else
        tw_say_to(l->warnings, TW_SAY_WARN, "live", "%s rank %d: %s", l->run, rank < 0 ? 0 : rank, what);
}

/* The series of these labels, or NULL when refused (counted by the registry). */
static tw_cell *series(tw_family *f, const char *run, const char *rank, const char *extra)
{
    const char *values[] = {run, rank, extra};
    tw_cell *c = NULL;
    tw_family_series(f, values, &c);
    return c;
}

static size_t rank_slot(const tw_live *l, int rank)
{
    uint32_t h = (uint32_t)rank * 2654435761u;
    size_t i = h & (l->rank_cap - 1);
    while (l->ranks[i] && l->ranks[i]->rank != rank)
        i = (i + 1) & (l->rank_cap - 1);
    return i;
}

static int grow_ranks(tw_live *l)
{
    size_t old_cap = l->rank_cap;
    live_rank **old = l->ranks;
    size_t cap = old_cap ? old_cap * 2 : 64;
    live_rank **table = calloc(cap, sizeof *table);
    if (!table)
        return TW_ENOMEM;
    l->ranks = table;
    l->rank_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i])
            l->ranks[rank_slot(l, old[i]->rank)] = old[i];
    }
    free(old);
    return TW_OK;
}

/* A new rank's state, with its series looked up once. */
static live_rank *new_rank(tw_live *l, int rank)
{
    live_rank *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->rank = rank;
    s->seconds_per_step = NAN;
    snprintf(s->rank_text, sizeof s->rank_text, "%d", rank);
    const char *r = s->rank_text;
    /* the gauges of values appear with their first value (set_gauge): a
     * rank that has only printed warnings has no step 0 and no "last
     * progress" in 1970 for an alert rule to take at its word */
    s->stalled = series(l->f_stalled, l->run, r, NULL);
    s->step_time = series(l->f_step_time, l->run, r, NULL);
    s->data_wait = series(l->f_data_wait, l->run, r, NULL);
    s->nan = series(l->f_nan, l->run, r, NULL);
    s->stalls = series(l->f_stalls, l->run, r, NULL);
    s->steps = series(l->f_steps, l->run, r, NULL);
    static const tw_event_kind shown[] = {TW_EV_OOM,     TW_EV_EXCEPTION,  TW_EV_NAN,
                                          TW_EV_WARNING, TW_EV_CHECKPOINT, TW_EV_OVERFLOW};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        s->events[shown[i]] = series(l->f_events, l->run, r, tw_event_name(shown[i]));
        s->event_looked_up[shown[i]] = true;
    }
    for (int k = 0; k < 3; k++)
        s->records[k] = series(l->f_records, l->run, r, tw_record_kind_name((tw_record_kind)k));
    return s;
}

/* The state of a rank (an unknown rank is rank 0), created at its first
 * record; NULL past RANKS_MAX ranks or without memory. */
static live_rank *rank_state(tw_live *l, int rank)
{
    if (rank < 0)
        rank = 0;
    if (l->rank_cap) {
        live_rank *s = l->ranks[rank_slot(l, rank)];
        if (s)
            return s;
    }
    if (l->rank_count >= RANKS_MAX) {
        if (l->ranks_dropped++ == 0)
            warn(l, rank, NULL, "more than %d ranks: records of further ranks are not followed live", RANKS_MAX);
        return NULL;
    }
    if ((l->rank_count + 1) * 2 > l->rank_cap && grow_ranks(l) != TW_OK)
        return NULL;
    live_rank *s = new_rank(l, rank);
    if (!s)
        return NULL;
    l->ranks[rank_slot(l, rank)] = s;
    l->rank_count++;
    return s;
}

/* Sets one of a rank's gauges, creating its series at the first value. */
static void set_gauge(const tw_live *l, live_rank *s, tw_gauge **g, tw_family *f, double v)
{
    if (!*g)
        *g = series(f, l->run, s->rank_text, NULL);
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

/* Remembers the longest stall seen, for the report at the end. */
static void note_stall(tw_live *l, const live_rank *s, double quiet)
{
    if (quiet > l->longest_stall) {
        l->longest_stall = quiet;
        l->longest_stall_step = isnan(s->last_pos) ? -1 : (int64_t)s->last_pos;
        l->longest_stall_rank = s->rank;
    }
}

/* The planned steps left after this record: --max-steps, else the epochs
 * and steps per epoch the log prints ("epoch: [3/10]", "[120/500]"; epochs
 * from 1 unless an epoch 0 was seen), else a run-wide total; NAN unknown. */
static double steps_left(const tw_live *l, const live_rank *s, const tw_record *r)
{
    return tw_record_steps_to_plan(r, l->max_steps, s->epoch_from_zero);
}

/* trainwatch_eta_seconds after a new step: the steps left at the rate of
 * the last INTERVALS steps (by the log's timestamps where it has them, so
 * a backlog read at once does not look instant), else the log's own ETA. */
static void update_eta(const tw_live *l, live_rank *s, const tw_record *r, double pos, double t)
{
    if (r->epoch == 0)
        s->epoch_from_zero = true;
    int last = (s->rate_head + INTERVALS - 1) % INTERVALS;
    if (s->rate_count && pos < s->rate_pos[last]) {
        s->rate_count = 0; /* a restart from an earlier step: a new rate */
        s->seconds_per_step = NAN;
    }
    s->rate_time[s->rate_head] = t;
    s->rate_pos[s->rate_head] = pos;
    s->rate_head = (s->rate_head + 1) % INTERVALS;
    if (s->rate_count < INTERVALS)
        s->rate_count++;
    int oldest = (s->rate_head + INTERVALS - s->rate_count) % INTERVALS;
    double span = t - s->rate_time[oldest], advance = pos - s->rate_pos[oldest];
    s->seconds_per_step = s->rate_count >= 2 && span > 0 && advance > 0 ? span / advance : NAN;
    double left = steps_left(l, s, r);
    if (isfinite(left) && isfinite(s->seconds_per_step))
        set_gauge(l, s, &s->eta, l->f_eta, (left > 0 ? left : 0) * s->seconds_per_step);
    else if (tw_has(r, TW_F_ETA))
        set_gauge(l, s, &s->eta, l->f_eta, r->eta);
}

/* trainwatch_step_time_vs_baseline after a new step: the median of the
 * rank's last reported step times, else its step rate, over the baseline's
 * median (the same step time the history keeps of a run, where the log
 * reports one). */
static void update_vs_baseline(const tw_live *l, live_rank *s)
{
    if (!l->f_vs_baseline)
        return;
    double recent = s->batch_count ? median(s->batch_times, s->batch_count) : s->seconds_per_step;
    if (isfinite(recent) && recent > 0)
        set_gauge(l, s, &s->vs_baseline, l->f_vs_baseline, recent / l->baseline.p50);
}

/* The gauge of a named scalar of a rank (f: train or eval metrics): looked
 * up once for the first NAMED_KEPT names (a refused one stays NULL), every
 * time for further names. */
static tw_gauge *named_gauge(tw_live *l, live_rank *s, named_gauges *kept, tw_family *f, const char *name)
{
    for (int i = 0; i < kept->count; i++) {
        if (strcmp(kept->kept[i].name, name) == 0)
            return kept->kept[i].gauge;
    }
    tw_gauge *g = series(f, l->run, s->rank_text, name);
    if (kept->count < NAMED_KEPT) {
        snprintf(kept->kept[kept->count].name, sizeof kept->kept[0].name, "%s", name);
        kept->kept[kept->count++].gauge = g;
    }
    return g;
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
                warn(l, r->rank, r, "loss is %s at step %.0f", isnan(r->loss) ? "NaN" : "Inf", tw_record_position(r));
            }
        }
    }
    if (tw_has(r, TW_F_LR))
        set_gauge(l, s, &s->lr, l->f_lr, r->lr);
    if (tw_has(r, TW_F_SAMPLES_PER_SEC))
        set_gauge(l, s, &s->ips, l->f_ips, r->samples_per_sec);
    if (tw_has(r, TW_F_BATCH_TIME)) {
        tw_histogram_observe(s->step_time, r->batch_time);
        if (isfinite(r->batch_time) && r->batch_time > 0) {
            s->batch_times[s->batch_head] = r->batch_time;
            s->batch_head = (s->batch_head + 1) % INTERVALS;
            if (s->batch_count < INTERVALS)
                s->batch_count++;
        }
    }
    if (tw_has(r, TW_F_DATA_TIME))
        tw_histogram_observe(s->data_wait, r->data_time);
    if (r->epoch >= 0)
        set_gauge(l, s, &s->epoch, l->f_epoch, (double)r->epoch);
    for (int i = 0; i < r->metric_count; i++)
        tw_gauge_set(named_gauge(l, s, &s->trains, l->f_train, r->metrics[i].name), r->metrics[i].value);
    double pos = tw_record_position(r);
    bool progress = !isnan(pos) && (!s->have_pos || pos != s->last_pos);
    /* steps: the counter's value at its first record, then its advance; one
     * for a record without a counter or after a restart to an earlier step */
    if (isnan(pos) || progress)
        tw_counter_add(s->steps, !progress || pos < 1 ? 1
                                 : !s->have_pos       ? pos
                                 : pos > s->last_pos  ? pos - s->last_pos
                                                      : 1);
    if (progress && s->is_stalled)
        note_stall(l, s, now - s->last_step_wall); /* its whole length, at its step */
    if (!isnan(pos)) {
        set_gauge(l, s, &s->step, l->f_step, pos);
        s->last_pos = pos;
        s->have_pos = true;
    }
    if (!progress)
        return;
    s->finished = false;
    if (s->last_step_wall > 0) {
        s->intervals[s->interval_head] = now - s->last_step_wall;
        s->interval_head = (s->interval_head + 1) % INTERVALS;
        if (s->interval_count < INTERVALS)
            s->interval_count++;
        set_gauge(l, s, &s->interval, l->f_interval, median(s->intervals, s->interval_count));
    }
    s->last_step_wall = now;
    update_eta(l, s, r, pos, tw_has(r, TW_F_TIME) ? r->time : now);
    update_vs_baseline(l, s);
    set_gauge(l, s, &s->last_progress, l->f_last, now);
    if (s->is_stalled) {
        s->is_stalled = false;
        tw_gauge_set(s->stalled, 0);
        warn(l, r->rank, r, "progress resumed at step %.0f", pos);
    }
}

/* The end of a rank's process (finished, exit, signal): no stall to watch
 * for until it logs a new step (a restart). */
static void on_end(live_rank *s)
{
    s->finished = true;
    if (s->eta)
        tw_gauge_set(s->eta, 0); /* nothing left to run */
    if (s->is_stalled) {
        s->is_stalled = false;
        tw_gauge_set(s->stalled, 0);
    }
}

static void on_event(tw_live *l, live_rank *s, const tw_record *r)
{
    if ((unsigned)r->event >= TW_EV_COUNT)
        return;
    if (!s->event_looked_up[r->event]) {
        s->events[r->event] = series(l->f_events, l->run, s->rank_text, tw_event_name(r->event));
        s->event_looked_up[r->event] = true;
    }
    tw_counter_inc(s->events[r->event]);
    if (r->event == TW_EV_OOM || r->event == TW_EV_EXCEPTION || r->event == TW_EV_NAN || r->event == TW_EV_SIGNAL)
        warn(l, r->rank, r, "%s: %s", tw_event_name(r->event), r->message);
    if (r->event == TW_EV_FINISHED || r->event == TW_EV_EXIT || r->event == TW_EV_SIGNAL)
        on_end(s);
}

void tw_live_record(void *arg, const tw_record *r)
{
    tw_live *l = arg;
    if (r->kind == TW_REC_LINE)
        return; /* the template miner's (analyze), never a rank's progress */
    live_rank *s = rank_state(l, r->rank);
    if (!s)
        return;
    double now = tw_wall_clock();
    if ((unsigned)r->kind < 3)
        tw_counter_inc(s->records[r->kind]);
    switch (r->kind) {
    case TW_REC_STEP:
        on_step(l, s, r, now);
        break;
    case TW_REC_EVAL:
        for (int i = 0; i < r->metric_count; i++)
            tw_gauge_set(named_gauge(l, s, &s->evals, l->f_eval, r->metrics[i].name), r->metrics[i].value);
        break;
    case TW_REC_EVENT:
        on_event(l, s, r);
        break;
    case TW_REC_LINE: /* the template miner's, not asked for here */
        break;
    }
}

/* The stall limit of a rank: the configured one, or ten times its usual
 * interval between steps (at least TW_STALL_MIN_SECONDS). */
static double stall_limit(const tw_live *l, const live_rank *s)
{
    if (l->stall_after > 0)
        return l->stall_after;
    double m = median(s->intervals, s->interval_count);
    return fmax(TW_STALL_MIN_SECONDS, isnan(m) ? 0 : TW_STALL_FACTOR * m);
}

void tw_live_tick(tw_live *l, double now)
{
    for (size_t i = 0; i < l->rank_cap; i++) {
        live_rank *s = l->ranks[i];
        if (!s || s->finished || s->last_step_wall <= 0 || s->is_stalled)
            continue;
        double limit = stall_limit(l, s);
        double quiet = now - s->last_step_wall;
        if (quiet < limit)
            continue;
        s->is_stalled = true;
        l->stalls_seen++;
        note_stall(l, s, quiet);
        tw_gauge_set(s->stalled, 1);
        tw_counter_inc(s->stalls);
        warn(l, s->rank, NULL, "no training progress for %.0f s after step %.0f (stall time %.0f s)", quiet,
             s->last_pos, limit);
    }
}

bool tw_live_stall_finding(tw_live *l, double now, tw_finding *f)
{
    for (size_t i = 0; i < l->rank_cap; i++) {
        live_rank *s = l->ranks[i];
        if (s && s->is_stalled)
            note_stall(l, s, now - s->last_step_wall);
    }
    if (!l->stalls_seen)
        return false;
    memset(f, 0, sizeof *f);
    f->rule = "live_stall";
    f->severity = TW_SEV_WARNING;
    f->rank = l->longest_stall_rank;
    f->step = l->longest_stall_step;
    f->value = l->longest_stall;
    snprintf(f->title, sizeof f->title, "Training made no progress for %.0f s while it was watched", l->longest_stall);
    snprintf(f->evidence, sizeof f->evidence,
             "%lu stall%s seen live (no new step for the stall time); the longest: %.0f s after step %lld on rank %d",
             l->stalls_seen, l->stalls_seen == 1 ? "" : "s", l->longest_stall, (long long)l->longest_stall_step,
             l->longest_stall_rank);
    snprintf(f->recommendation, sizeof f->recommendation, "%s",
             "A stall the log's timestamps do not show is time between lines: a hang in a collective (another rank "
             "died or is slow), a data loader that blocks, or checkpoint and evaluation work that logs nothing. "
             "py-spy dump --pid PID shows where it waits.");
    return true;
}

void tw_live_progress(const tw_live *l, double *step, double *seconds_per_step)
{
    *step = *seconds_per_step = NAN;
    for (size_t i = 0; i < l->rank_cap; i++) {
        const live_rank *s = l->ranks[i];
        if (!s || !s->rate_count)
            continue;
        int last = (s->rate_head + INTERVALS - 1) % INTERVALS;
        if (isfinite(*step) && s->rate_pos[last] <= *step)
            continue;
        *step = s->rate_pos[last];
        *seconds_per_step = s->seconds_per_step; /* kept by update_eta */
    }
}

unsigned long tw_live_stalls(const tw_live *l)
{
    return l->stalls_seen;
}
