/*
 * templates.c: the lines no format read, grouped into templates, and the
 * rare ones that look like trouble ("unusual lines").
 *
 * A template is the line with its variable tokens masked, as Drain masks
 * them before it clusters: a token with a digit (numbers, ids, hex,
 * addresses, times) becomes <*>, a path (a token with '/') <PATH>, a
 * quoted string <STR>. Lines with the same template are one entry (hashed,
 * open addressing, at most TW_TEMPLATES_MAX; later new templates are
 * counted as "other"). Each entry keeps its count, the ranks it appeared on
 * (a 64-bit set of rank mod 64, and the first rank), its first line, and
 * per launch (the launch its rank was in when the line came: run.c's
 * cursor) its count and first line, grown to the last launch it appeared in.
 * The miner sees only what no format read, so its cost is zero on a log
 * every line of which is understood.
 *
 * A template is unusual when it is rare (at most TW_UNUSUAL_RARE lines) and
 * either says trouble (error, fatal, fail, timeout, killed, refused,
 * abort, denied, exception, out of range, segmentation), or appeared on
 * one rank of a run of several, or appeared only after its rank's last
 * training step, in each launch it appeared in, of a run with a problem (a healthy run's closing lines,
 * "training completed", a final summary, are not news).
 */
#include "templates.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

#define TEMPLATE_TEXT_MAX 200
#define TW_UNUSUAL_RARE   5

typedef struct tw_template_launch {
    uint64_t count, first_line; /* count 0: not in this launch */
    uint32_t file;
    int rank;
} tw_template_launch;

typedef struct tw_template {
    char *text;                   /* owned; NULL: empty slot */
    tw_template_launch *launches; /* owned; [0, launch_count) */
    int launch_count;
    uint64_t hash, count;
    uint64_t ranks_seen; /* rank mod 64 */
    int first_rank;
    uint32_t file;
    uint64_t first_line;
    char example[TW_MESSAGE_MAX];
} tw_template;

struct tw_templates {
    tw_template *slots; /* TW_TEMPLATES_MAX * 2, open addressing */
    size_t count;
    uint64_t lines, other;
};

static const char *const trouble_words[] = {"error",        "fatal",        "fail",  "timeout", "timed out",
                                            "killed",       "refused",      "abort", "denied",  "exception",
                                            "out of range", "segmentation", NULL};

void tw_templates_free(tw_templates *t)
{
    if (!t)
        return;
    for (size_t i = 0; t->slots && i < 2 * TW_TEMPLATES_MAX; i++) {
        free(t->slots[i].text);
        free(t->slots[i].launches);
    }
    free(t->slots);
    free(t);
}

