/*
 * fields.c: typed key=value fields as text. The caller builds them with the
 * tw_field_* constructors of log.h (a tag and a value, no format string), so
 * nothing is parsed on the hot path; here they are only written out.
 */
#include <string.h>

#include "internal.h"

static void out_summary(tw_log_out *o, const tw_field_summary_value *s)
{
    tw_out_char(o, '<');
    tw_out_str(o, s->type_name ? s->type_name : "value");
    if (s->shape && s->ndim) {
        tw_out_str(o, " shape=[");
        for (size_t i = 0; i < s->ndim; i++) {
            if (i)
                tw_out_char(o, ',');
            tw_out_int(o, s->shape[i]);
        }
        tw_out_char(o, ']');
    }
    if (s->size >= 0) {
        tw_out_str(o, " size=");
        tw_out_int(o, s->size);
    }
    tw_out_char(o, '>');
}

void tw_out_field_text(tw_log_out *o, const tw_log_field *f)
{
    switch (f->type) {
    case TW_FIELD_INT:
        tw_out_int(o, f->v.i);
        break;
    case TW_FIELD_DOUBLE:
        tw_out_double(o, f->v.d);
        break;
    case TW_FIELD_STRING:
        tw_out_str(o, f->v.s ? f->v.s : "None");
        break;
    case TW_FIELD_BOOL:
        tw_out_str(o, f->v.b ? "true" : "false");
        break;
    case TW_FIELD_SUMMARY:
        out_summary(o, &f->v.summary);
        break;
    }
}

/* A message of several lines (one with a traceback after it) gets its
 * fields at the end of its first line, the line readers parse. */
void tw_log_message_text(const tw_log_rec *r, tw_log_out *o)
{
    const char *newline = memchr(r->message, '\n', r->message_len);
    size_t head = newline ? (size_t)(newline - r->message) : r->message_len;
    tw_out_mem(o, r->message, head);
    for (size_t i = 0; i < r->field_count; i++) {
        const tw_log_field *f = &r->fields[i];
        if (!f->key)
            continue;
        if (o->len > 0 || head > 0)
            tw_out_char(o, ' ');
        tw_out_str(o, f->key);
        tw_out_char(o, '=');
        tw_out_field_text(o, f);
    }
    if (newline)
        tw_out_mem(o, newline, r->message_len - head);
}
