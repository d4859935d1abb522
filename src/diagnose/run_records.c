/*
 * run_records.c: tw_run_add, the parser's sink (see analyze.h): each record
 * to the launch its rank is in now (run_launches.c) and to the file that
 * accounts for its kind: steps (run_steps.c), evaluations (run_metrics.c),
 * events (run_events.c); a line no format read and a hint of the GPU a rank
 * uses to the root's hooks (templates.c, gpu.c, handed in by diagnose.c).
 * Each record's time widens its launch's span.
 */
#include <math.h>

#include "run_internal.h"
#include "trainwatch/error.h"

static void note_time(tw_launch_info *l, const tw_record *r)
{
    if (!(r->fields & TW_F_TIME) || !isfinite(r->time))
        return;
    /* ranks come one file after another: the extremes, not the order */
    if (isnan(l->first_time) || r->time < l->first_time)
        l->first_time = r->time;
    if (isnan(l->last_time) || r->time > l->last_time)
        l->last_time = r->time;
}

void tw_run_add(void *arg, const tw_record *r)
{
    tw_run *root = arg;
    if (r->kind == TW_REC_LINE) { /* a line no format read: the template miner's, no rank's record */
        uint32_t file = tw_run_intern_file(root, r->source.file);
        const tw_run_hooks *h = root->hooks;
        if (h && h->unread_line(root, r, file, tw_run_launch_of(root, r->rank)) != TW_OK)
            root->lines_not_mined++;            /* out of memory: said under --templates */
        if (h && h->gpu_hint_maybe(r->message)) /* which GPU the rank uses (gpu.c) */
            h->gpu_hint(root, r, file, tw_run_launch_of(root, r->rank));
        return;
    }
    tw_cursor *c = tw_run_cursor_of(root, r->rank);
    tw_run *run = c ? tw_run_launch_at(root, c->launch) : root;
    switch (r->kind) {
    case TW_REC_STEP:
        tw_run_add_step(root, run, c, r);
        break;
    case TW_REC_EVAL:
        tw_run_add_eval(root, run, r);
        break;
    case TW_REC_EVENT:
        tw_run_add_event(root, run, c, r);
        if (root->hooks && root->hooks->gpu_hint_maybe(r->message)) /* after: a start line moves the rank on */
            root->hooks->gpu_hint(root, r, tw_run_intern_file(root, r->source.file), tw_run_launch_of(root, r->rank));
        break;
    case TW_REC_LINE:
        break;
    }
    if (r->fields & TW_F_TIME) {
        /* the launch the record went to: the cursor may have moved */
        note_time(c ? &tw_run_launch_at(root, c->launch)->launch : &root->launch, r);
        if (c)
            c->last_time = r->time;
    }
}
