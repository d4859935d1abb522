/*
 * fmt_yolo.c: Ultralytics YOLO (v5/v8) results.csv and console tables.
 *
 *   results.csv:  epoch, train/box_loss, train/obj_loss, ..., metrics/mAP_0.5, ...,
 *                 val/box_loss, ..., x/lr0, x/lr1, x/lr2
 *   console:      Epoch   GPU_mem   box_loss   obj_loss   cls_loss  Instances  Size
 *                  1/99     3.21G    0.1169    0.06911    0.03919        87   640: 100%|...
 *
 * The header line names the columns (kept in the per-input state); each row
 * becomes a step record (the train losses summed into loss, parts kept as
 * metrics, lr from x/lr0) and, for results.csv, an eval record with the
 * metrics/ and val/ columns. A results.csv row is one epoch.
 */
#include <string.h>
#include <strings.h>

#include "formats.h"

#define YOLO_COLUMNS 40

typedef struct yolo_state {
    int ncols;
    bool csv;
    char names[YOLO_COLUMNS][TW_NAME_MAX];
} yolo_state;


/* Splits s into fields at commas (csv) or runs of blanks; returns the count. */
static int split(const char *s, const char *end, bool csv, const char **start, size_t *len, int max)
{
    int n = 0;
    const char *p = s;
    while (p < end && n < max) {
        while (p < end && (tw_is_blank(*p) || (csv && *p == ',')))
            p++;
        if (p >= end)
            break;
        const char *q = p;
        while (q < end && (csv ? *q != ',' : !tw_is_blank(*q)))
            q++;
        const char *t = q;
        while (t > p && tw_is_blank(t[-1]))
            t--;
        start[n] = p;
        len[n] = (size_t)(t - p);
        n++;
        p = q;
    }
    return n;
}

/* A header names the columns: it starts with "epoch", has a loss column,
 * and no field is a number (that would be a row). */
static bool is_header(const char *s, size_t n)
{
    const char *e = tw_find_ci(s, n, "epoch");
    if (!e || memchr(s, '=', n) || !tw_find(s, n, "loss"))
        return false;
    for (const char *p = s; p < e; p++) {
        if (!tw_is_blank(*p))
            return false;
    }
    const char *start[YOLO_COLUMNS];
    size_t len[YOLO_COLUMNS];
    int count = split(s, s + n, memchr(s, ',', n) != NULL, start, len, YOLO_COLUMNS);
    if (count < 3)
        return false;
    for (int i = 0; i < count; i++) {
        double v;
        if (tw_scan_number(start[i], start[i] + len[i], &v) == len[i])
            return false;
    }
    return true;
}

static bool detect(const tw_line *line)
{
    size_t i = 0;
    while (i < line->len && tw_is_blank(line->text[i]))
        i++;
    return i < line->len && (line->text[i] == 'e' || line->text[i] == 'E') && is_header(line->text, line->len);
}

static int learn_header(yolo_state *st, const tw_line *line)
{
    const char *start[YOLO_COLUMNS];
    size_t len[YOLO_COLUMNS];
    st->csv = memchr(line->text, ',', line->len) != NULL;
    st->ncols = split(line->text, line->text + line->len, st->csv, start, len, YOLO_COLUMNS);
    for (int i = 0; i < st->ncols; i++) {
        size_t l = len[i] < TW_NAME_MAX - 1 ? len[i] : TW_NAME_MAX - 1;
        memcpy(st->names[i], start[i], l);
        st->names[i][l] = '\0';
    }
    return -1;
}

static bool is_train_loss(const char *name)
{
    size_t n = strlen(name);
    bool train = strncmp(name, "train/", 6) == 0 || strchr(name, '/') == NULL;
    return train && n >= 4 && strcmp(name + n - 4, "loss") == 0;
}

static int parse_row(tw_parser *p, yolo_state *st, const tw_line *line)
{
    const char *start[YOLO_COLUMNS];
    size_t len[YOLO_COLUMNS];
    const char *end = line->text + line->len;
    int n = split(line->text, end, st->csv, start, len, st->ncols);
    if (n < st->ncols || (st->csv && n != st->ncols))
        return 0;
    tw_record step, eval;
    tw_record_init(&step);
    tw_record_init(&eval);
    double loss = 0;
    bool any_loss = false;
    for (int i = 0; i < n; i++) {
        const char *name = st->names[i];
        const char *f = start[i];
        const char *fend = f + len[i];
        long long a, b;
        double v;
        if (strcasecmp(name, "epoch") == 0) {
            if (tw_scan_fraction(f, fend, &a, &b)) {
                step.epoch = a;
                step.epoch_total = b;
            } else if (tw_scan_uint(f, fend, &a)) {
                step.epoch = a;
                step.global_step = a;
            } else {
                return 0;
            }
            continue;
        }
        size_t m = tw_scan_number(f, fend, &v);
        if (!m)
            return 0;
        if (strcasecmp(name, "gpu_mem") == 0) {
            step.mem_bytes = v * (f[m] == 'G' ? 1073741824.0 : 1048576.0);
            step.fields |= TW_F_MEM;
        } else if (strcmp(name, "x/lr0") == 0) {
            step.lr = v;
            step.fields |= TW_F_LR;
        } else if (is_train_loss(name)) {
            loss += v;
            any_loss = true;
            tw_record_set_metric(&step, name, strlen(name), v);
        } else if (strncmp(name, "metrics/", 8) == 0 || strncmp(name, "val/", 4) == 0) {
            tw_record_set_metric(&eval, name, strlen(name), v);
        } else if (strncmp(name, "x/", 2) != 0) {
            tw_record_set_metric(&step, name, strlen(name), v);
        }
    }
    if (step.epoch < 0 || !any_loss)
        return 0;
    step.loss = loss;
    step.fields |= TW_F_LOSS;
    if (!st->csv) {
        const char *bar = tw_find(line->text, line->len, "%|");
        const char *pipe = bar ? memchr(bar + 2, '|', (size_t)(end - bar - 2)) : NULL;
        long long a, b;
        if (pipe && tw_scan_fraction(pipe + 1, end, &a, &b)) {
            step.step = a;
            step.step_total = b;
        }
    }
    tw_parser_emit(p, line, &step);
    int emitted = 1;
    if (eval.metric_count > 0) {
        eval.epoch = step.epoch;
        eval.global_step = step.global_step;
        emitted += tw_emit_eval(p, line, &eval);
    }
    return emitted;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    yolo_state *st = state;
    if (is_header(line->text, line->len))
        return learn_header(st, line);
    if (st->ncols == 0)
        return 0;
    return parse_row(p, st, line);
}

/* Column names are strings in fixed buffers: compare the ones in use. */
static bool same_state(const void *a, const void *b)
{
    const yolo_state *x = a, *y = b;
    if (x->ncols != y->ncols || x->csv != y->csv)
        return false;
    for (int i = 0; i < x->ncols && i < YOLO_COLUMNS; i++) {
        if (strcmp(x->names[i], y->names[i]) != 0)
            return false;
    }
    return true;
}

const tw_format tw_format_yolo = {
    .name = "yolo",
    .summary = "Ultralytics YOLO results.csv and console epoch tables",
    .state_size = sizeof(yolo_state),
    .detect = detect,
    .parse = parse,
    .same_state = same_state,
};