/* Masks text into out (NUL-terminated, at most TEMPLATE_TEXT_MAX). */
static void mask(const char *text, char *out)
{
    size_t o = 0;
    const char *p = text;
    while (*p && o + 8 < TEMPLATE_TEXT_MAX) {
        if (*p == ' ' || *p == '\t') {
            if (o && out[o - 1] != ' ')
                out[o++] = ' ';
            p++;
            continue;
        }
        if (*p == '"' || *p == '\'') { /* a quoted string, to its closing quote */
            const char *close = strchr(p + 1, *p);
            if (close) {
                memcpy(out + o, "<STR>", 5);
                o += 5;
                p = close + 1;
                continue;
            }
        }
        const char *q = p;
        bool digit = false, slash = false;
        while (*q && *q != ' ' && *q != '\t') {
            digit |= isdigit((unsigned char)*q) != 0;
            slash |= *q == '/';
            q++;
        }
        size_t n = (size_t)(q - p);
        if (slash) {
            memcpy(out + o, "<PATH>", 6);
            o += 6;
        } else if (digit) {
            memcpy(out + o, "<*>", 3);
            o += 3;
        } else {
            if (o + n >= TEMPLATE_TEXT_MAX - 1)
                n = TEMPLATE_TEXT_MAX - 1 - o;
            memcpy(out + o, p, n);
            o += n;
        }
        p = q;
    }
    while (o && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
}

static uint64_t hash_text(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Counts a line of e in launch (0-based), growing its launches. */
static int count_in_launch(tw_template *e, int launch, const tw_record *r, uint32_t file)
{
    if (launch < 0)
        launch = 0;
    if (launch >= e->launch_count) {
        tw_template_launch *grown = realloc(e->launches, sizeof *grown * (size_t)(launch + 1));
        if (!grown)
            return TW_ENOMEM;
        memset(grown + e->launch_count, 0, sizeof *grown * (size_t)(launch + 1 - e->launch_count));
        e->launches = grown;
        e->launch_count = launch + 1;
    }
    tw_template_launch *l = &e->launches[launch];
    if (l->count++ == 0) {
        l->first_line = r->source.line;
        l->file = file;
        l->rank = r->rank < 0 ? 0 : r->rank;
    }
    return TW_OK;
}

int tw_templates_add(tw_templates **tp, const tw_record *r, uint32_t file, int launch)
{
    tw_templates *t = *tp;
    if (!t) {
        if (!(t = calloc(1, sizeof *t)) || !(t->slots = calloc(2 * TW_TEMPLATES_MAX, sizeof *t->slots))) {
            free(t);
            return TW_ENOMEM;
        }
        *tp = t;
    }
    t->lines++;
    char text[TEMPLATE_TEXT_MAX];
    mask(r->message, text);
    if (!text[0])
        return TW_OK;
    uint64_t h = hash_text(text);
    size_t i = h % (2 * TW_TEMPLATES_MAX);
    while (t->slots[i].text && (t->slots[i].hash != h || strcmp(t->slots[i].text, text) != 0))
        i = (i + 1) % (2 * TW_TEMPLATES_MAX);
    tw_template *e = &t->slots[i];
    if (!e->text) {
        if (t->count == TW_TEMPLATES_MAX) {
            t->other++;
            return TW_OK;
        }
        if (!(e->text = strdup(text)))
            return TW_ENOMEM;
        t->count++;
        e->hash = h;
        e->first_rank = r->rank < 0 ? 0 : r->rank;
        e->file = file;
        e->first_line = r->source.line;
        snprintf(e->example, sizeof e->example, "%s", r->message);
    }
    e->count++;
    e->ranks_seen |= 1ull << ((r->rank < 0 ? 0 : r->rank) % 64);
    return count_in_launch(e, launch, r, file);
}

static bool says_trouble(const char *text)
{
    char lower[TEMPLATE_TEXT_MAX];
    size_t i = 0;
    for (; text[i] && i + 1 < sizeof lower; i++)
        lower[i] = (char)tolower((unsigned char)text[i]);
    lower[i] = '\0';
    for (const char *const *w = trouble_words; *w; w++) {
        if (strstr(lower, *w))
            return true;
    }
    return false;
}

/* Entries in first-line order within a file, files in order. */
static int by_place(const void *a, const void *b)
{
    const tw_template *x = *(tw_template *const *)a, *y = *(tw_template *const *)b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->first_line < y->first_line ? -1 : x->first_line > y->first_line;
}

static tw_template **sorted(const tw_templates *t)
{
    tw_template **list = malloc(sizeof *list * (t->count ? t->count : 1));
    if (!list)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < 2 * TW_TEMPLATES_MAX; i++) {
        if (t->slots[i].text)
            list[n++] = &t->slots[i];
    }
    qsort(list, n, sizeof *list, by_place);
    return list;
}

static bool has_word(const char *text)
{
    for (const char *p = text; *p; p++) {
        if (isalpha((unsigned char)p[0]) && isalpha((unsigned char)p[1]))
            return true;
    }
    return false;
}

/* The template appeared only after the last step its rank made, judged in
 * each launch it appeared in (what a process printed as it went down): in
 * every launch with a line of it, its first line there follows the last
 * step its rank made in that launch. A launch in which the rank made no
 * step has no "after" (a start-up line of a launch that never trained, or a
 * config dump printed again by each attempt, is no news). */
static bool after_last_step(const tw_run *run, const tw_template *e)
{
    bool after = false;
    for (int i = 0; i < e->launch_count; i++) {
        const tw_template_launch *l = &e->launches[i];
        if (!l->count)
            continue;
        const tw_rank *rk = i < tw_run_launches(run) ? tw_run_rank(tw_run_launch(run, i), l->rank) : NULL;
        if (!rk || rk->steps == 0 || rk->last.file != l->file || rk->last.line > l->first_line)
            return false;
        after = true;
    }
    return after;
}

/* The launch (1-based) of the template's first line: the first it appeared in. */
static int first_launch(const tw_template *e)
{
    for (int i = 0; i < e->launch_count; i++) {
        if (e->launches[i].count)
            return i + 1;
    }
    return 1;
}

int tw_templates_unusual(const tw_run *run, bool healthy, tw_unusual_line **out, int *count)
{
    *out = NULL;
    *count = 0;
    const tw_templates *t = run->templates;
    if (!t || t->count == 0)
        return TW_OK;
    tw_template **list = sorted(t);
    tw_unusual_line *items = calloc(TW_UNUSUAL_MAX, sizeof *items);
    if (!list || !items) {
        free(list);
        free(items);
        return TW_ENOMEM;
    }
    int ranks = 0;
    for (int i = 0; i < run->rank_count; i++)
        ranks += run->ranks[i]->used;
    int n = 0;
    for (size_t i = 0; i < t->count && n < TW_UNUSUAL_MAX; i++) {
        const tw_template *e = list[i];
        if (e->count > TW_UNUSUAL_RARE || !has_word(e->text))
            continue; /* frequent, or decoration ("-----") */
        unsigned why = 0;
        why |= says_trouble(e->text) ? TW_UNUSUAL_TROUBLE : 0;
        why |= ranks > 1 && __builtin_popcountll(e->ranks_seen) == 1 ? TW_UNUSUAL_ONE_RANK : 0;
        why |= !healthy && after_last_step(run, e) ? TW_UNUSUAL_AFTER_LAST_STEP : 0;
        if (!why)
            continue;
        tw_unusual_line *u = &items[n++];
        snprintf(u->template_text, sizeof u->template_text, "%s", e->text);
        snprintf(u->example, sizeof u->example, "%s", e->example);
        u->why = why;
        u->count = e->count;
        u->rank = e->first_rank;
        u->ranks = __builtin_popcountll(e->ranks_seen);
        u->where = (tw_source){.file = run->files[e->file], .line = e->first_line};
        u->launch = first_launch(e);
        u->launch_count = e->launch_count < TW_UNUSUAL_LAUNCHES ? e->launch_count : TW_UNUSUAL_LAUNCHES;
        for (int l = 0; l < u->launch_count; l++)
            u->launch_lines[l] = e->launches[l].count;
    }
    free(list);
    *out = items;
    *count = n;
    return TW_OK;
}

/* "1:3,3:5": the lines of each launch it appeared in (1-based). */
static const char *by_launch(const tw_template *e, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < e->launch_count && n + 24 < cap; i++) {
        if (e->launches[i].count)
            n += (size_t)snprintf(buf + n, cap - n, "%s%d:%llu", n ? "," : "", i + 1,
                                  (unsigned long long)e->launches[i].count);
    }
    return buf;
}

