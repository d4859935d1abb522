/*
 * yaml_load.h: one YAML document from memory, with libyaml, for the readers
 * of configuration files (http/webconfig.c, rules/rulefile.c). They walk
 * the document's nodes themselves; this is only the load and its error.
 */
#ifndef TW_CORE_YAML_LOAD_H
#define TW_CORE_YAML_LOAD_H

#include <stddef.h>
#include <yaml.h>

/* Bounds of a document: larger or deeper texts are refused before libyaml
 * builds anything (configuration files are small and shallow). */
#define TW_YAML_MAX_SIZE  (16 << 20)
#define TW_YAML_MAX_DEPTH 64

typedef struct tw_yaml_problem {
    size_t line, column;       /* 1-based */
    char text[256];            /* libyaml's words for it */
} tw_yaml_problem;

/* Loads the first document of text into doc (free it with
 * yaml_document_delete). Returns TW_OK; TW_ECONFIG with *problem filled
 * when the text is not YAML, is larger than TW_YAML_MAX_SIZE or nests
 * deeper than TW_YAML_MAX_DEPTH; TW_ENOMEM. When further_line is not NULL it
 * receives the line where a second document starts, or 0 when there is
 * none (a configuration file holds one document). */
int tw_yaml_load(const char *text, size_t len, yaml_document_t *doc, size_t *further_line, tw_yaml_problem *problem);

#endif
