/*
 * fmt_hf_state.c: HuggingFace Trainer's trainer_state.json.
 *
 *   "log_history": [
 *     {
 *       "epoch": 0.0107, "grad_norm": 1.00, "learning_rate": 2.4e-06,
 *       "loss": 2.0762, "step": 15
 *     },
 *     { "epoch": 0.1425, "eval_loss": 1.6222, "eval_runtime": 311.1, "step": 200 },
 *
 * A pretty-printed JSON document rather than lines: the objects inside
 * log_history are gathered one line at a time into the per-input state and
 * emitted at their closing brace, cited at their "loss" (or "eval_loss")
 * line where they have one. Objects with eval_ keys are evaluations;
 * the final train_runtime summary is skipped.
 */
#include <string.h>

#include "formats.h"

typedef struct hf_state {
    bool in_history;
    int depth;           /* brace depth inside log_history */
    bool eval, summary;
    tw_record record;
    tw_line line;        /* where the object began (source only) */
} hf_state;

/* Keeps where the record is cited (its source only, not its text). */
static void mark_line(hf_state *st, const tw_line *line)
{
    st->line = *line;
    st->line.text = st->line.body = NULL;
    st->line.len = st->line.body_len = 0;
}

static bool detect(const tw_line *line)
{
    return tw_find(line->text, line->len, "\"log_history\"") != NULL;
}

static int close_object(tw_parser *p, hf_state *st)
{
    tw_record *r = &st->record;
    if (st->summary)
        return -1;
    tw_record_step_is_global(r); /* HF's "step" counts optimizer steps over the run */
    if (st->eval) {
        r->fields = 0;
        return tw_emit_eval(p, &st->line, r) ? 1 : -1;
    }
    return tw_emit_step(p, &st->line, r, -1);
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    hf_state *st = state;
    const char *s = line->text;
    size_t n = line->len;
    if (!st->in_history) {
        if (!detect(line))
            return 0;
        st->in_history = true;
        st->depth = 0;
        return -1;
    }
    const char *t = s;
    while (t < s + n && tw_is_blank(*t))
        t++;
    size_t tn = (size_t)(s + n - t);
    if (st->depth == 0) {
        if (tn > 0 && t[0] == '{') {
            st->depth = 1;
            st->eval = st->summary = false;
            tw_record_init(&st->record);
            mark_line(st, line);
            return -1;
        }
        if (tn > 0 && t[0] == ']')
            st->in_history = false;
        return -1;
    }
    if (tn > 0 && t[0] == '}') {
        st->depth--;
        if (st->depth == 0)
            return close_object(p, st);
        return -1;
    }
    if (memchr(t, '{', tn))
        st->depth++;
    if (tw_starts_with(t, tn, "\"eval_"))
        st->eval = true;
    /* a record is cited at its loss, the line an engineer quotes */
    if (tw_starts_with(t, tn, "\"loss\"") || tw_starts_with(t, tn, "\"eval_loss\""))
        mark_line(st, line);
    if (tw_starts_with(t, tn, "\"train_runtime\""))
        st->summary = true;
    tw_fields_scan(&st->record, t, tn);
    return -1;
}

static const char *const anchors[] = {"\"log_history\"", NULL};

/* Inside an entry the record in the making differs in unused bytes: only
 * states between entries compare. */
static bool same_state(const void *a, const void *b)
{
    const hf_state *x = a, *y = b;
    return x->in_history == y->in_history && x->depth == 0 && y->depth == 0;
}

const tw_format tw_format_hf_state = {
    .name = "hf-trainer-state",
    .summary = "HuggingFace trainer_state.json (log_history entries)",
    .state_size = sizeof(hf_state),
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
    .same_state = same_state,
};
