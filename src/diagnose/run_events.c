/*
 * run_events.c: an event record (crash, OOM, NaN check, checkpoint, launcher
 * report ...) into the launch's counts and the events kept for the rules,
 * and environment records into the launch's facts (versions, GPUs, commit).
 */
#include <stdio.h>
#include <string.h>

#include "run_internal.h"

/* "GPUs used: 4" -> GPUs used = 4; "  sha: ed03..., status: ..." -> git commit
 * = ed03...; "... train with paddle 2.5.2 and device Place(gpu:0)" ->
 * PaddlePaddle = 2.5.2. Each distinct key and value once per launch. */
static void note_fact(tw_run *root, tw_run *run, const tw_record *r)
{
    const char *m = r->message;
    while (*m == ' ' || *m == '\t')
        m++;
    char key[32], value[80];
    const char *paddle = strstr(m, "train with paddle ");
    if (paddle) {
        snprintf(key, sizeof key, "PaddlePaddle");
        snprintf(value, sizeof value, "%.*s", (int)strcspn(paddle + 18, " "), paddle + 18);
    } else {
        const char *colon = strstr(m, ": ");
        if (!colon)
            return;
        bool sha = colon - m == 3 && strncmp(m, "sha", 3) == 0;
        snprintf(key, sizeof key, "%.*s", sha ? 10 : (int)(colon - m), sha ? "git commit" : m);
        snprintf(value, sizeof value, "%.*s", sha ? (int)strcspn(colon + 2, ",") : (int)strlen(colon + 2), colon + 2);
    }
    int rank = r->rank < 0 ? 0 : r->rank;
    for (int i = 0; i < run->fact_count; i++) {
        if (strcmp(run->facts[i].key, key) == 0 && strcmp(run->facts[i].value, value) == 0)
            return;
    }
    if (run->fact_count == TW_FACTS_MAX)
        return;
    tw_fact *f = &run->facts[run->fact_count++];
    memcpy(f->key, key, sizeof key);
    memcpy(f->value, value, sizeof value);
    f->rank = rank;
    f->file = tw_run_intern_file(root, r->source.file);
    f->line = r->source.line;
}

/* Events a long run logs by the hundred (every epoch's checkpoint, every
 * skipped NaN step, deprecation warnings). */
static bool routine_event(tw_event_kind kind)
{
    return kind == TW_EV_WARNING || kind == TW_EV_CHECKPOINT || kind == TW_EV_RESUME || kind == TW_EV_NAN ||
           kind == TW_EV_OVERFLOW;
}

/* Keeps an event for the rules, in the order they came: the first ones
 * while there is room, routine ones in at most half of it and never in the
 * last TW_EVENTS_TAIL slots. Those keep the latest events that are not
 * routine: when all is full a new one slides the oldest of them out. So
 * neither hundreds of warnings nor hundreds of caught exceptions crowd out
 * the OOM, the crash or the launcher's report at the end (every event is
 * counted in event_counts either way). */
static void keep_event(tw_run *run, const tw_event_note *note)
{
    tw_event_note *kept = run->events_kept;
    if (routine_event(note->kind)) {
        if (run->routine_kept < TW_EVENTS_KEPT / 2 && run->events_kept_count < TW_EVENTS_KEPT - TW_EVENTS_TAIL) {
            kept[run->events_kept_count++] = *note;
            run->routine_kept++;
        } else {
            run->events_not_kept++;
        }
        return;
    }
    if (run->events_kept_count < TW_EVENTS_KEPT) {
        kept[run->events_kept_count++] = *note;
        return;
    }
    tw_event_note *tail = kept + TW_EVENTS_KEPT - TW_EVENTS_TAIL;
    memmove(tail, tail + 1, (TW_EVENTS_TAIL - 1) * sizeof *tail);
    kept[TW_EVENTS_KEPT - 1] = *note;
    run->events_not_kept++;
}

void tw_run_add_event(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r)
{
    if (c && r->event == TW_EV_LAUNCH)
        run = tw_run_start_line(root, run, c, r);
    if (r->event == TW_EV_ENVIRONMENT) { /* a fact, counted, not kept as an event */
        note_fact(root, run, r);
        run->events++;
        run->event_counts[r->event]++;
        return;
    } else if (c && tw_run_ends_start(r))
        c->content = true;
    tw_rank *rk = tw_run_rank_of(run, r->rank);
    if (rk && (r->event == TW_EV_CHECKPOINT || r->event == TW_EV_RESUME))
        rk->event_since_last = true;
    if (rk && r->event == TW_EV_OVERFLOW) {
        tw_point at = {.pos = rk->have_last ? rk->last.pos : 0,
                       .file = tw_run_intern_file(root, r->source.file),
                       .line = r->source.line};
        tw_precision_overflow(&rk->precision, r, &at);
    }
    run->events++;
    if ((unsigned)r->event < TW_EV_COUNT)
        run->event_counts[r->event]++;
    tw_event_note note = {
        .kind = r->event,
        .rank = r->rank < 0 ? 0 : r->rank,
        .file = tw_run_intern_file(root, r->source.file),
        .line = r->source.line,
        .time = r->time,
        .has_time = (r->fields & TW_F_TIME) != 0,
        .last_pos = rk && rk->have_last ? rk->last.pos : -1,
        .code = r->exit_code,
    };
    memcpy(note.message, r->message, sizeof note.message);
    memcpy(note.detail, r->detail, sizeof note.detail);
    if (r->event == TW_EV_EXCEPTION) {
        run->last_exception = note;
        run->have_last_exception = true;
    }
    if (run->shape_note_count < TW_SHAPE_NOTES && (strstr(note.message, "shape") || strstr(note.detail, "shape")))
        run->shape_notes[run->shape_note_count++] = note;
    keep_event(run, &note);
}
