/*
 * user_formats.c: --pattern and --formats: user-defined line formats on
 * PCRE2 named groups.
 *
 * Each format is compiled once (JIT where PCRE2 has it) and its named groups
 * mapped to record fields at load, so a line costs one match per format
 * and a strtod per group that took part. A detect regex, when given, is
 * matched first and cheaply rules a line out. Match data is per parser
 * (tw_parser.user_match, sized for the largest pattern), so one set serves
 * the parsers of every thread.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "user_formats.h"

#include <errno.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/yaml_load.h"
#include "formats.h"
#include "parser.h"
#include "trainwatch/error.h"

#define USER_FORMATS_MAX 64
#define GROUPS_MAX       64

typedef enum field {
    FIELD_METRIC, /* any other name */
    FIELD_STEP,
    FIELD_GLOBAL_STEP,
    FIELD_EPOCH,
    FIELD_LOSS,
    FIELD_LR,
    FIELD_STEP_TIME,
    FIELD_DATA_TIME,
    FIELD_SAMPLES_PER_SEC,
    FIELD_ETA,
} field;

static const struct {
    const char *name;
    field field;
} field_names[] = {
    {"step", FIELD_STEP},
    {"global_step", FIELD_GLOBAL_STEP},
    {"epoch", FIELD_EPOCH},
    {"loss", FIELD_LOSS},
    {"lr", FIELD_LR},
    {"step_time", FIELD_STEP_TIME},
    {"data_time", FIELD_DATA_TIME},
    {"samples_per_sec", FIELD_SAMPLES_PER_SEC},
    {"eta", FIELD_ETA},
};

typedef struct group {
    uint32_t number; /* capture group number */
    field field;
    char name[TW_NAME_MAX];
} group;

typedef struct user_format {
    char name[64];
    bool eval; /* kind: eval */
    pcre2_code *detect, *re;
    group groups[GROUPS_MAX];
    int group_count;
} user_format;

struct tw_user_formats {
    user_format items[USER_FORMATS_MAX];
    int count;
    int patterns; /* --pattern options seen, for their names */
    uint32_t max_captures;
};

int tw_user_formats_new(tw_user_formats **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? TW_OK : TW_ENOMEM;
}

void tw_user_formats_free(tw_user_formats *set)
{
    if (!set)
        return;
    for (int i = 0; i < set->count; i++) {
        pcre2_code_free(set->items[i].detect);
        pcre2_code_free(set->items[i].re);
    }
    free(set);
}

int tw_user_formats_count(const tw_user_formats *set)
{
    return set ? set->count : 0;
}

/* Compiles regex; on error writes "offset N: why" into err. */
static pcre2_code *compile(const char *regex, size_t len, char *err, size_t cap)
{
    int code;
    PCRE2_SIZE offset;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)regex, len, PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &code, &offset, NULL);
    if (!re) {
        PCRE2_UCHAR why[200];
        pcre2_get_error_message(code, why, sizeof why);
        snprintf(err, cap, "offset %zu: %s", (size_t)offset, (const char *)why);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without JIT it still matches, slower */
    return re;
}

static field field_of(const char *name)
{
    for (size_t i = 0; i < sizeof field_names / sizeof field_names[0]; i++) {
        if (strcmp(name, field_names[i].name) == 0)
            return field_names[i].field;
    }
    return FIELD_METRIC;
}

/* Maps the named groups of f->re; a pattern without one extracts nothing. */
static int map_groups(user_format *f, char *err, size_t cap)
{
    uint32_t count = 0, entry_size = 0;
    PCRE2_SPTR table;
    pcre2_pattern_info(f->re, PCRE2_INFO_NAMECOUNT, &count);
    pcre2_pattern_info(f->re, PCRE2_INFO_NAMEENTRYSIZE, &entry_size);
    pcre2_pattern_info(f->re, PCRE2_INFO_NAMETABLE, &table);
    if (count == 0) {
        snprintf(err, cap, "no named group: name what to extract, e.g. (?<step>\\d+) and (?<loss>[0-9.eE+-]+)");
        return TW_ECONFIG;
    }
    bool counter = false;
    for (uint32_t i = 0; i < count && f->group_count < GROUPS_MAX; i++) {
        const unsigned char *entry = table + (size_t)i * entry_size;
        group *g = &f->groups[f->group_count++];
        g->number = (uint32_t)(entry[0] << 8 | entry[1]);
        snprintf(g->name, sizeof g->name, "%s", (const char *)entry + 2);
        g->field = field_of(g->name);
        counter |= g->field == FIELD_STEP || g->field == FIELD_GLOBAL_STEP || g->field == FIELD_EPOCH;
    }
    if (!counter && !f->eval) {
        snprintf(err, cap,
                 "no step counter: a training line needs (?<step>...), (?<global_step>...) or "
                 "(?<epoch>...) (or kind: eval in a formats file)");
        return TW_ECONFIG;
    }
    return TW_OK;
}

