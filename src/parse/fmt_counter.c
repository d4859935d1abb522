/*
 * fmt_counter.c: the last fallback, for in-house `print` lines no format
 * knows and no --pattern describes: a step-like counter word with a number
 * and other "word number" pairs, with or without ':' or '='.
 *
 *   Epoch 1 Step 10: loss 2.3
 *   it 100 | loss=0.5 | lr 1e-3
 *   step: 3 loss: [1075.69]
 *   epoch: 0, batch_id: 100, loss is: [2.3]
 *
 * Each pair goes through the synonym table (scan.c) like the kv format's, so
 * "it" is read as the step counter and "loss" as the loss; a line becomes a
 * step only when it carries a counter and a loss (tw_record_is_step_like),
 * so prose with numbers ("Epoch 3 took 12 s") is left alone.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "formats.h"

#define COUNTER_PAIRS_MAX 32

static bool is_key_char(char c)
{
    return tw_is_alpha(c) || tw_is_digit(c) || c == '_' || c == '.' || c == '/';
}

/* Length of a time unit right after a number ("1431.27ms", "2.5s"), 0 if none. */
static size_t time_unit(const char *p, const char *end)
{
    size_t n = p + 2 <= end && p[0] == 'm' && p[1] == 's' ? 2 : p < end && p[0] == 's' ? 1 : 0;
    return n && (p + n == end || !tw_is_alpha(p[n])) ? n : 0;
}

static const char *const counter_words[] = {"step",        "iter",  "iteration", "it",
                                            "epoch",       "global_step", "batch", "batch_id", NULL};

static bool counter_word(const char *s, size_t len)
{
    for (const char *const *w = counter_words; *w; w++) {
        if (strlen(*w) == len && strncasecmp(s, *w, len) == 0)
            return true;
    }
    return false;
}

/* The key/value pair starting at *pos ("Step 10", "loss: [2.3]", "lr=1e-3"):
 * fills kv and moves *pos past it; false (and *pos past the word) when the
 * word is not followed by a number. */
static bool next_pair(const char *s, const char *end, const char **pos, tw_kv *kv)
{
    const char *p = *pos;
    while (p < end && !tw_is_alpha(*p))
        p++;
    const char *key = p;
    while (p < end && is_key_char(*p))
        p++;
    *pos = p;
    if (p == key)
        return false;
    size_t key_len = (size_t)(p - key);
    while (p < end && tw_is_blank(*p))
        p++;
    if (end - p >= 3 && p[0] == 'i' && p[1] == 's' && (p[2] == ':' || tw_is_blank(p[2])))
        p += 2; /* "loss is: [2.3]" */
    while (p < end && tw_is_blank(*p))
        p++;
    if (p < end && (*p == ':' || *p == '='))
        p++;
    while (p < end && tw_is_blank(*p))
        p++;
    bool bracket = p < end && *p == '[';
    if (bracket)
        p++;
    double v;
    size_t n = tw_scan_number(p, end, &v);
    size_t unit = n ? time_unit(p + n, end) : 0;
    if (n == 0 || (!unit && p + n < end && (tw_is_alpha(p[n]) || p[n] == '/')))
        return false; /* "10x", "3/100" (a fraction is the kv format's), no number */
    *kv = (tw_kv){.key = key, .key_len = key_len, .value = p, .end = end, .number = v, .value_len = n + unit};
    if (unit) {
        kv->unit = p + n;
        kv->unit_len = unit;
    }
    *pos = p + n + unit + (bracket && p + n < end && p[n] == ']');
    (void)s;
    return true;
}

/* "batch 3" or "batch_id: 3" after an epoch and with no step yet: the
 * batch's index in the epoch (Paddle's tutorials print "epoch: 0,
 * batch_id: 100, loss is: [2.3]"), not a batch size (which is no whole
 * counter beside an epoch: "batch_size" is the kv format's). Such a line
 * is a step only with a loss: without, it is an inference's progress. */
static bool is_batch_index(const tw_kv *kv, const tw_record *r)
{
    bool word = (kv->key_len == 5 && strncasecmp(kv->key, "batch", 5) == 0) ||
                (kv->key_len == 8 && strncasecmp(kv->key, "batch_id", 8) == 0);
    return word && r->epoch >= 0 && r->step < 0 && kv->number >= 0 && kv->number == (double)(long long)kv->number;
}

/* An eval word before a key ("val loss 3.4"): the pair belongs to an
 * evaluation; "train" before one names it too (nanoGPT's "step 100: train
 * loss 3.46, val loss 3.50" is its evaluation of both splits). */
static const char *const qualifier_words[] = {"val", "valid", "validation", "eval", "test", "dev", "train", NULL};

static bool qualifier(const char *s, size_t len, bool *eval)
{
    for (const char *const *w = qualifier_words; *w; w++) {
        if (strlen(*w) == len && strncasecmp(s, *w, len) == 0) {
            *eval = strcmp(*w, "train") != 0;
            return true;
        }
    }
    return false;
}

static bool detect(const tw_line *line)
{
    const char *p = line->body, *end = line->body + line->body_len;
    tw_kv kv;
    for (int i = 0; p < end && i < COUNTER_PAIRS_MAX; i++) {
        if (next_pair(line->body, end, &p, &kv) && counter_word(kv.key, kv.key_len))
            return true;
    }
    return false;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    tw_record r;
    tw_record_init(&r);
    const char *pos = line->body, *end = line->body + line->body_len;
    tw_kv kv;
    const char *word = NULL; /* the word before this pair, when it had no number */
    size_t word_len = 0;
    bool eval = false, batch_step = false;
    for (int i = 0; pos < end && i < COUNTER_PAIRS_MAX; i++) {
        const char *before = pos;
        if (!next_pair(line->body, end, &pos, &kv)) {
            while (before < end && !tw_is_alpha(*before))
                before++;
            word = before;
            word_len = (size_t)(pos - before);
            continue;
        }
        char named[64];
        bool eval_word = false;
        if (word && !counter_word(kv.key, kv.key_len) && word_len + 1 + kv.key_len < sizeof named &&
            qualifier(word, word_len, &eval_word)) {
            /* "val loss 3.4" is val_loss */
            snprintf(named, sizeof named, "%.*s_%.*s", (int)word_len, word, (int)kv.key_len, kv.key);
            kv.key = named;
            kv.key_len = strlen(named);
            eval |= eval_word;
        } else if (kv.key_len == 2 && strncasecmp(kv.key, "it", 2) == 0) {
            kv.key = "iter";
            kv.key_len = 4;
        } else if (is_batch_index(&kv, &r)) {
            kv.key = "step"; /* "Epoch 0 batch 3", "epoch: 0, batch_id: 3": the step in the epoch */
            kv.key_len = 4;
            batch_step = true;
        }
        word = NULL;
        tw_fields_apply(&r, &kv);
    }
    if (eval)
        return tw_emit_eval(p, line, &r);
    if (tw_text_is_eval(line->body, line->body_len))
        return 0;
    if (batch_step && !tw_has(&r, TW_F_LOSS))
        return 0; /* a batch index without a loss: an inference's or evaluation's progress */
    return tw_emit_step(p, line, &r, 0);
}

const tw_format tw_format_counter = {
    .name = "counter",
    .summary = "fallback: a step counter word and 'word number' pairs (Epoch 1 Step 10: loss 2.3, it 100 | loss=0.5)",
    .detect = detect,
    .parse = parse,
    .fallback = true,
};
