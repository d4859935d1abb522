/*
 * metrics_demo.c: a small exporter built on libtrainwatch, used by the tests
 * (a real Prometheus scrapes it, a real Pushgateway receives its pushes) and
 * as an example of the library's API.
 *
 *   metrics-demo [--web.listen-address ADDR] [--web.config.file FILE] [--text-only]
 *                [--duration S] [--set a|b] [--series N] [--log-requests]
 *   metrics-demo --push URL [--push-method put|post|delete] [--job NAME]
 *                [--group NAME=VALUE]... [--push-timeout S] [--retries N] [--set a|b]
 *
 * Set "a" holds one metric of every type with fixed values (so a test can
 * check what Prometheus stored) and a counter that ticks every 100 ms; set
 * "b" holds a single gauge, to tell PUT from POST at the Pushgateway.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trainwatch/error.h"
#include "trainwatch/http.h"
#include "trainwatch/metrics.h"
#include "trainwatch/push.h"

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

typedef struct options {
    tw_http_options http;
    double duration;
    char set;
    int series;
    const char *push_url;
    tw_push_method method;
    tw_push_options push;
} options;

static int register_set_a(tw_registry *r, tw_counter **ticks)
{
    int rc;
    const char *fixed_labels[] = {"kind"};
    tw_family *fixed;
    tw_family_options o = {.name = "demo_fixed", .help = "A fixed value with an awkward label.",
                           .type = TW_METRIC_GAUGE, .label_count = 1, .label_names = fixed_labels};
    if ((rc = tw_family_register(r, &o, &fixed)) != TW_OK)
        return rc;
    tw_gauge *g;
    const char *awkward[] = {"a \"quoted\" \\ value\nnext line"};
    if ((rc = tw_family_series(fixed, awkward, &g)) != TW_OK)
        return rc;
    tw_gauge_set(g, 42.5);
    const char *plain[] = {"plain"};
    if ((rc = tw_family_series(fixed, plain, &g)) != TW_OK)
        return rc;
    tw_gauge_set(g, -3);
    tw_gauge *loss;
    if ((rc = tw_gauge_new(r, "demo_loss", "Training loss (fixed).", &loss)) != TW_OK)
        return rc;
    tw_gauge_set(loss, 0.25);
    tw_histogram *h;
    double bounds[] = {0.1, 1, 2.5};
    if ((rc = tw_histogram_new(r, "demo_step_seconds", "Step time (fixed observations).", bounds, 3, &h)) != TW_OK)
        return rc;
    double seen[] = {0.05, 0.5, 0.5, 100};
    for (int i = 0; i < 4; i++)
        tw_histogram_observe(h, seen[i]);
    const char *info_names[] = {"version"};
    const char *info_values[] = {"1.0"};
    if ((rc = tw_info_new(r, "demo_build", "Build information.", 1, info_names, info_values)) != TW_OK)
        return rc;
    if ((rc = tw_counter_new(r, "demo_ticks_total", "Ticks of 100 ms since start.", ticks)) != TW_OK)
        return rc;
    return tw_process_collector_register(r);
}

static int register_series(tw_registry *r, int n)
{
    const char *labels[] = {"index"};
    tw_family *f;
    tw_family_options o = {.name = "demo_series", .help = "Many series, for benchmarks.", .type = TW_METRIC_GAUGE,
                           .label_count = 1, .label_names = labels, .series_limit = (size_t)n + 1};
    int rc = tw_family_register(r, &o, &f);
    for (int i = 0; i < n && rc == TW_OK; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        const char *values[] = {v};
        tw_gauge *g;
        rc = tw_family_series(f, values, &g);
        if (rc == TW_OK)
            tw_gauge_set(g, i * 0.5);
    }
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: metrics-demo [--web.listen-address ADDR] [--web.config.file FILE] [--text-only]\n"
                 "                    [--duration S] [--set a|b] [--series N]\n"
                 "       metrics-demo --push URL [--push-method put|post|delete] [--job NAME]\n"
                 "                    [--group NAME=VALUE]... [--push-timeout S] [--retries N] [--set a|b]\n");
}

static int parse(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"web.listen-address", 1, 0, 'l'}, {"web.config.file", 1, 0, 'c'}, {"text-only", 0, 0, 't'},
        {"duration", 1, 0, 'd'},           {"set", 1, 0, 's'},             {"series", 1, 0, 'n'},
        {"push", 1, 0, 'p'},               {"push-method", 1, 0, 'm'},     {"job", 1, 0, 'j'},
        {"group", 1, 0, 'g'},              {"push-timeout", 1, 0, 'T'},    {"retries", 1, 0, 'r'},
        {"help", 0, 0, 'h'},               {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': o->http.listen_address = optarg; break;
        case 'c': o->http.web_config_file = optarg; break;
        case 't': o->http.text_only = true; break;
        case 'd': o->duration = atof(optarg); break;
        case 's': o->set = optarg[0]; break;
        case 'n': o->series = atoi(optarg); break;
        case 'p': o->push_url = optarg; break;
        case 'j': o->push.job = optarg; break;
        case 'T': o->push.timeout_seconds = atof(optarg); break;
        case 'r': o->push.retries = atoi(optarg) == 0 ? -1 : atoi(optarg); break;
        case 'm':
            if (strcmp(optarg, "put") == 0)
                o->method = TW_PUSH_REPLACE;
            else if (strcmp(optarg, "post") == 0)
                o->method = TW_PUSH_ADD;
            else if (strcmp(optarg, "delete") == 0)
                o->method = TW_PUSH_DELETE;
            else
                return -1;
            break;
        case 'g': {
            char *eq = strchr(optarg, '=');
            if (!eq || o->push.grouping_count >= TW_PUSH_GROUPING_MAX)
                return -1;
            *eq = '\0';
            o->push.grouping_names[o->push.grouping_count] = optarg;
            o->push.grouping_values[o->push.grouping_count++] = eq + 1;
            break;
        }
        case 'h': usage(stdout); exit(0);
        default: return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
    options o = {.set = 'a', .push.job = "metrics-demo"};
    if (parse(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    tw_registry *r;
    if (tw_registry_new(&r) != TW_OK)
        return 1;
    tw_counter *ticks = NULL;
    int rc = o.set == 'b' ? TW_OK : register_set_a(r, &ticks);
    if (rc == TW_OK && o.set == 'b') {
        tw_gauge *g;
        rc = tw_gauge_new(r, "demo_other", "The only metric of set b.", &g);
        if (rc == TW_OK)
            tw_gauge_set(g, 7);
    }
    if (rc == TW_OK && o.series > 0)
        rc = register_series(r, o.series);
    if (rc != TW_OK) {
        fprintf(stderr, "metrics-demo: %s\n", tw_strerror(rc));
        return 1;
    }
    char err[512];
    if (o.push_url) {
        o.push.url = o.push_url;
        rc = tw_push(&o.push, r, o.method, err, sizeof err);
        if (rc != TW_OK)
            fprintf(stderr, "metrics-demo: push failed: %s\n", err);
        tw_registry_free(r);
        return rc == TW_OK ? 0 : 1;
    }
    o.http.registry = r;
    tw_http_server *server;
    rc = tw_http_start(&o.http, &server, err, sizeof err);
    if (rc != TW_OK) {
        fprintf(stderr, "metrics-demo: %s\n", err);
        tw_registry_free(r);
        return 2;
    }
    printf("listening on port %u\n", tw_http_port(server));
    fflush(stdout);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    struct timespec tick = {0, 100 * 1000 * 1000};
    for (long i = 0; !stop && (o.duration <= 0 || i < (long)(o.duration * 10)); i++) {
        nanosleep(&tick, NULL);
        if (ticks)
            tw_counter_inc(ticks);
    }
    tw_http_stop(server);
    tw_registry_free(r);
    return 0;
}
