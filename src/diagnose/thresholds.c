/*
 * thresholds.c: the rules' thresholds at their defaults, from the one table
 * (TW_THRESHOLD_LIST in trainwatch/analyze.h) that `analyze`'s options and
 * help are made from too. The run (run.c) and the rules (diagnose.c) both
 * read them; neither owns them.
 */
#include "trainwatch/analyze.h"

void tw_thresholds_default(tw_thresholds *t)
{
    *t = (tw_thresholds){
#define TW_THRESHOLD_DEFAULT(field, name, def, scale, arg, help) .field = def,
        TW_THRESHOLD_LIST(TW_THRESHOLD_DEFAULT)
#undef TW_THRESHOLD_DEFAULT
    };
}
