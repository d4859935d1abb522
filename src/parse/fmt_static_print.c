/*
 * fmt_static_print.c: Paddle static-graph paddle.static.Print output
 * (TensorFormatter::Format in paddle/fluid/operators/tensor_formatter.cc):
 *
 *   Variable: mean_0.tmp_0
 *     - message: loss
 *     - lod: {}
 *     - place: Place(gpu:0)
 *     - shape: [1]
 *     - layout: NCHW
 *     - dtype: float
 *     - data: [2.30259]
 *
 * Each block is a value named by its message (else its variable). A block
 * whose name says loss is a training step with that loss (static-graph runs
 * print no step counter: the loss blocks are counted), carrying the other
 * values printed since the last one as named metrics; so static-graph runs
 * get the same loss analysis as the others.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "formats.h"

#define PENDING_MAX 8

typedef struct print_state {
    bool in_block;
    char name[TW_NAME_MAX]; /* the message, else the variable */
    bool named_by_message;
    int64_t losses; /* loss blocks so far: the step counter */
    int pending;    /* values of other blocks since the last loss */
    tw_metric values[PENDING_MAX];
} print_state;

/* The block's first line, or one of its "  - key: value" lines. */
static bool detect(const tw_line *line)
{
    return tw_starts_with(line->text, line->len, "Variable: ") || tw_starts_with(line->text, line->len, "  - ");
}

static bool names_loss(const char *name)
{
    for (const char *p = name; *p; p++) {
        if ((p[0] == 'l' || p[0] == 'L') && strncasecmp(p, "loss", 4) == 0)
            return true;
    }
    return false;
}

/* "  - data: [2.30259 1.5]": the first value, the block's value. */
static int data_line(tw_parser *p, print_state *st, const tw_line *line)
{
    const char *s = line->text + 11, *end = line->text + line->len;
    double v;
    st->in_block = false;
    if (s >= end || !tw_scan_number(s, end, &v))
        return -1;
    if (!names_loss(st->name)) {
        if (st->pending < PENDING_MAX) {
            tw_metric *m = &st->values[st->pending++];
            snprintf(m->name, sizeof m->name, "%s", st->name);
            m->value = v;
        }
        return -1;
    }
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_STEP;
    r.step = r.global_step = ++st->losses;
    r.loss = v;
    r.fields |= TW_F_LOSS;
    for (int i = 0; i < st->pending; i++)
        tw_record_set_metric(&r, st->values[i].name, strlen(st->values[i].name), st->values[i].value);
    st->pending = 0;
    tw_parser_emit(p, line, &r);
    return 1;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    print_state *st = state;
    const char *s = line->text;
    size_t len = line->len;
    if (tw_starts_with(s, len, "Variable: ")) {
        st->in_block = true;
        st->named_by_message = false;
        tw_record_set_text(st->name, s + 10, len - 10 < TW_NAME_MAX ? len - 10 : TW_NAME_MAX - 1);
        return -1;
    }
    if (!st->in_block || !tw_starts_with(s, len, "  - "))
        return st->in_block = false, 0;
    if (tw_starts_with(s, len, "  - message: ") && len > 13) {
        size_t n = len - 13 < TW_NAME_MAX ? len - 13 : TW_NAME_MAX - 1;
        tw_record_set_text(st->name, s + 13, n);
        st->named_by_message = true;
        return -1;
    }
    if (tw_starts_with(s, len, "  - data: [") && len > 11)
        return data_line(p, st, line);
    return -1; /* lod, place, shape, layout, dtype */
}

/* The text buffers hold old bytes past their strings: compare what is used. */
static bool same_state(const void *a, const void *b)
{
    const print_state *x = a, *y = b;
    if (x->in_block != y->in_block || x->losses != y->losses || x->pending != y->pending)
        return false;
    if (x->in_block && strcmp(x->name, y->name) != 0)
        return false;
    for (int i = 0; i < x->pending; i++) {
        if (strcmp(x->values[i].name, y->values[i].name) != 0 || x->values[i].value != y->values[i].value)
            return false;
    }
    return true;
}

static const char *const anchors[] = {"Variable: ", "  - ", NULL};

const tw_format tw_format_static_print = {
    .name = "static-print",
    .summary = "Paddle static-graph paddle.static.Print blocks (Variable:, - message:, - data: [...])",
    .state_size = sizeof(print_state),
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
    .same_state = same_state,
};
