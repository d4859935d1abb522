/*
 * fmt_pylogging.c: Python logging lines in the common layouts, whose message
 * carries "key: value" training fields.
 *
 *   INFO:root:epoch=1 step=10 loss=0.53
 *   2024-01-01 12:00:00,123 - trainer - INFO - Epoch: [1], step: [100], loss: 0.08
 *   02/13/2022 23:11:11 - INFO - Epoch: [1], step: [100], lr: 0.00002, batch_loss: ...
 *   [2024/03/09 15:15:33] mylogger INFO: step: 10, loss: 0.5
 *
 * The level word is found near the start; the message after it goes through
 * the synonym table. Messages naming eval/val/test before their first key are
 * evaluation results.
 */
#include <string.h>

#include "formats.h"

static const char *const levels[] = {"INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL"};

/* Finds the message after a level word in the first 80 bytes of the body. */
static const char *message(const tw_line *line, size_t *len)
{
    const char *s = line->body;
    size_t n = line->body_len < 80 ? line->body_len : 80;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        const char *at = tw_find(s, n, levels[i]);
        if (!at)
            continue;
        const char *m = at + strlen(levels[i]);
        const char *end = line->body + line->body_len;
        /* skip the separator: ":", " - ", "]", blanks */
        while (m < end && (*m == ':' || *m == ' ' || *m == '-' || *m == ']' || *m == '\t'))
            m++;
        *len = (size_t)(end - m);
        return m;
    }
    return NULL;
}

static bool detect(const tw_line *line)
{
    size_t len;
    const char *m = message(line, &len);
    return m && (memchr(m, ':', len) || memchr(m, '=', len));
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    size_t len;
    const char *m = message(line, &len);
    if (!m)
        return 0;
    tw_record_kind kind = tw_text_is_eval(m, len) ? TW_REC_EVAL : TW_REC_STEP;
    return tw_emit_fields(p, line, kind, m, len);
}

static const char *const anchors[] = {"INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL", NULL};

const tw_format tw_format_pylogging = {
    .name = "pylogging",
    .summary = "Python logging lines (LEVEL:name:msg, 'date - name - LEVEL - msg', ...) with key: value fields",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
    .fallback = true,
};