void tw_templates_write(FILE *out, const tw_run *run)
{
    const tw_templates *t = run->templates;
    if (!t || t->count == 0) {
        fputs("\nTemplates  no line went unread by the formats\n", out);
        return;
    }
    fprintf(out, "\nTemplates  %zu of the %llu lines no format read%s\n", t->count, (unsigned long long)t->lines,
            t->other ? " (more templates counted as other)" : "");
    tw_template **list = sorted(t);
    if (!list)
        return;
    fprintf(out, "  %8s  %5s  %-12s  %-40s  %s\n", "lines", "ranks", "by launch", "first", "template");
    for (size_t i = 0; i < t->count; i++) {
        const tw_template *e = list[i];
        char where[256], launches[256];
        snprintf(where, sizeof where, "%s:%llu", run->files[e->file], (unsigned long long)e->first_line);
        fprintf(out, "  %8llu  %5d  %-12s  %-40s  %s\n", (unsigned long long)e->count,
                __builtin_popcountll(e->ranks_seen), by_launch(e, launches, sizeof launches), where, e->text);
    }
    if (t->other)
        fprintf(out, "  %8llu  %5s  %-12s  %-40s  %s\n", (unsigned long long)t->other, "", "", "", "(other templates)");
    free(list);
}

void tw_run_write_templates(FILE *out, const tw_run *run)
{
    tw_templates_write(out, run);
}

const char *tw_unusual_why(unsigned why, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s%s%s", why & TW_UNUSUAL_TROUBLE ? "says trouble" : "",
             (why & TW_UNUSUAL_TROUBLE) && (why & ~TW_UNUSUAL_TROUBLE) ? ", " : "",
             why & TW_UNUSUAL_ONE_RANK ? "one rank only" : "",
             (why & TW_UNUSUAL_ONE_RANK) && (why & TW_UNUSUAL_AFTER_LAST_STEP) ? ", " : "",
             why & TW_UNUSUAL_AFTER_LAST_STEP ? "after the last step" : "");
    return buf;
}
