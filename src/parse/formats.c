/*
 * formats.c: the table of log formats, in detection order (the helpers the
 * "key: value" formats share are in emit.c). Adding a format is one new
 * file plus one row here. Order matters only for detection: specific formats come before
 * the generic ones (pylogging, kv) that would also accept their lines.
 */
#include "formats.h"

#include <string.h>

static const tw_format *const table[] = {
    &tw_format_trainwatch, &tw_format_events, &tw_format_twlog,    &tw_format_hf_state, &tw_format_detr, &tw_format_json,
    &tw_format_hapi,       &tw_format_ppdet,     &tw_format_ppcls,    &tw_format_paddlevideo,
    &tw_format_paddleseg,  &tw_format_ppocr,     &tw_format_paddlenlp, &tw_format_megatron,
    &tw_format_deepspeed,  &tw_format_mmdet,     &tw_format_detectron2, &tw_format_tqdm,
    &tw_format_yolo,       &tw_format_insightface, &tw_format_olmo,      &tw_format_static_print, &tw_format_glog,  &tw_format_pylogging,
    &tw_format_kv,         &tw_format_counter,
};

_Static_assert(sizeof table / sizeof table[0] <= 64, "the dispatcher keeps format sets in 64-bit masks");

const tw_format *const *tw_formats(size_t *count)
{
    *count = sizeof table / sizeof table[0];
    return table;
}

const tw_format *tw_format_find(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    }
    return NULL;
}

const char *tw_format_name(const tw_format *f) { return f->name; }
const char *tw_format_summary(const tw_format *f) { return f->summary; }
