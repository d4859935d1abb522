/*
 * labels.c: sorted label sets (see labels.h). Sets are small (a handful of
 * labels), so lookups are linear and inserts shift the array.
 */
#include "labels.h"

#include <stdlib.h>
#include <string.h>

#include "../core/buffer.h"
#include "trainwatch/error.h"

void tw_lset_free(tw_lset *s)
{
    for (size_t i = 0; i < s->count; i++) {
        free(s->items[i].name);
        free(s->items[i].value);
    }
    free(s->items);
    s->items = NULL;
    s->count = 0;
}

int tw_lset_copy(const tw_lset *from, tw_lset *to)
{
    to->count = 0;
    to->items = NULL;
    if (from->count == 0)
        return TW_OK;
    to->items = calloc(from->count, sizeof *to->items);
    if (!to->items)
        return TW_ENOMEM;
    for (size_t i = 0; i < from->count; i++) {
        to->items[i].name = strdup(from->items[i].name);
        to->items[i].value = strdup(from->items[i].value);
        to->count = i + 1;
        if (!to->items[i].name || !to->items[i].value) {
            tw_lset_free(to);
            return TW_ENOMEM;
        }
    }
    return TW_OK;
}

static size_t find(const tw_lset *s, const char *name, bool *found)
{
    size_t i = 0;
    for (; i < s->count; i++) {
        int c = strcmp(s->items[i].name, name);
        if (c >= 0) {
            *found = c == 0;
            return i;
        }
    }
    *found = false;
    return i;
}

int tw_lset_set(tw_lset *s, const char *name, const char *value)
{
    if (!value || !*value) {
        tw_lset_del(s, name);
        return TW_OK;
    }
    bool found;
    size_t i = find(s, name, &found);
    char *v = strdup(value);
    if (!v)
        return TW_ENOMEM;
    if (found) {
        free(s->items[i].value);
        s->items[i].value = v;
        return TW_OK;
    }
    char *n = strdup(name);
    tw_label *grown = n ? realloc(s->items, (s->count + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(n);
        free(v);
        return TW_ENOMEM;
    }
    s->items = grown;
    memmove(s->items + i + 1, s->items + i, (s->count - i) * sizeof *s->items);
    s->items[i] = (tw_label){n, v};
    s->count++;
    return TW_OK;
}

void tw_lset_del(tw_lset *s, const char *name)
{
    bool found;
    size_t i = find(s, name, &found);
    if (!found)
        return;
    free(s->items[i].name);
    free(s->items[i].value);
    memmove(s->items + i, s->items + i + 1, (s->count - i - 1) * sizeof *s->items);
    s->count--;
}

const char *tw_lset_get(const tw_lset *s, const char *name)
{
    bool found;
    size_t i = find(s, name, &found);
    return found ? s->items[i].value : NULL;
}

bool tw_lset_equal(const tw_lset *a, const tw_lset *b)
{
    if (a->count != b->count)
        return false;
    for (size_t i = 0; i < a->count; i++) {
        if (strcmp(a->items[i].name, b->items[i].name) || strcmp(a->items[i].value, b->items[i].value))
            return false;
    }
    return true;
}

bool tw_name_list_has(const tw_name_list *l, const char *name)
{
    for (size_t i = 0; l && i < l->count; i++) {
        if (!strcmp(l->names[i], name))
            return true;
    }
    return false;
}

void tw_name_list_free(tw_name_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->names[i]);
    free(l->names);
    l->names = NULL;
    l->count = 0;
}

void tw_lset_filter(tw_lset *s, const tw_name_list *names, bool keep)
{
    size_t out = 0;
    for (size_t i = 0; i < s->count; i++) {
        if (tw_name_list_has(names, s->items[i].name) == keep) {
            s->items[out++] = s->items[i];
        } else {
            free(s->items[i].name);
            free(s->items[i].value);
        }
    }
    s->count = out;
}

static void quoted(tw_buffer *b, const char *v)
{
    tw_buffer_putc(b, '"');
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            tw_buffer_putc(b, '\\');
        if (*v == '\n') {
            tw_buffer_puts(b, "\\n");
            continue;
        }
        tw_buffer_putc(b, *v);
    }
    tw_buffer_putc(b, '"');
}

char *tw_lset_text(const tw_lset *s)
{
    tw_buffer b;
    tw_buffer_init(&b);
    const char *name = tw_lset_get(s, TW_NAME_LABEL);
    if (name)
        tw_buffer_puts(&b, name);
    tw_buffer_putc(&b, '{');
    bool first = true;
    for (size_t i = 0; i < s->count; i++) {
        if (!strcmp(s->items[i].name, TW_NAME_LABEL))
            continue;
        if (!first)
            tw_buffer_putc(&b, ',');
        first = false;
        tw_buffer_puts(&b, s->items[i].name);
        tw_buffer_putc(&b, '=');
        quoted(&b, s->items[i].value);
    }
    tw_buffer_putc(&b, '}');
    tw_buffer_putc(&b, '\0');
    if (b.failed) {
        tw_buffer_free(&b);
        return NULL;
    }
    return b.data;
}

/* FNV-1a over name/value pairs, separated by bytes that labels cannot hold. */
static uint64_t mix(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;
}

uint64_t tw_lset_signature(const tw_lset *s, const tw_name_list *names, bool on)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < s->count; i++) {
        const char *n = s->items[i].name;
        bool listed = tw_name_list_has(names, n);
        if (on ? !listed : (listed || !strcmp(n, TW_NAME_LABEL)))
            continue;
        h = mix(mix(h, n), s->items[i].value);
    }
    return h;
}

uint64_t tw_lset_hash(const tw_lset *s)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < s->count; i++)
        h = mix(mix(h, s->items[i].name), s->items[i].value);
    return h;
}

static bool name_char(char c, bool first, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
           (!first && c >= '0' && c <= '9');
}

static bool valid_name(const char *s, bool colon)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        if (!name_char(*p, p == s, colon))
            return false;
    }
    return true;
}

bool tw_valid_metric_name(const char *s) { return valid_name(s, true); }
bool tw_valid_label_name(const char *s) { return valid_name(s, false); }
