/*
 * summary.c: the tables paddle.profiler prints (prof.summary(), and the
 * timer_only "Perf Summary"), read back so that a user who kept only the
 * printed text still gets a verdict. What is read: each Perf Summary's
 * "Reader Ratio: 53.514%" and its ips row, and from the Model or Overview
 * Summary the CPU totals of ProfileStep and Dataloader. Lines are matched
 * by their first words, so prose around the tables (as in the docs the
 * corpus excerpts come from) is ignored.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool tw_trace_summary_detect(const char *head, size_t len)
{
    size_t i = 0;
    while (i < len && isspace((unsigned char)head[i]))
        i++;
    if (i < len && (head[i] == '{' || head[i] == '[' || head[i] == 0x1f))
        return false;
    return memmem(head, len, "Summary", 7) || memmem(head, len, "Reader Ratio", 12);
}

/* "  Dataloader     11      141.49 / 12.86 ..." -> 141.49 (name, calls, total). */
static bool row_total(const char *line, const char *name, double *out)
{
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strlen(name);
    if (strncmp(line, name, n) != 0 || (line[n] != ' ' && line[n] != '\t'))
        return false;
    char *end;
    const char *p = line + n;
    strtol(p, &end, 10); /* calls */
    if (end == p)
        return false;
    double v = strtod(end, &end);
    if (end == p)
        return false;
    *out = v;
    return true;
}

bool tw_trace_summary_read(tw_trace_rank *r, const char *text, size_t len)
{
    char line[1024];
    size_t pos = 0;
    bool found = false, in_perf = false;
    double step = NAN, data = NAN;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        size_t k = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, text + pos, k);
        line[k] = '\0';
        pos += n + (nl != NULL);
        if (strstr(line, "Perf Summary")) {
            in_perf = true;
            continue;
        }
        const char *rr = strstr(line, "Reader Ratio:");
        if (rr) {
            double v = strtod(rr + 13, NULL) / 100;
            if (r->summary_blocks < 8)
                r->block_ratios[r->summary_blocks++] = v;
            if (isnan(r->reader_ratio))
                r->reader_ratio = v;
            found = true;
            continue;
        }
        const char *ips = strstr(line, "|       ips");
        if (!ips)
            ips = in_perf ? strstr(line, " ips ") : NULL;
        if (ips && in_perf) {
            const char *bar = strchr(ips + 1, '|');
            if (bar && isnan(r->ips))
                r->ips = strtod(bar + 1, NULL);
            in_perf = false;
            continue;
        }
        double v;
        if (isnan(step) && row_total(line, "ProfileStep", &v))
            step = v, found = true;
        else if (isnan(data) && row_total(line, "Dataloader", &v))
            data = v;
    }
    if (step > 0 && data == data)
        r->dataloader_ratio = data / step;
    return found;
}
