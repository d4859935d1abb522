/*
 * stacks.c: faulthandler's all-threads dumps, a line at a time (see
 * stacks.h).
 */
#include "stacks.h"

#include <stdio.h>
#include <string.h>

#include "scan.h"

static bool thread_header(const char *s, size_t len, bool *current)
{
    static const char tail[] = " (most recent call first):";
    size_t t = sizeof tail - 1;
    if (len < t || memcmp(s + len - t, tail, t) != 0)
        return false;
    *current = tw_starts_with(s, len, "Current thread 0x");
    return *current || tw_starts_with(s, len, "Thread 0x");
}

bool tw_stacks_begins(const char *s, size_t len)
{
    bool current;
    return len > 30 && (s[0] == 'T' || s[0] == 'C') && thread_header(s, len, &current);
}

/* The thread just read: is it the main one? */
static void end_thread(tw_stacks *st)
{
    if (!st->has_frame)
        return;
    if (st->is_current)
        memcpy(st->current, st->top, sizeof st->top);
    if (!st->main_found)
        memcpy(st->main, st->top, sizeof st->top);
}

/* '  File "PATH", line N in FUNC' */
static bool frame(tw_stacks *st, const char *s, size_t len)
{
    if (!tw_starts_with(s, len, "  File \""))
        return false;
    const char *path = s + 8, *end = s + len;
    const char *q = memchr(path, '"', (size_t)(end - path));
    if (!q || end - q < 10 || memcmp(q, "\", line ", 8) != 0)
        return false;
    const char *num = q + 8, *in = num;
    while (in < end && *in >= '0' && *in <= '9')
        in++;
    if (in == num || end - in < 5 || memcmp(in, " in ", 4) != 0)
        return false;
    const char *func = in + 4;
    if (!st->has_frame) {
        /* the file's last path part is enough to find it */
        const char *base = path;
        for (const char *p = path; p < q; p++)
            if (*p == '/')
                base = p + 1;
        snprintf(st->top, sizeof st->top, "%.*s (%.*s:%.*s)", (int)(end - func), func, (int)(q - base), base,
                 (int)(in - num), num);
        st->has_frame = true;
    }
    if ((size_t)(end - func) == 8 && memcmp(func, "<module>", 8) == 0 && !st->main_found) {
        memcpy(st->main, st->top, sizeof st->top);
        st->main_found = true;
    }
    return true;
}

bool tw_stacks_line(tw_stacks *st, const char *s, size_t len)
{
    bool current;
    if (thread_header(s, len, &current)) {
        if (!st->open)
            *st = (tw_stacks){.open = true};
        else
            end_thread(st);
        st->threads++;
        st->is_current = current;
        st->has_frame = false;
        return true;
    }
    if (!st->open)
        return false;
    if (len == 0 || frame(st, s, len) || tw_starts_with(s, len, "  <no Python frame>") ||
        tw_starts_with(s, len, "  ..."))
        return true;
    return false;
}

void tw_stacks_take(tw_stacks *st, char *message, char *detail, size_t cap)
{
    end_thread(st);
    const char *where = st->main_found ? st->main : st->current[0] ? st->current : st->main;
    snprintf(message, cap, "%s", *where ? where : "no Python frame");
    snprintf(detail, cap, "%d thread%s", st->threads, st->threads == 1 ? "" : "s");
    st->open = false;
}

bool tw_stacks_same(const tw_stacks *a, const tw_stacks *b)
{
    if (a->open != b->open)
        return false;
    return !a->open || (a->threads == b->threads && a->is_current == b->is_current && a->has_frame == b->has_frame &&
                        a->main_found == b->main_found && !strcmp(a->top, b->top) && !strcmp(a->main, b->main) &&
                        !strcmp(a->current, b->current));
}

bool tw_stacks_from_json(const char *s, size_t len, char *message, char *detail, size_t cap)
{
    tw_stacks st = {0};
    char line[TW_MESSAGE_MAX * 2];
    size_t n = 0;
    bool ok = true;
    for (size_t i = 0; i < len && ok; i++) {
        char c = s[i];
        bool end = c == '"';
        if (c == '\\' && i + 1 < len) {
            char e = s[++i];
            c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'u' ? '?' : e == 'r' ? '\r' : e;
            if (e == 'u')
                i += i + 4 < len ? 4 : 0;
        }
        if (end || c == '\n') {
            if (!tw_stacks_line(&st, line, n) && st.open)
                ok = false; /* the dump ended inside the string: what follows is not it */
            n = 0;
            if (end)
                break;
        } else if (c != '\r' && n < sizeof line) {
            line[n++] = c;
        }
    }
    if (!st.threads)
        return false;
    tw_stacks_take(&st, message, detail, cap);
    return true;
}

int tw_stacks_emit_json(tw_parser *p, const tw_line *line)
{
    const char *at = tw_find(line->text, line->len, "\"stacks\":\"");
    tw_record r;
    tw_record_init(&r);
    if (!at || !tw_stacks_from_json(at + 10, (size_t)(line->text + line->len - at - 10), r.message, r.detail,
                                    sizeof r.message))
        return 0;
    r.kind = TW_REC_EVENT;
    r.event = TW_EV_STACKS;
    tw_line record = *line;
    const char *rank = tw_find(line->text, (size_t)(at - line->text), "\"rank\":");
    long long n;
    if (rank && tw_scan_uint(rank + 7, line->text + line->len, &n) && n >= 0 && n < 1000000)
        record.rank = (int)n;
    tw_parser_emit(p, &record, &r);
    return 1;
}