static int add_format(tw_user_formats *set, const char *name, const char *regex, const char *detect, bool eval,
                      char *err, size_t cap)
{
    if (set->count == USER_FORMATS_MAX) {
        snprintf(err, cap, "more than %d formats", USER_FORMATS_MAX);
        return TW_ELIMIT;
    }
    user_format *f = &set->items[set->count];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->eval = eval;
    char why[256];
    if (!(f->re = compile(regex, strlen(regex), why, sizeof why))) {
        snprintf(err, cap, "pattern: %s", why);
        return TW_ECONFIG;
    }
    if (detect && !(f->detect = compile(detect, strlen(detect), why, sizeof why))) {
        snprintf(err, cap, "detect: %s", why);
        pcre2_code_free(f->re);
        return TW_ECONFIG;
    }
    int rc = map_groups(f, err, cap);
    if (rc != TW_OK) {
        pcre2_code_free(f->re);
        pcre2_code_free(f->detect);
        return rc;
    }
    uint32_t captures = 0;
    pcre2_pattern_info(f->re, PCRE2_INFO_CAPTURECOUNT, &captures);
    if (captures + 1 > set->max_captures)
        set->max_captures = captures + 1;
    set->count++;
    return TW_OK;
}

int tw_user_formats_add_pattern(tw_user_formats *set, const char *regex, char *err, size_t err_cap)
{
    char name[32];
    snprintf(name, sizeof name, "pattern %d", ++set->patterns);
    return add_format(set, name, regex, NULL, false, err, err_cap);
}

/* ---- the formats file ---------------------------------------------------- */

typedef struct yaml_ctx {
    yaml_document_t *doc;
    char *err;
    size_t cap;
} yaml_ctx;

static const char *scalar_of(yaml_ctx *y, int index)
{
    yaml_node_t *n = yaml_document_get_node(y->doc, index);
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int fail_at(yaml_ctx *y, const yaml_node_t *n, const char *what)
{
    size_t line = n ? (size_t)n->start_mark.line + 1 : 0;
    if (what != y->err) {
        snprintf(y->err, y->cap, "line %zu: %s", line, what);
        return TW_ECONFIG;
    }
    char copy[512];
    snprintf(copy, sizeof copy, "%s", what);
    snprintf(y->err, y->cap, "line %zu: %s", line, copy);
    return TW_ECONFIG;
}

/* One entry of `formats:`: name, pattern, detect, kind. */
static int load_entry(tw_user_formats *set, yaml_ctx *y, yaml_node_t *map)
{
    if (map->type != YAML_MAPPING_NODE)
        return fail_at(y, map, "a format is a mapping with name and pattern (and detect, kind)");
    const char *name = NULL, *pattern = NULL, *detect = NULL, *kind = "step";
    yaml_node_t *pattern_node = map, *detect_node = map;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *key = scalar_of(y, p->key), *value = scalar_of(y, p->value);
        yaml_node_t *vn = yaml_document_get_node(y->doc, p->value);
        if (!key || !value)
            return fail_at(y, vn, "format keys and values are plain strings");
        if (strcmp(key, "name") == 0)
            name = value;
        else if (strcmp(key, "pattern") == 0) {
            pattern = value;
            pattern_node = vn;
        } else if (strcmp(key, "detect") == 0) {
            detect = value;
            detect_node = vn;
        } else if (strcmp(key, "kind") == 0)
            kind = value;
        else {
            char why[128];
            snprintf(why, sizeof why, "unknown key '%.40s' (name, pattern, detect, kind)", key);
            return fail_at(y, yaml_document_get_node(y->doc, p->key), why);
        }
    }
    if (!name || !pattern)
        return fail_at(y, map, "a format needs a name and a pattern");
    if (strcmp(kind, "step") != 0 && strcmp(kind, "eval") != 0)
        return fail_at(y, map, "kind is step or eval");
    char why[300], full[400];
    int rc = add_format(set, name, pattern, detect, strcmp(kind, "eval") == 0, why, sizeof why);
    if (rc != TW_OK) {
        snprintf(full, sizeof full, "format '%.60s': %s", name, why);
        return fail_at(y, strncmp(why, "detect", 6) == 0 ? detect_node : pattern_node, full);
    }
    return TW_OK;
}

static int load_document(tw_user_formats *set, yaml_ctx *y)
{
    yaml_node_t *root = yaml_document_get_root_node(y->doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        return fail_at(y, root, "the file is a mapping with a 'formats' list");
    yaml_node_t *list = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        const char *key = scalar_of(y, p->key);
        if (!key || strcmp(key, "formats") != 0)
            return fail_at(y, yaml_document_get_node(y->doc, p->key), "the only top-level key is 'formats'");
        list = yaml_document_get_node(y->doc, p->value);
    }
    if (!list || list->type != YAML_SEQUENCE_NODE || list->data.sequence.items.top == list->data.sequence.items.start)
        return fail_at(y, list ? list : root, "'formats' is a list of formats");
    for (yaml_node_item_t *i = list->data.sequence.items.start; i < list->data.sequence.items.top; i++) {
        int rc = load_entry(set, y, yaml_document_get_node(y->doc, *i));
        if (rc != TW_OK)
            return rc;
    }
    return TW_OK;
}

