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
 * (a 64-bit set of rank mod 64, and the first rank), and its first line.
 * The miner sees only what no format read, so its cost is zero on a log
 * every line of which is understood.
 *
 * A template is unusual when it is rare (at most TW_UNUSUAL_RARE lines) and
 * either says trouble (error, fatal, fail, timeout, killed, refused,
 * abort, denied, exception, out of range, segmentation), or appeared on
 * one rank of a run of several, or first appeared after its rank's last
 * training step of a run with a problem (a healthy run's closing lines,
 * "training completed", a final summary, are not news).
 */
#include "templates.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

#define TEMPLATE_TEXT_MAX 200
#define TW_UNUSUAL_RARE   5

typedef struct tw_template {
    char *text; /* owned; NULL: empty slot */
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
    for (size_t i = 0; t->slots && i < 2 * TW_TEMPLATES_MAX; i++)
        free(t->slots[i].text);
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

int tw_templates_add(tw_templates **tp, const tw_record *r, uint32_t file)
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
    return TW_OK;
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

/* The template first appeared after the last step its rank made in the
 * launch the line belongs to (the last launch starting at or before it in
 * that file): what a process printed as it went down. */
static bool after_last_step(const tw_run *run, const tw_template *e)
{
    const tw_run *owner = run;
    for (int i = 1; i < tw_run_launches(run); i++) {
        const tw_launch_info *l = &tw_run_launch(run, i)->launch;
        if (l->have_start && l->file == e->file && l->line <= e->first_line)
            owner = tw_run_launch(run, i);
    }
    const tw_rank *rk = tw_run_rank(owner, e->first_rank);
    return rk && rk->steps > 0 && rk->last.file == e->file && rk->last.line < e->first_line;
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
        u->where = (tw_source){.file = run->files[e->file], .line = e->first_line};
    }
    free(list);
    *out = items;
    *count = n;
    return TW_OK;
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
    fprintf(out, "  %8s  %5s  %-40s  %s\n", "lines", "ranks", "first", "template");
    for (size_t i = 0; i < t->count; i++) {
        const tw_template *e = list[i];
        char where[256];
        snprintf(where, sizeof where, "%s:%llu", run->files[e->file], (unsigned long long)e->first_line);
        fprintf(out, "  %8llu  %5d  %-40s  %s\n", (unsigned long long)e->count, __builtin_popcountll(e->ranks_seen),
                where, e->text);
    }
    if (t->other)
        fprintf(out, "  %8llu  %5s  %-40s  %s\n", (unsigned long long)t->other, "", "", "(other templates)");
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
