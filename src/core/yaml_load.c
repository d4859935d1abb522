/*
 * yaml_load.c: one YAML document from memory (see yaml_load.h).
 *
 * libyaml builds a document without bounds: a 100,000-deep `[[[...` takes
 * it half a minute (its scanner rechecks every open flow level per token).
 * So the text is bounded first: its size, then its nesting, in a pass over
 * libyaml's events that stops at the first level too deep, before anything
 * is built. Configuration files are shallow, so the bound costs nothing.
 */
#include "yaml_load.h"

#include <stdio.h>

#include "trainwatch/error.h"

static void problem_at(tw_yaml_problem *problem, yaml_mark_t mark, const char *text)
{
    problem->line = mark.line + 1;
    problem->column = mark.column + 1;
    snprintf(problem->text, sizeof problem->text, "%s", text);
}

/* Fails where the first document nests deeper than TW_YAML_MAX_DEPTH; a
 * syntax error is left for the load to report. */
static int check_depth(const char *text, size_t len, tw_yaml_problem *problem)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return TW_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int rc = TW_OK, depth = 0;
    for (;;) {
        yaml_event_t event;
        if (!yaml_parser_parse(&parser, &event))
            break;
        yaml_event_type_t type = event.type;
        if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
            if (++depth > TW_YAML_MAX_DEPTH) {
                char why[64];
                snprintf(why, sizeof why, "nesting deeper than %d levels", TW_YAML_MAX_DEPTH);
                problem_at(problem, event.start_mark, why);
                rc = TW_ECONFIG;
            }
        } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        yaml_event_delete(&event);
        if (rc != TW_OK || type == YAML_DOCUMENT_END_EVENT || type == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&parser);
    return rc;
}

int tw_yaml_load(const char *text, size_t len, yaml_document_t *doc, size_t *further_line, tw_yaml_problem *problem)
{
    if (len > TW_YAML_MAX_SIZE) {
        problem->line = problem->column = 1;
        snprintf(problem->text, sizeof problem->text, "larger than %d MiB", TW_YAML_MAX_SIZE >> 20);
        return TW_ECONFIG;
    }
    int rc = check_depth(text, len, problem);
    if (rc != TW_OK)
        return rc;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return TW_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, doc)) {
        problem_at(problem, parser.problem_mark, parser.problem ? parser.problem : "malformed");
        yaml_parser_delete(&parser);
        return TW_ECONFIG;
    }
    if (further_line) {
        *further_line = 0;
        yaml_document_t extra;
        if (yaml_parser_load(&parser, &extra)) {
            yaml_node_t *root = yaml_document_get_root_node(&extra);
            if (root)
                *further_line = root->start_mark.line + 1;
            yaml_document_delete(&extra);
        }
    }
    yaml_parser_delete(&parser);
    return TW_OK;
}
