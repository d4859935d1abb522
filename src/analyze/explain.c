/*
 * explain.c: `analyze --explain`: what the parsers picked up from one input,
 * on stderr after it is read: the format that read it (and whether that is a
 * fallback: kv, counter, or a --pattern), how many records of each kind,
 * which record fields and which named metrics came out, and the first line
 * read as a step, quoted. It watches the records on their way to the run,
 * so it costs nothing when not asked for.
 */
#include "explain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/analyze.h"

#define EXPLAIN_METRICS 24

struct tw_explain {
    uint64_t steps, evals, events;
    unsigned fields;
    bool epoch, step, global_step;
    uint64_t first_step_line;
    char metrics[EXPLAIN_METRICS][TW_NAME_MAX];
    int metric_count;
};

tw_explain *tw_explain_new(void)
{
    return calloc(1, sizeof(tw_explain));
}
void tw_explain_free(tw_explain *e)
{
    free(e);
}

static void note_metric(tw_explain *e, const char *name)
{
    for (int i = 0; i < e->metric_count; i++) {
        if (strcmp(e->metrics[i], name) == 0)
            return;
    }
    if (e->metric_count < EXPLAIN_METRICS)
        snprintf(e->metrics[e->metric_count++], TW_NAME_MAX, "%s", name);
}

void tw_explain_record(tw_explain *e, const tw_record *r)
{
    if (r->kind == TW_REC_EVENT) {
        e->events++;
        return;
    }
    if (r->kind == TW_REC_EVAL) {
        e->evals++;
        return;
    }
    e->steps++;
    if (!e->first_step_line)
        e->first_step_line = r->source.line;
    e->fields |= r->fields & ~(unsigned)TW_F_TIME;
    e->epoch |= r->epoch >= 0;
    e->step |= r->step >= 0;
    e->global_step |= r->global_step >= 0;
    for (int i = 0; i < r->metric_count; i++)
        note_metric(e, r->metrics[i].name);
}

/* The text of line `number` of a plain file, cut to fit; "" when unreadable. */
static void line_text(const char *path, uint64_t number, char *out, size_t cap)
{
    out[0] = '\0';
    size_t n = strlen(path);
    if (strcmp(path, "-") == 0 || strcmp(path, "<stdin>") == 0 || (n > 3 && strcmp(path + n - 3, ".gz") == 0))
        return;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got = 0;
    for (uint64_t i = 0; i < number && (got = getline(&line, &lcap, f)) > 0; i++) {
    }
    if (got > 0) {
        size_t len = (size_t)got;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        snprintf(out, cap, "%.*s%s", (int)(len < 160 ? len : 160), line, len > 160 ? "..." : "");
    }
    free(line);
    fclose(f);
}

static const char *kind_of(const char *format)
{
    if (!format)
        return "no format recognised a training line";
    if (strcmp(format, "kv") == 0)
        return "the fallback for key: value lines";
    if (strcmp(format, "counter") == 0)
        return "the fallback for 'counter word number' lines";
    if (strncmp(format, "pattern ", 8) == 0)
        return "--pattern";
    return NULL;
}

void tw_explain_write(FILE *out, const tw_explain *e, const char *path, const char *format)
{
    const char *kind = kind_of(format);
    fprintf(out, "explain: %s: read by %s%s%s%s: %llu step, %llu eval and %llu event records\n", path,
            format ? format : "nothing", kind ? " (" : "", kind ? kind : "", kind ? ")" : "",
            (unsigned long long)e->steps, (unsigned long long)e->evals, (unsigned long long)e->events);
    if (!e->steps)
        return;
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{TW_F_LOSS, "loss"},
                 {TW_F_LR, "lr"},
                 {TW_F_BATCH_TIME, "step_time"},
                 {TW_F_DATA_TIME, "data_time"},
                 {TW_F_SAMPLES_PER_SEC, "samples_per_sec"},
                 {TW_F_ETA, "eta"},
                 {TW_F_MEM, "memory"}};
    fprintf(out, "explain:   fields:");
    if (e->epoch)
        fprintf(out, " epoch");
    if (e->step)
        fprintf(out, " step");
    if (e->global_step)
        fprintf(out, " global_step");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (e->fields & names[i].bit)
            fprintf(out, " %s", names[i].name);
    }
    fprintf(out, "\nexplain:   metrics:");
    for (int i = 0; i < e->metric_count; i++)
        fprintf(out, " %s", e->metrics[i]);
    fprintf(out, "%s\n", e->metric_count ? "" : " (none)");
    char text[200];
    line_text(path, e->first_step_line, text, sizeof text);
    fprintf(out, "explain:   first step record: line %llu%s%s%s\n", (unsigned long long)e->first_step_line,
            text[0] ? ": \"" : "", text, text[0] ? "\"" : "");
}
