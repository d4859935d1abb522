/*
 * yaml_load.c: one YAML document from memory (see yaml_load.h).
 */
#include "yaml_load.h"

#include <stdio.h>

#include "trainwatch/error.h"

int tw_yaml_load(const char *text, size_t len, yaml_document_t *doc, size_t *further_line, tw_yaml_problem *problem)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return TW_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, doc)) {
        problem->line = parser.problem_mark.line + 1;
        problem->column = parser.problem_mark.column + 1;
        snprintf(problem->text, sizeof problem->text, "%s", parser.problem ? parser.problem : "malformed");
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
