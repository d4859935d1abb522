/*
 * record.c: small helpers over tw_record (see record.h). Kept free of any
 * parsing knowledge: parsers fill records, these only store and look up.
 */
#include "trainwatch/record.h"

#include <math.h>
#include <string.h>

void tw_record_init(tw_record *r)
{
    /* Only the header fields are reset; metric and text storage is cleared
     * lazily (count and first byte), which keeps a per-line reset cheap. */
    r->kind = TW_REC_STEP;
    r->event = TW_EV_NONE;
    r->source.file = NULL;
    r->source.line = 0;
    r->rank = -1;
    r->fields = 0;
    r->time = 0;
    r->epoch = r->epoch_total = r->step = r->step_total = r->global_step = -1;
    r->loss = r->lr = r->batch_time = r->data_time = 0;
    r->samples_per_sec = r->eta = r->mem_bytes = 0;
    r->metric_count = 0;
    r->exit_code = 0;
    r->message[0] = '\0';
    r->detail[0] = '\0';
}

static tw_metric *find_metric(tw_record *r, const char *name, size_t len)
{
    for (int i = 0; i < r->metric_count; i++) {
        if (strncmp(r->metrics[i].name, name, len) == 0 && r->metrics[i].name[len] == '\0')
            return &r->metrics[i];
    }
    return NULL;
}

bool tw_record_set_metric(tw_record *r, const char *name, size_t name_len, double value)
{
    if (name_len > TW_NAME_MAX - 1)
        name_len = TW_NAME_MAX - 1;
    tw_metric *m = find_metric(r, name, name_len);
    if (!m) {
        /* the last slots are kept for losses: a result with a hundred
         * per-class scores listed before its eval_loss keeps the loss */
        if (r->metric_count >= TW_METRICS_MAX ||
            (r->metric_count >= TW_METRICS_MAX - TW_METRICS_LOSS_SLOTS && !memmem(name, name_len, "loss", 4)))
            return false;
        m = &r->metrics[r->metric_count++];
        memcpy(m->name, name, name_len);
        m->name[name_len] = '\0';
    }
    m->value = value;
    return true;
}

double tw_record_metric(const tw_record *r, const char *name)
{
    for (int i = 0; i < r->metric_count; i++) {
        if (strcmp(r->metrics[i].name, name) == 0)
            return r->metrics[i].value;
    }
    return NAN;
}

void tw_record_set_text(char *dst, const char *text, size_t len)
{
    /* Strip trailing spaces/CR and replace control bytes so a message can be
     * printed on one line and embedded in JSON without surprises. */
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\r' || text[len - 1] == '\t'))
        len--;
    if (len > TW_MESSAGE_MAX - 1)
        len = TW_MESSAGE_MAX - 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    dst[len] = '\0';
}

bool tw_metric_is_result(const char *name)
{
    static const char *const not_results[] = {"cost", "ips", "runtime", "per_second", "fps", "samples", "num_tokens", "epoch", "step"};
    for (size_t i = 0; i < sizeof not_results / sizeof not_results[0]; i++) {
        if (strstr(name, not_results[i]))
            return false;
    }
    return true;
}

const char *tw_event_name(tw_event_kind kind)
{
    static const char *const names[] = {
#define TW_EVENT_NAME(name, text) text,
        TW_EVENT_LIST(TW_EVENT_NAME)
#undef TW_EVENT_NAME
    };
    if ((unsigned)kind >= TW_EV_COUNT)
        return "unknown";
    return names[kind];
}

const char *tw_record_kind_name(tw_record_kind kind)
{
    switch (kind) {
    case TW_REC_STEP:
        return "step";
    case TW_REC_EVAL:
        return "eval";
    case TW_REC_EVENT:
        return "event";
    case TW_REC_LINE:
        return "line";
    }
    return "unknown";
}

double tw_record_position(const tw_record *r)
{
    if (r->global_step >= 0)
        return (double)r->global_step;
    if (r->step >= 0 && r->epoch >= 0 && r->step_total > 0)
        return (double)r->epoch * (double)r->step_total + (double)r->step;
    return r->step >= 0 ? (double)r->step : NAN;
}

double tw_record_steps_to_plan(const tw_record *r, double planned_steps, bool epochs_from_zero)
{
    if (planned_steps > 0) {
        double left = planned_steps - tw_record_position(r);
        return left > 0 ? left : isnan(left) ? NAN : 0;
    }
    return tw_record_steps_left(r, epochs_from_zero);
}

double tw_record_steps_left(const tw_record *r, bool epochs_from_zero)
{
    if (r->epoch >= 0 && r->epoch_total > 0 && r->step >= 0 && r->step_total > 0) {
        int64_t epochs_after = r->epoch_total - r->epoch - (epochs_from_zero ? 1 : 0);
        return (double)(epochs_after < 0 ? 0 : epochs_after) * (double)r->step_total +
               (double)(r->step_total - r->step);
    }
    if (r->epoch < 0 && r->step >= 0 && r->step_total > 0)
        return (double)(r->step_total - r->step);
    return NAN;
}
