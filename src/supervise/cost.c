/*
 * cost.c: GPU time and money of a run (see cost.h). The price of a GPU is
 * the first row of the price table whose pattern its NVML name contains
 * (case-insensitively), else --gpu-hour-cost; a GPU with no price counts
 * in GPU-seconds, not in money.
 */
#include "cost.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cut.h"
#include "trainwatch/error.h"

#define PRICES_MAX 64

typedef struct price_row {
    char pattern[96];
    double price;
} price_row;

struct tw_cost {
    tw_cost_options o;
    price_row prices[PRICES_MAX];
    int price_count;
    bool priced; /* some GPU can have a price */
    tw_counter *gpu_seconds, *idle_seconds, *money, *idle_money;
    tw_gauge *gpus_used, *per_hour, *budget;
    /* the sample being summed, and the totals for the summary line */
    double used_now, per_hour_now, used_most;
    double gpu_total, idle_total, money_total, idle_money_total;
    unsigned unpriced_samples;
};

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

/* "PATTERN PRICE" per line (the pattern may hold spaces: the price is the
 * last word); # starts a comment. */
static int read_prices(tw_cost *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "--gpu-prices %s: %s", path, strerror(errno));
        return TW_EINVAL;
    }
    char line[256];
    int number = 0, rc = TW_OK;
    while (rc == TW_OK && fgets(line, sizeof line, f)) {
        number++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        size_t len = strlen(line);
        while (len && isspace((unsigned char)line[len - 1]))
            line[--len] = '\0';
        char *start = line;
        while (isspace((unsigned char)*start))
            start++;
        if (!*start)
            continue;
        char *space = strrchr(start, ' ');
        char *tab = strrchr(start, '\t');
        char *sep = !space ? tab : !tab ? space : space > tab ? space : tab;
        char *end = NULL;
        double price = sep ? strtod(sep + 1, &end) : NAN;
        if (!sep || !end || *end || !(price >= 0) || end == sep + 1) {
            snprintf(err, errlen, "--gpu-prices %s:%d: not 'GPU-MODEL PRICE' (e.g. 'H100 2.49')", path, number);
            rc = TW_EINVAL;
            break;
        }
        if (c->price_count == PRICES_MAX) {
            snprintf(err, errlen, "--gpu-prices %s:%d: more than %d models", path, number, PRICES_MAX);
            rc = TW_EINVAL;
            break;
        }
        *sep = '\0';
        while (sep > start && isspace((unsigned char)sep[-1]))
            *--sep = '\0';
        price_row *row = &c->prices[c->price_count++];
        tw_copy_str(row->pattern, sizeof row->pattern, start); /* a longer model name is cut */
        row->price = price;
    }
    fclose(f);
    return rc;
}

int tw_cost_check_prices(const char *path, char *err, size_t errlen)
{
    tw_cost *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    int rc = read_prices(c, path, err, errlen);
    free(c);
    return rc;
}

static double price_of(const tw_cost *c, const char *model)
{
    for (int i = 0; i < c->price_count; i++) {
        if (contains_nocase(model ? model : "", c->prices[i].pattern))
            return c->prices[i].price;
    }
    return c->o.gpu_hour_cost > 0 ? c->o.gpu_hour_cost : NAN;
}

static int series(tw_registry *r, const char *name, const char *help, tw_metric_type type, const char *run,
                  const char *rank, tw_cell **out)
{
    const char *labels[] = {"run", "rank"}, *values[] = {run, rank};
    tw_family *f;
    tw_family_options o = {.name = name, .help = help, .type = type, .label_count = 2, .label_names = labels};
    int rc = tw_family_register(r, &o, &f);
    return rc == TW_OK ? tw_family_series(f, values, out) : rc;
}

int tw_cost_new(tw_registry *r, const char *run, int rank, const tw_cost_options *o, tw_cost **out, char *err,
                size_t errlen)
{
    *out = NULL;
    tw_cost *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    c->o = *o;
    if (!(c->o.idle_below > 0))
        c->o.idle_below = TW_COST_IDLE_BELOW;
    int rc = o->price_file ? read_prices(c, o->price_file, err, errlen) : TW_OK;
    c->priced = c->price_count > 0 || o->gpu_hour_cost > 0;
    char rank_text[16];
    snprintf(rank_text, sizeof rank_text, "%d", rank);
#define SERIES(name, help, type, cell)                                                                             \
    if (rc == TW_OK)                                                                                               \
    rc = series(r, name, help, type, run, rank_text, cell)
    SERIES("trainwatch_gpu_seconds_total", "GPU time of the GPUs the command's processes hold memory on.",
           TW_METRIC_COUNTER, &c->gpu_seconds);
    SERIES("trainwatch_gpu_idle_seconds_total", "Of that GPU time, the time a GPU was under the idle utilisation.",
           TW_METRIC_COUNTER, &c->idle_seconds);
    SERIES("trainwatch_gpus_used", "GPUs the command's processes hold memory on, at the last sample.",
           TW_METRIC_GAUGE, &c->gpus_used);
    if (c->priced) {
        SERIES("trainwatch_cost_total", "Money the run's GPU time has cost (--gpu-hour-cost, --gpu-prices).",
               TW_METRIC_COUNTER, &c->money);
        SERIES("trainwatch_cost_idle_total", "Of that money, what idle GPU time cost.", TW_METRIC_COUNTER,
               &c->idle_money);
        SERIES("trainwatch_cost_per_hour", "What the GPUs in use now cost per hour.", TW_METRIC_GAUGE, &c->per_hour);
    }
    if (o->budget > 0) {
        SERIES("trainwatch_budget", "The run's budget (--budget), in the money of the prices.", TW_METRIC_GAUGE,
               &c->budget);
        tw_gauge_set(c->budget, o->budget);
    }
#undef SERIES
    if (rc != TW_OK) {
        if (rc != TW_EINVAL)
            snprintf(err, errlen, "the cost metrics: %s", tw_strerror(rc));
        tw_cost_free(c);
        return rc;
    }
    *out = c;
    return TW_OK;
}

