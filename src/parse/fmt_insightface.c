/*
 * fmt_insightface.c: InsightFace arcface_torch's CallBackLogging line, and
 * the many face-recognition trainers that copy it:
 *
 *   Training: 2023-03-14 09:08:47,984-Speed 2183.37 samples/sec   Loss nan
 *     LearningRate 0.001000   Epoch: 0   Global Step: 30   Fp16 Grad Scale:  0
 *     Required: 144 hours
 *
 * (one line). The loss is the average since the last line; the scale is the
 * GradScaler's (metric loss_scale, which rule_precision.c judges); Required
 * is the time left in hours. Forks move the fields about ("Speed ...
 * samples/sec  Epoch: 0  Global Step: 30  Loss 9.1 ...", "LR: 0.1"), so each
 * is found by its own words. A line wrapped before "Epoch:" (pasted into an
 * issue) is read with its second half: the first half is held for the next
 * line, and dropped when that line is not the rest.
 */
#include <math.h>
#include <string.h>

#include "formats.h"

typedef struct insightface_state {
    bool held;       /* the first half of a wrapped line */
    tw_record first; /* its fields */
} insightface_state;

static const char step_key[] = "Global Step: ";

static bool has_speed(const char *s, size_t n)
{
    return tw_find(s, n, "Speed ") && tw_find(s, n, "samples/sec") && tw_find(s, n, "Loss ");
}

/* A whole line has the speed and the step; the first half of a wrapped one
 * the speed and no epoch at all (MXNet's Speedometer, "Epoch[0] Batch [10]
 * Speed 1234.5 samples/sec", is no half: kv reads it). */
static bool is_first_half(const char *s, size_t n)
{
    return has_speed(s, n) && !tw_find(s, n, "Epoch") && !tw_find(s, n, step_key);
}

static bool detect(const tw_line *line)
{
    const char *s = line->text;
    size_t n = line->len;
    return (tw_find(s, n, step_key) && has_speed(s, n)) || is_first_half(s, n);
}

/* The number at p, after blanks, before end; false: none. */
static bool number_at(const char *p, const char *end, double *v)
{
    while (p < end && *p == ' ')
        p++;
    return tw_scan_number(p, end, v) > 0;
}

/* The number after key in the n bytes at s; false: none. */
static bool number_after(const char *s, size_t n, const char *key, double *v)
{
    const char *at = tw_find(s, n, key);
    return at && number_at(at + strlen(key), s + n, v);
}

/* The main loss: "Loss X" after the speed or a number, not a named term's
 * ("MI Loss 0.2"), which follows a word. */
static bool main_loss(const char *s, size_t n, double *v)
{
    const char *end = s + n;
    for (const char *at = tw_find(s, n, "Loss "); at; at = tw_find(at + 5, (size_t)(end - at - 5), "Loss ")) {
        const char *w = at;
        while (w > s && w[-1] == ' ')
            w--;
        bool after_value = w == s || tw_is_digit(w[-1]) || (w - s >= 11 && memcmp(w - 11, "samples/sec", 11) == 0);
        if (after_value && number_at(at + 5, end, v))
            return true;
    }
    return false;
}

/* Reads the fields of one line into r. */
static void read_fields(tw_record *r, const char *s, size_t n)
{
    double v;
    if (number_after(s, n, "Speed ", &v)) {
        r->samples_per_sec = v;
        r->fields |= TW_F_SAMPLES_PER_SEC;
    }
    if (main_loss(s, n, &v)) {
        r->loss = v;
        r->fields |= TW_F_LOSS;
    }
    if (number_after(s, n, "LearningRate ", &v) || number_after(s, n, "LR: ", &v)) {
        r->lr = v;
        r->fields |= TW_F_LR;
    }
    if (number_after(s, n, "Epoch: ", &v) && v >= 0 && v < 1e9)
        r->epoch = (int64_t)v;
    if (number_after(s, n, step_key, &v) && v >= 0 && v < 1e15)
        r->global_step = (int64_t)v;
    if (number_after(s, n, "Fp16 Grad Scale: ", &v))
        tw_record_set_metric(r, "loss_scale", strlen("loss_scale"), v);
    if (number_after(s, n, "Required: ", &v) && v >= 0 && isfinite(v)) {
        r->eta = v * 3600.0;
        r->fields |= TW_F_ETA;
    }
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    insightface_state *st = state;
    const char *s = line->text;
    size_t n = line->len;
    bool held = st->held;
    st->held = false;
    tw_record r;
    if (held && tw_find(s, n, step_key) && !has_speed(s, n)) {
        r = st->first; /* the second half of a wrapped line */
    } else if (is_first_half(s, n)) {
        tw_record_init(&st->first);
        read_fields(&st->first, s, n);
        st->held = true;
        return -1;
    } else if (tw_find(s, n, step_key) && has_speed(s, n)) {
        tw_record_init(&r);
    } else {
        return 0;
    }
    read_fields(&r, s, n);
    if (r.global_step < 0)
        return 0;
    return tw_emit_step(p, line, &r, -1);
}

static const char *const anchors[] = {step_key, "samples/sec", NULL};

const tw_format tw_format_insightface = {
    .name = "insightface",
    .summary = "InsightFace arcface_torch lines (Speed N samples/sec   Loss X   LearningRate Y   Epoch: E   Global "
               "Step: S   Fp16 Grad Scale: G   Required: H hours)",
    .state_size = sizeof(insightface_state),
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
