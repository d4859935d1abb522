/*
 * fuzz_rulefile.c: libFuzzer target for the rule-file loader (YAML, the
 * rulefmt checks, expressions and templates). A file that loads is exported
 * and evaluated twice over an empty registry, so templates render too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"
#include "trainwatch/metrics.h"
#include "trainwatch/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ignore(void *arg, const char *text, bool unsupported)
{
    (void)arg, (void)text, (void)unsupported;
}

static void count_duplicate(void *arg, const char *name, const char *const *label_names,
                            const char *const *label_values, size_t label_count)
{
    (void)arg;
    /* touch every string handed out */
    size_t n = strlen(name);
    for (size_t i = 0; i < label_count; i++)
        n += strlen(label_names[i]) + strlen(label_values[i]);
    if (n == (size_t)-1)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tw_ruleset *rs;
    if (tw_ruleset_new(&rs) != TW_OK)
        return 0;
    if (tw_ruleset_load_text(rs, "fuzz.yml", (const char *)data, size, ignore, NULL) != TW_OK) {
        tw_ruleset_free(rs);
        return 0;
    }
    FILE *sink = fopen("/dev/null", "w");
    if (sink) {
        tw_ruleset_export(rs, sink);
        fclose(sink);
    }
    size_t duplicates;
    tw_ruleset_duplicates(rs, count_duplicate, NULL, &duplicates);
    tw_registry *reg;
    if (tw_registry_new(&reg) != TW_OK) {
        tw_ruleset_free(rs);
        return 0;
    }
    tw_gauge *g;
    if (tw_gauge_new(reg, "x", "x", &g) == TW_OK)
        tw_gauge_set(g, 2);
    tw_alerting_options o = {.registry = reg, .default_interval = 1};
    tw_alerting *a;
    if (tw_alerting_new(rs, &o, &a) == TW_OK) {
        tw_alerting_tick(a, 1000);
        tw_alerting_evaluate_all(a, 1001);
        tw_alerting_free(a);
    }
    tw_registry_free(reg);
    return 0;
}