void tw_cost_free(tw_cost *c)
{
    free(c);
}

void tw_cost_gpu(tw_cost *c, const char *model, bool used, double util, double dt)
{
    if (!c || !used)
        return;
    c->used_now++;
    bool idle = isfinite(util) && util < c->o.idle_below;
    double price = price_of(c, model);
    if (isfinite(price))
        c->per_hour_now += price;
    if (!(dt > 0))
        return;
    c->gpu_total += dt;
    tw_counter_add(c->gpu_seconds, dt);
    if (idle) {
        c->idle_total += dt;
        tw_counter_add(c->idle_seconds, dt);
    }
    if (isfinite(price)) {
        double money = price * dt / 3600;
        c->money_total += money;
        tw_counter_add(c->money, money);
        if (idle) {
            c->idle_money_total += money;
            tw_counter_add(c->idle_money, money);
        }
    } else if (c->priced) {
        c->unpriced_samples++;
    }
}

void tw_cost_sample_done(tw_cost *c)
{
    if (!c)
        return;
    tw_gauge_set(c->gpus_used, c->used_now);
    if (c->used_now > c->used_most)
        c->used_most = c->used_now;
    if (c->per_hour)
        tw_gauge_set(c->per_hour, c->per_hour_now);
    c->used_now = 0;
    c->per_hour_now = 0;
}

/* "1.25 GPU-hours", "41 GPU-seconds" below a hundredth of an hour. */
static const char *gpu_time(double seconds, char *buf, size_t cap)
{
    if (seconds >= 36)
        snprintf(buf, cap, "%.2f GPU-hours", seconds / 3600);
    else
        snprintf(buf, cap, "%.0f GPU-seconds", seconds);
    return buf;
}

/* Money with cents, or four significant digits below one. */
static const char *money(double v, char *buf, size_t cap)
{
    snprintf(buf, cap, v >= 1 || v == 0 ? "%.2f" : "%.4g", v);
    return buf;
}

void tw_cost_totals(const tw_cost *c, tw_gpu_cost *out)
{
    *out = (tw_gpu_cost){.gpus = 0};
    if (!c)
        return;
    out->gpus = (int)c->used_most;
    out->gpu_seconds = c->gpu_total;
    out->idle_seconds = c->idle_total;
    out->idle_below = c->o.idle_below;
    out->priced = c->priced;
    out->unpriced_left_out = c->unpriced_samples > 0;
    out->cost = c->money_total;
    out->idle_cost = c->idle_money_total;
    out->budget = c->o.budget > 0 ? c->o.budget : 0;
    if (c->o.price_file)
        tw_copy_str(out->price_source, sizeof out->price_source, c->o.price_file);
    else if (c->o.gpu_hour_cost > 0)
        snprintf(out->price_source, sizeof out->price_source, "%g per GPU-hour", c->o.gpu_hour_cost);
}

const char *tw_gpu_cost_text(const tw_gpu_cost *g, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!(g->gpu_seconds > 0))
        return buf;
    char used[32], idle[32], m1[32], m2[32];
    size_t n = (size_t)snprintf(buf, cap, "%s, %s of it idle (%.0f%%, under %.0f%% utilisation)",
                                gpu_time(g->gpu_seconds, used, sizeof used), gpu_time(g->idle_seconds, idle, sizeof idle),
                                100 * g->idle_seconds / g->gpu_seconds, g->idle_below);
    if (g->priced && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "; cost %s, %s of it idle%s", money(g->cost, m1, sizeof m1),
                              money(g->idle_cost, m2, sizeof m2),
                              g->unpriced_left_out ? " (GPUs with no price left out)" : "");
    if (g->priced && g->projected_cost > 0 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "; %s by the end at this rate", money(g->projected_cost, m1, sizeof m1));
    if (g->budget > 0 && n < cap)
        snprintf(buf + n, cap - n, "; budget %s (%.0f%% used)", money(g->budget, m1, sizeof m1),
                 100 * g->cost / g->budget);
    return buf;
}

void tw_gpu_cost_write(const tw_gpu_cost *g, FILE *out)
{
    char text[512];
    if (*tw_gpu_cost_text(g, text, sizeof text))
        fprintf(out, "GPU time: %s\n", text);
}

void tw_cost_write(const tw_cost *c, FILE *out)
{
    tw_gpu_cost g;
    tw_cost_totals(c, &g);
    tw_gpu_cost_write(&g, out);
}
