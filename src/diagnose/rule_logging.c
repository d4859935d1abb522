/*
 * rule_logging.c: what the logging itself leaves in a log.
 *
 * Duplicated records: the same step record printed two or more times in a
 * row, as a logger configured twice (two handlers on one logger, or one on
 * the logger and one on root) or every rank writing into one file leaves
 * it. run.c counts each copy once; this names the factor and the fix.
 *
 * Logging cost: step records arriving faster than about ten a second mean
 * a record (and often a device sync for .item()) every step or two; the
 * seeds' own practice is a summary every 10-100 steps.
 *
 * A cut-off log: a file whose last line has no newline and is no complete
 * record (a step record with fewer fields than the one before it, or no
 * record or event at all) was interrupted mid-write: the run was killed, the
 * disk filled, or the copy being read stopped. The last complete record is
 * where the log's knowledge ends.
 */
#include <math.h>
#include <string.h>

#include "diagnose.h"

#define TW_RECORDS_PER_SECOND 10.0 /* step records per second above which logging costs */

static void check_duplicates(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk->used || rk->duplicates < 3 || rk->duplicates * 5 < rk->steps)
            continue;
        double factor = (double)(rk->steps + rk->duplicates) / (double)rk->steps;
        char where[600];
        tw_finding *f = tw_finding_add(out, "duplicated_logging", TW_SEV_WARNING,
                                       "Rank %d's records are printed %.1f times each: the logging is duplicated",
                                       rk->rank, factor);
        if (!f)
            return;
        tw_finding_at(f, run, &rk->first_duplicate, rk->rank);
        f->value = factor;
        tw_finding_evidence(f,
                            "%llu of %llu step records repeat the record before them exactly; first at step %.0f (%s)",
                            (unsigned long long)rk->duplicates, (unsigned long long)(rk->steps + rk->duplicates),
                            rk->first_duplicate.pos,
                            tw_where(run, rk->first_duplicate.file, rk->first_duplicate.line, where, sizeof where));
        tw_finding_evidence(f, "each is counted once in this report");
        tw_finding_recommend(f, "A logger set up twice writes every record through each handler: add the handler "
                                "only once (check logger.handlers before adding, or set propagate = False when the "
                                "root logger has one too); if every rank writes into one file, log on rank 0 only.");
    }
}

const tw_rule tw_rule_duplicated_logging = {"duplicated_logging", "the same record printed several times in a row",
                                            check_duplicates};

static void check_cost(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk->used || rk->steps < 100 || isnan(rk->first.time) || isnan(rk->last.time))
            continue;
        double seconds = rk->last.time - rk->first.time;
        if (!(seconds > 0))
            continue;
        double rate = (double)(rk->steps - 1) / seconds;
        if (rate <= TW_RECORDS_PER_SECOND)
            continue;
        double per_record = (rk->last.pos - rk->first.pos) / (double)(rk->steps - 1);
        char d[32];
        tw_finding *f =
            tw_finding_add(out, "logging_cost", TW_SEV_INFO,
                           "Rank %d logs %.0f step records a second: the logging itself costs", rk->rank, rate);
        if (!f)
            return;
        tw_finding_at(f, run, &rk->last, rk->rank);
        f->value = rate;
        tw_finding_evidence(f, "%llu step records in %s by the log's timestamps, one every %.1f steps",
                            (unsigned long long)rk->steps, tw_fmt_duration(seconds, d, sizeof d), per_record);
        tw_finding_recommend(f, "Summarise every 10-100 steps (log_interval / print_freq): each record formats text, "
                                "writes it, and usually syncs the device to read the loss (.item(), float()).");
        return; /* one rank says it for all */
    }
}

const tw_rule tw_rule_logging_cost = {"logging_cost", "step records faster than ten a second", check_cost};

static int file_index(const tw_run *run, const char *path)
{
    for (uint32_t i = 0; i < run->file_count; i++) {
        if (strcmp(run->files[i], path) == 0)
            return (int)i;
    }
    return -1;
}

/* The point before the rank's last one, from its ring of recent points. */
static const tw_point *before_last(const tw_rank *rk)
{
    if (rk->recent_count < 2)
        return NULL;
    return &rk->recent[(rk->recent_head + 8 - 2) % 8];
}

static bool event_at(const tw_run *run, int file, uint64_t line)
{
    for (int i = 0; i < run->events_kept_count; i++) {
        if ((int)run->events_kept[i].file == file && run->events_kept[i].line == line)
            return true;
    }
    return false;
}

static void report_cut(const tw_run *run, const tw_input_note *in, const tw_rank *rk, const tw_point *complete,
                       tw_findings *out)
{
    char where[600];
    tw_finding *f = tw_finding_add(out, "cut_off", TW_SEV_WARNING,
                                   "The log is cut off mid-record at line %llu: the run or its log was interrupted",
                                   (unsigned long long)in->lines);
    if (!f)
        return;
    tw_finding_at(f, run, complete, rk->rank);
    f->where.line = in->lines;
    tw_finding_evidence(f, "the last line of %s has no newline and is no complete record", in->path);
    tw_finding_evidence(f, "last complete record: step %.0f (%s)", complete->pos,
                        tw_where(run, complete->file, complete->line, where, sizeof where));
    tw_finding_recommend(f, "The process stopped while writing (killed, out of disk, the node lost) or this copy of "
                            "the log was taken while it was written: look for the end of the run in the launcher's "
                            "or scheduler's log, and copy logs only once the run has ended.");
}

static void check_cut(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->input_count; i++) {
        const tw_input_note *in = &run->inputs[i];
        int file = in->cut ? file_index(run, in->path) : -1;
        if (file < 0 || event_at(run, file, in->lines))
            continue;
        for (int k = 0; k < run->rank_count; k++) {
            const tw_rank *rk = run->ranks[k];
            if (!rk->used || (int)rk->last.file != file)
                continue;
            if (rk->last.line != in->lines) {
                report_cut(run, in, rk, &rk->last, out); /* the cut line gave no record */
                break;
            }
            const tw_point *prev = before_last(rk);
            if (prev && (int)prev->file == file &&
                __builtin_popcount(rk->last.fields) < __builtin_popcount(prev->fields)) {
                report_cut(run, in, rk, prev, out); /* the cut line is a record missing its end */
                break;
            }
        }
    }
}

const tw_rule tw_rule_cut_off = {"cut_off", "a log whose last line stops mid-record", check_cut};