int tw_user_formats_load(tw_user_formats *set, const char *text, size_t len, char *err, size_t err_cap)
{
    yaml_document_t doc;
    tw_yaml_problem problem;
    int rc = tw_yaml_load(text, len, &doc, NULL, &problem);
    if (rc == TW_ECONFIG) {
        snprintf(err, err_cap, "line %zu, column %zu: %s", problem.line, problem.column, problem.text);
        return rc;
    }
    if (rc != TW_OK) {
        snprintf(err, err_cap, "%s", tw_strerror(rc));
        return rc;
    }
    yaml_ctx y = {&doc, err, err_cap};
    int before = set->count;
    rc = load_document(set, &y);
    if (rc != TW_OK) { /* all or nothing: drop what this file added */
        for (int i = before; i < set->count; i++) {
            pcre2_code_free(set->items[i].re);
            pcre2_code_free(set->items[i].detect);
        }
        set->count = before;
    }
    yaml_document_delete(&doc);
    return rc;
}

int tw_user_formats_load_file(tw_user_formats *set, const char *path, char *err, size_t err_cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_cap, "%s", strerror(errno));
        return tw_status_from_errno(errno);
    }
    char *text = malloc(TW_YAML_MAX_SIZE + 1);
    size_t len = text ? fread(text, 1, TW_YAML_MAX_SIZE + 1, f) : 0;
    int rc = !text ? TW_ENOMEM : ferror(f) ? TW_EIO : TW_OK;
    fclose(f);
    if (rc == TW_OK && len > TW_YAML_MAX_SIZE) {
        snprintf(err, err_cap, "larger than %d bytes", TW_YAML_MAX_SIZE);
        rc = TW_ECONFIG;
    } else if (rc == TW_OK) {
        rc = tw_user_formats_load(set, text, len, err, err_cap);
    } else {
        snprintf(err, err_cap, "%s", tw_strerror(rc));
    }
    free(text);
    return rc;
}

/* ---- matching ------------------------------------------------------------ */

void tw_parser_set_user_formats(tw_parser *p, const tw_user_formats *set)
{
    p->user = set && set->count ? set : NULL;
}

static void set_field(tw_record *r, const group *g, const char *s, size_t len)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (end == buf)
        return;
    switch (g->field) {
    case FIELD_STEP:
        r->step = (int64_t)v;
        break;
    case FIELD_GLOBAL_STEP:
        r->global_step = (int64_t)v;
        break;
    case FIELD_EPOCH:
        r->epoch = (int64_t)v;
        break;
    case FIELD_LOSS:
        r->loss = v;
        r->fields |= TW_F_LOSS;
        break;
    case FIELD_LR:
        r->lr = v;
        r->fields |= TW_F_LR;
        break;
    case FIELD_STEP_TIME:
        r->batch_time = v;
        r->fields |= TW_F_BATCH_TIME;
        break;
    case FIELD_DATA_TIME:
        r->data_time = v;
        r->fields |= TW_F_DATA_TIME;
        break;
    case FIELD_SAMPLES_PER_SEC:
        r->samples_per_sec = v;
        r->fields |= TW_F_SAMPLES_PER_SEC;
        break;
    case FIELD_ETA:
        r->eta = v;
        r->fields |= TW_F_ETA;
        break;
    case FIELD_METRIC:
        tw_record_set_metric(r, g->name, strlen(g->name), v);
        break;
    }
}

static int emit_match(tw_parser *p, const user_format *f, const tw_line *line, pcre2_match_data *md)
{
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t pairs = pcre2_get_ovector_count(md);
    tw_record r;
    tw_record_init(&r);
    r.kind = f->eval ? TW_REC_EVAL : TW_REC_STEP;
    for (int i = 0; i < f->group_count; i++) {
        const group *g = &f->groups[i];
        if (g->number >= pairs || ov[2 * g->number] == PCRE2_UNSET)
            continue;
        set_field(&r, g, line->text + ov[2 * g->number], ov[2 * g->number + 1] - ov[2 * g->number]);
    }
    if (!f->eval && r.step < 0 && r.global_step < 0 && r.epoch < 0)
        return 0; /* the counter's group did not take part */
    p->stats.format = f->name;
    tw_parser_emit(p, line, &r);
    return 1;
}

int tw_user_formats_parse(tw_parser *p, const tw_line *line)
{
    const tw_user_formats *set = p->user;
    if (!p->user_match && !(p->user_match = pcre2_match_data_create(set->max_captures, NULL)))
        return 0;
    pcre2_match_data *md = p->user_match;
    for (int i = 0; i < set->count; i++) {
        const user_format *f = &set->items[i];
        if (f->detect && pcre2_match(f->detect, (PCRE2_SPTR)line->text, line->len, 0, 0, md, NULL) < 0)
            continue;
        if (pcre2_match(f->re, (PCRE2_SPTR)line->text, line->len, 0, 0, md, NULL) < 0)
            continue;
        if (emit_match(p, f, line, md))
            return 1;
    }
    return 0;
}

void tw_user_match_free(void *match)
{
    pcre2_match_data_free(match);
}
