/*
 * thresholds.c: the rules' thresholds at their defaults, from the one table
 * (TW_THRESHOLD_LIST in trainwatch/analyze.h) that `analyze`'s options and
 * help are made from too, and the setting of one by its option's row. The
 * run (run.c) and the rules (diagnose.c) both read them; neither owns them.
 */
#include <stddef.h>

#include "trainwatch/analyze.h"

/* The options by row: the name, where the value goes, its scale. */
typedef struct threshold_option {
    const char *name;
    size_t offset;
    double scale; /* the value on the command line times scale */
} threshold_option;

// clang-format off
#define THRESHOLD_ROW(field, name, def, scale, arg, help) {name, offsetof(tw_thresholds, field), scale},
static const threshold_option options[] = {TW_THRESHOLD_LIST(THRESHOLD_ROW)};
#undef THRESHOLD_ROW
// clang-format on

void tw_thresholds_default(tw_thresholds *t)
{
    *t = (tw_thresholds){
#define TW_THRESHOLD_DEFAULT(field, name, def, scale, arg, help) .field = def,
        TW_THRESHOLD_LIST(TW_THRESHOLD_DEFAULT)
#undef TW_THRESHOLD_DEFAULT
    };
}

size_t tw_threshold_count(void)
{
    return sizeof options / sizeof options[0];
}

const char *tw_threshold_option(size_t i)
{
    return i < tw_threshold_count() ? options[i].name : NULL;
}

void tw_threshold_set(tw_thresholds *t, size_t i, double value)
{
    if (i < tw_threshold_count())
        *(double *)((char *)t + options[i].offset) = value * options[i].scale;
}
