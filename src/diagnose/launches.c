/*
 * launches.c: a log that holds several launches, read as such.
 *
 * run.c splits the records into launches (a start line after the rank did
 * something, or its step counter going back) and diagnose.c runs the rules
 * over each launch alone, so that no statistic mixes launches. Here each
 * launch gets its span (time, steps) and its outcome (from its own
 * findings: how it ended), and the report is put together: the launch asked
 * for (the last by default) with what the launches before it say, the
 * earlier failures and the work started again, as findings of the log.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "trainwatch/error.h"

/* How a launch ended, from its worst finding: the first rule in this list
 * that it has. */
static const struct {
    const char *rule, *outcome;
} endings[] = {
    {"crash", "crashed"},     {"cuda_setup", "crashed"}, {"disk_full", "crashed"}, {"nccl_timeout", "crashed"}, {"killed", "killed"},      {"oom", "out of memory"},
    {"nan_loss", "nan loss"}, {"nan_check", "nan loss"}, {"exit_status", "exit status"},
};

static bool is_failure(const char *outcome)
{
    for (size_t i = 0; i < sizeof endings / sizeof endings[0]; i++) {
        if (outcome == endings[i].outcome)
            return true;
    }
    return false;
}

/* The first line of a finding's evidence, without the "(file:line)" it cites. */
static void first_line(char *dst, size_t cap, const char *evidence)
{
    size_t n = strcspn(evidence, "\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, evidence, n);
    dst[n] = '\0';
    char *cite = strrchr(dst, '(');
    if (cite && cite > dst && cite[-1] == ' ' && dst[strlen(dst) - 1] == ')')
        cite[-1] = '\0';
}

static void outcome(tw_launch_report *l)
{
    tw_launch_span *s = &l->span;
    for (size_t e = 0; e < sizeof endings / sizeof endings[0]; e++) {
        for (int i = 0; i < l->finding_count; i++) {
            if (strcmp(l->findings[i].rule, endings[e].rule) != 0)
                continue;
            s->outcome = endings[e].outcome;
            first_line(s->outcome_detail, sizeof s->outcome_detail, l->findings[i].evidence);
            return;
        }
    }
    s->outcome = l->summary.event_counts[TW_EV_FINISHED] ? "finished" : "ended";
}

static const char *start_name(tw_launch_start start)
{
    switch (start) {
    case TW_START_LOG:
        return "log";
    case TW_START_BANNER:
        return "start line";
    case TW_START_STEP_BACK:
        return "step counter went back";
    }
    return "log";
}

void tw_launch_spans(const tw_run *run, tw_report *report)
{
    for (int i = 0; i < report->launch_count; i++) {
        const tw_run *l = tw_run_launch(run, i);
        tw_launch_report *lr = &report->launches[i];
        tw_launch_span *s = &lr->span;
        s->index = i + 1;
        s->start = start_name(l->launch.start);
        if (i > 0 && l->launch.have_start) {
            s->where = tw_run_source(run, l->launch.file, l->launch.line);
        }
        s->first_time = l->launch.first_time;
        s->last_time = l->launch.last_time;
        s->first_step = lr->summary.first_step;
        s->last_step = lr->summary.last_step;
        s->step_records = lr->summary.step_records;
        s->ranks = lr->summary.ranks;
        for (int k = 0; k < lr->finding_count; k++) {
            s->errors += lr->findings[k].severity == TW_SEV_ERROR;
            s->warnings += lr->findings[k].severity == TW_SEV_WARNING;
        }
        outcome(lr);
    }
}

/* ---- findings about the launches as a whole --------------------------- */

/* Where a failed launch's first error finding points, NULL when none does. */
static const tw_source *failure_source(const tw_launch_report *l)
{
    for (int i = 0; i < l->finding_count; i++) {
        if (l->findings[i].where.file && l->findings[i].severity == TW_SEV_ERROR)
            return &l->findings[i].where;
    }
    return NULL;
}

/* The rank of launch l with the most steps, NULL when none has one. */
static const tw_rank *tw_launch_lead(const tw_run *l)
{
    const tw_rank *lead = NULL;
    for (int i = 0; i < l->rank_count; i++) {
        const tw_rank *rk = l->ranks[i];
        if (rk && rk->used && (!lead || rk->steps > lead->steps))
            lead = rk;
    }
    return lead && lead->steps > 0 ? lead : NULL;
}

/* True when launch l (report lr) ran to its end: a finished event, or its
 * leading rank's last record at the last epoch or step its format counts
 * to (PaddleSeg's iter: 16000/16000). */
static bool tw_launch_completed(const tw_run *l, const tw_launch_report *lr)
{
    if (lr->span.outcome && strcmp(lr->span.outcome, "finished") == 0)
        return true;
    if (is_failure(lr->span.outcome) || lr->span.step_records == 0)
        return false;
    const tw_rank *lead = tw_launch_lead(l);
    if (!lead)
        return false;
    const tw_point *p = &lead->last;
    if (p->epoch >= 0 && p->epoch_total > 0)
        return p->epoch >= (lead->first.epoch == 0 ? p->epoch_total - 1 : p->epoch_total);
    return p->step_total > 0 && p->pos >= 0.98 * (double)p->step_total;
}

/* True when the last launch ran to its end: earlier launches stopped from
 * outside (a signal, no error of their own) and work started over are then
 * notes, not warnings (the evaluation set's
 * healthy-ppindustry-paddleseg-16k-relaunch: SIGTERM at iter 360 of 160000,
 * relaunched with iters 16000, which it completes). */
static bool tw_last_completed(const tw_run *run, const tw_report *r)
{
    int last = r->launch_count - 1;
    return tw_launch_completed(tw_run_launch(run, last), &r->launches[last]);
}

/* The next word of an error message at *s as two errors are compared: a
 * path is no word (the same error from another checkout or Python), a word
 * with a digit is any number (a pid, an address, a line). Returns its
 * length, 0 at the end; *word points at it, "#" for a number. */
static size_t error_word(const char **s, const char **word)
{
    for (;;) {
        const char *c = *s;
        while (*c == ' ')
            c++;
        size_t n = strcspn(c, " ");
        *s = c + n;
        if (n == 0)
            return 0;
        bool path = memchr(c, '/', n) != NULL, number = false;
        for (size_t i = 0; i < n; i++)
            number |= c[i] >= '0' && c[i] <= '9';
        if (path)
            continue;
        *word = number ? "#" : c;
        return number ? 1 : n;
    }
}

/* Two error messages say the same but for paths and numbers. */
static bool tw_same_error(const char *a, const char *b)
{
    for (;;) {
        const char *wa = "", *wb = "";
        size_t na = error_word(&a, &wa), nb = error_word(&b, &wb);
        if (na != nb || memcmp(wa, wb, na) != 0)
            return false;
        if (na == 0)
            return true;
    }
}

/* Launches a and b ended with the same error (a crash, not a stop from
 * outside): relaunching changed nothing. */
static bool tw_same_failure(const tw_launch_span *a, const tw_launch_span *b)
{
    return is_failure(a->outcome) && a->outcome == b->outcome && strcmp(a->outcome, "killed") != 0 &&
           a->outcome_detail[0] && tw_same_error(a->outcome_detail, b->outcome_detail);
}

/* How many launches ended with launch i's error (0: it did not fail so). */
static int tw_repeats_of(const tw_report *r, int i)
{
    int same = 0;
    for (int j = 0; j < r->launch_count; j++)
        same += tw_same_failure(&r->launches[i].span, &r->launches[j].span);
    return same;
}

/* The most launches that ended with one same error. */
static int tw_most_repeated_failure(const tw_report *r)
{
    int most = 0;
    for (int i = 0; i < r->launch_count; i++) {
        int same = tw_repeats_of(r, i);
        if (same > most)
            most = same;
    }
    return most;
}

/* Adds the failed_launches finding, titled with how many of which launches
 * failed and whether one error kept coming back (in the last launch too, or
 * until a launch ran to its end). */
static tw_finding *add_failed_launches(tw_findings *out, const tw_report *r, tw_severity sev, int failed,
                                       bool last_failed, int repeated, bool completed)
{
    int count = r->launch_count;
    bool in_last = repeated >= 2 && tw_repeats_of(r, count - 1) == repeated;
    if (repeated >= 2 && completed)
        return tw_finding_add(out, "failed_launches", sev, "%d launches ended with the same error before the "
                              "last one ran to its end", repeated);
    if (repeated >= 2)
        return tw_finding_add(out, "failed_launches", sev, "%d launches ended with the same error%s: relaunching "
                              "did not fix it", repeated, in_last ? ", the last one among them" : "");
    if (last_failed)
        return failed == count ? tw_finding_add(out, "failed_launches", sev, "All %d launches failed", count)
                               : tw_finding_add(out, "failed_launches", sev, "%d of the %d launches failed, the "
                                                "last one too", failed, count);
    return count == 2 ? tw_finding_add(out, "failed_launches", sev, "The launch before the last one failed")
                      : tw_finding_add(out, "failed_launches", sev, "%d of the %d launches before the last one "
                                       "failed", failed, count - 1);
}

/* The launches that failed, the last one among them when it failed after
 * an earlier one did. An error that ended two launches is itself an error
 * of the log unless a later launch ran to its end: it is no passing fault
 * (failed-launches-paddlescripts-spawn-nranks8: three 8-rank launches
 * died at NCCL init, and only fewer ranks trained after them, to no end
 * the log shows). */
static void failed_launches(const tw_run *run, const tw_report *r, tw_findings *out)
{
    int failed = 0, crashed = 0;
    const tw_launch_report *first = NULL;
    for (int i = 0; i + 1 < r->launch_count; i++) {
        const char *o = r->launches[i].span.outcome;
        if (!is_failure(o))
            continue;
        failed++;
        crashed += strcmp(o, "killed") != 0;
        if (!first)
            first = &r->launches[i];
    }
    if (!failed)
        return;
    bool last_failed = is_failure(r->launches[r->launch_count - 1].span.outcome);
    int repeated = tw_most_repeated_failure(r);
    bool completed = tw_last_completed(run, r);
    /* a repeated error is the log's error until a launch ran to its end
     * (the cause was fixed then: a smaller batch after two OOMs) */
    tw_severity sev = repeated >= 2 && !completed ? TW_SEV_ERROR
                      : !crashed && completed     ? TW_SEV_INFO
                                                  : TW_SEV_WARNING;
    tw_finding *f = add_failed_launches(out, r, sev, failed + last_failed, last_failed, repeated, completed);
    if (!f)
        return;
    const tw_source *where = failure_source(first);
    if (where)
        f->where = *where;
    f->value = failed + last_failed;
    int listed = r->launch_count - (last_failed ? 0 : 1);
    for (int i = 0, shown = 0; i < listed; i++) {
        const tw_launch_span *s = &r->launches[i].span;
        if (!is_failure(s->outcome))
            continue;
        if (shown++ == 6) {
            tw_finding_evidence(f, "... and %d more (see the launches table)", failed + last_failed - 6);
            break;
        }
        where = failure_source(&r->launches[i]);
        if (where)
            tw_finding_evidence(f, "launch %d: %s: %s (%s:%llu)", s->index, s->outcome, s->outcome_detail, where->file,
                                (unsigned long long)where->line);
        else
            tw_finding_evidence(f, "launch %d: %s: %s", s->index, s->outcome, s->outcome_detail);
    }
    tw_finding_recommend(f, repeated >= 2 && !completed
                                ? "The same error came back in each relaunch: it is in the set-up (the machine, its "
                                  "libraries, the configuration), not a passing fault. Fix its cause before "
                                  "launching again; --launch N shows each launch's findings."
                                : "These launches died and were started again; each is analysed alone (--launch N "
                                  "shows one). Check that the cause of each is fixed, not only that the last launch "
                                  "ran.");
}

/* The error f of an earlier launch says what a finding of the report says:
 * its rule and the first line of its evidence. */
static tw_finding *tw_same_finding(tw_findings *out, int upto, const tw_finding *f)
{
    char a[TW_TEXT_MAX / 4], b[TW_TEXT_MAX / 4];
    first_line(a, sizeof a, f->evidence);
    for (int i = 0; i < upto; i++) {
        if (strcmp(out->items[i].rule, f->rule) != 0)
            continue;
        first_line(b, sizeof b, out->items[i].evidence);
        if (tw_same_error(a, b))
            return &out->items[i];
    }
    return NULL;
}

#define TW_EARLIER_ERRORS_MAX 3

/* The errors of the launches before the last, in the last launch's report.
 * One that says what a finding there says cites where it was first seen,
 * once. When the last launch never reached a step, nothing in it replaced
 * the earlier errors, so each other one is added as it is, up to
 * TW_EARLIER_ERRORS_MAX (cuda-setup-rtd-paddle-cudnn: cuDNN failed to load
 * in two launches, then the third was interrupted by hand before a step). */
static void earlier_errors(const tw_report *r, tw_findings *out)
{
    bool trained = r->launches[r->launch_count - 1].span.step_records > 0;
    bool cited[64] = {false};
    int added = 0;
    for (int i = 0; i + 1 < r->launch_count; i++) {
        const tw_launch_report *l = &r->launches[i];
        for (int k = 0; k < l->finding_count; k++) {
            const tw_finding *e = &l->findings[k];
            if (e->severity != TW_SEV_ERROR)
                continue;
            tw_finding *same = tw_same_finding(out, out->count, e);
            if (same) {
                size_t at = (size_t)(same - out->items);
                if (at < sizeof cited / sizeof cited[0] && !cited[at] && e->where.file && same->launch != e->launch) {
                    cited[at] = true;
                    tw_finding_evidence(same, "the same error ended launch %d %s (%s:%llu)", e->launch,
                                        e->launch < same->launch ? "first" : "too", e->where.file,
                                        (unsigned long long)e->where.line);
                }
                continue;
            }
            if (trained || added == TW_EARLIER_ERRORS_MAX)
                continue;
            tw_finding *f = tw_finding_add(out, e->rule, e->severity, "%s", "");
            if (!f)
                return;
            *f = *e;
            added++;
        }
    }
}

/* Launch j tries to train again: it has training steps, a resume, or it
 * failed (a restart that died before its first step). A launch that did
 * none of these ran something else on the same log: an inference or
 * evaluation script (healthy-paddle-sign-paddlerec-20ep's tools/infer.py,
 * the corpus's paddlevideo-agcn test runs). */
static bool tw_trains_again(const tw_run *run, const tw_report *r, int j)
{
    const tw_launch_span *s = &r->launches[j].span;
    return s->step_records > 0 || is_failure(s->outcome) || tw_first_event(tw_run_launch(run, j), TW_EV_RESUME);
}

/* Launch i trained and a later launch trained (or tried to) again. */
static bool tw_started_over(const tw_run *run, const tw_report *r, int i)
{
    if (r->launches[i].span.step_records == 0)
        return false;
    for (int j = i + 1; j < r->launch_count; j++) {
        if (tw_trains_again(run, r, j))
            return true;
    }
    return false;
}

/* The evidence of launch i that trained and was started over: its steps,
 * where its last step and (when it failed) its stop are, where the next
 * launch starts, and its own resume when it had one. */
static void started_over_evidence(const tw_run *run, const tw_report *r, int i, tw_finding *f)
{
    const tw_launch_span *s = &r->launches[i].span, *next = &r->launches[i + 1].span;
    const tw_run *l = tw_run_launch(run, i);
    const tw_rank *lead = tw_launch_lead(l);
    char where[600], last_at[900] = "";
    if (lead)
        snprintf(last_at, sizeof last_at, ", its last at %s",
                 tw_where(run, lead->last.file, lead->last.line, where, sizeof where));
    const tw_source *end = is_failure(s->outcome) ? failure_source(&r->launches[i]) : NULL;
    if (end) /* how it stopped, where failed_launches does not say it: a stop from outside */
        snprintf(last_at + strlen(last_at), sizeof last_at - strlen(last_at), ", then %s (%s:%llu)", s->outcome,
                 end->file, (unsigned long long)end->line);
    tw_finding_evidence(f, "launch %d trained from step %lld to %lld%s; launch %d starts at %s:%llu (%s)", s->index,
                        (long long)s->first_step, (long long)s->last_step, last_at, next->index,
                        next->where.file ? next->where.file : "?", (unsigned long long)next->where.line, next->start);
    const tw_event_note *began = tw_first_event(l, TW_EV_RESUME);
    if (began)
        tw_finding_evidence(f, "launch %d itself resumed: %s (%s)", s->index, began->message,
                            tw_where(run, began->file, began->line, where, sizeof where));
}

static void restarts(const tw_run *run, const tw_report *r, tw_findings *out)
{
    int trained = 0;
    for (int i = 0; i + 1 < r->launch_count; i++)
        trained += tw_started_over(run, r, i);
    if (!trained)
        return;
    const tw_launch_span *last = &r->launches[r->launch_count - 1].span;
    tw_severity sev = tw_last_completed(run, r) ? TW_SEV_INFO : TW_SEV_WARNING;
    tw_finding *f = tw_finding_add(out, "restarts", sev,
                                   "The log holds %d launches: %d trained before the last one started over",
                                   r->launch_count, trained);
    if (!f)
        return;
    f->where = last->where;
    f->value = r->launch_count - 1;
    char where[600];
    /* what the last launch started from, when it says: first, as what the
     * user most needs to know (the evidence has room for about 1 KiB) */
    const tw_event_note *resume = tw_first_event(tw_run_launch(run, r->launch_count - 1), TW_EV_RESUME);
    if (resume)
        tw_finding_evidence(f, "launch %d resumes: %s (%s), then trains from step %lld", last->index, resume->message,
                            tw_where(run, resume->file, resume->line, where, sizeof where), (long long)last->first_step);
    for (int i = 0, shown = 0; i + 1 < r->launch_count; i++) {
        if (!tw_started_over(run, r, i))
            continue;
        if (shown++ == 6) {
            tw_finding_evidence(f, "... (see the launches table)");
            break;
        }
        started_over_evidence(run, r, i, f);
    }
    tw_finding_recommend(f, "Work after the last checkpoint before each restart was lost; find why the earlier launch "
                            "stopped (its outcome above, --launch N for its findings) and checkpoint more often if "
                            "restarts are expected.");
}

/* The first fact of key in launch l, or NULL. */
static const tw_fact *first_fact(const tw_run *l, const char *key)
{
    for (int i = 0; i < l->fact_count; i++) {
        if (strcmp(l->facts[i].key, key) == 0)
            return &l->facts[i];
    }
    return NULL;
}

/* Launches that ran in another environment or configuration than the one
 * before them (versions, GPUs, batch size, commit): their results are not
 * comparable, and which one produced the model matters. */
/* The number of devices a CUDA_VISIBLE_DEVICES value lists. */
static int tw_device_count(const char *value)
{
    int n = *value != '\0';
    for (const char *c = value; *c; c++)
        n += *c == ',';
    return n;
}

/* Two values of a fact that differ in a way that changes the run: which
 * GPUs of the node a launch is given (CUDA_VISIBLE_DEVICES 0,1 -> 6,7) does
 * not, how many it is given does (the corpus's paddleseg-encnet 0,1 ->
 * 0,1,2,3; healthy-ppindustry-paddleseg-16k-relaunch moved to 6,7). */
static bool tw_fact_changed(const tw_fact *before, const tw_fact *now)
{
    if (strcmp(before->value, now->value) == 0)
        return false;
    if (strcmp(now->key, "CUDA_VISIBLE_DEVICES") == 0)
        return tw_device_count(before->value) != tw_device_count(now->value);
    return true;
}

static void environment_changed(const tw_run *run, const tw_report *r, tw_findings *out)
{
    tw_finding *f = NULL;
    for (int i = 1; i < r->launch_count; i++) {
        const tw_run *a = tw_run_launch(run, i - 1), *b = tw_run_launch(run, i);
        for (int k = 0; k < b->fact_count; k++) {
            const tw_fact *now = &b->facts[k], *before = first_fact(a, now->key);
            /* each key once, by its first value in each launch */
            if (first_fact(b, now->key) != now || !before || !tw_fact_changed(before, now))
                continue;
            if (!f) {
                f = tw_finding_add(out, "environment_changed", TW_SEV_WARNING,
                                   "Launch %d ran with %s %s where launch %d had %s", i + 1, now->key, now->value, i,
                                   before->value);
                if (!f)
                    return;
                f->where = tw_run_source(run, b->facts[k].file, b->facts[k].line);
                f->value = i + 1;
                tw_finding_recommend(f, "Results of launches in different environments are not comparable: note "
                                        "which one produced the model (versions, GPUs and batch size together set "
                                        "the global batch and the numerics).");
            }
            char at[320];
            tw_finding_evidence(f, "launch %d: %s %s -> %s (%s)", i + 1, now->key, before->value, now->value,
                                tw_where(run, b->facts[k].file, b->facts[k].line, at, sizeof at));
        }
    }
}

/* ---- the report's own summary and findings ----------------------------- */

static int append_all(tw_findings *into, const tw_launch_report *l)
{
    for (int i = 0; i < l->finding_count; i++) {
        tw_finding *f = tw_finding_add(into, l->findings[i].rule, l->findings[i].severity, "%s", "");
        if (!f)
            return TW_ENOMEM;
        *f = l->findings[i];
    }
    return TW_OK;
}

int tw_report_select(const tw_run *run, tw_report *report)
{
    tw_findings out = {.run = run};
    int count = report->launch_count;
    bool all = report->launch == TW_LAUNCH_ALL;
    const tw_launch_report *shown = &report->launches[(all ? count : report->launch) - 1];
    report->summary = shown->summary;
    int rc = append_all(&out, shown);
    if (count > 1 && !all && report->launch == count)
        earlier_errors(report, &out);
    if (count > 1 && (all || report->launch == count)) {
        failed_launches(run, report, &out);
        restarts(run, report, &out);
        environment_changed(run, report, &out);
    }
    for (int i = count - 2; all && rc == TW_OK && i >= 0; i--)
        rc = append_all(&out, &report->launches[i]); /* the last launch first */
    if (rc != TW_OK) {
        free(out.items);
        return rc;
    }
    tw_findings_sort(out.items, out.count);
    report->findings = out.items;
    report->finding_count = out.count;
    report->healthy = tw_findings_healthy(out.items, out.count);
    return TW_OK;
}
