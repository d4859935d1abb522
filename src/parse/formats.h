/*
 * formats.h: what the format modules share inside the parser: the format
 * descriptors (one per file, collected into the table in formats.c) and the
 * helpers that turn "key: value" text into step and eval records.
 */
#ifndef TW_PARSE_FORMATS_H
#define TW_PARSE_FORMATS_H

#include "scan.h"
#include "trainwatch/parse.h"

extern const tw_format tw_format_trainwatch;
extern const tw_format tw_format_events;
extern const tw_format tw_format_json;
extern const tw_format tw_format_hf_state;
extern const tw_format tw_format_hapi;
extern const tw_format tw_format_ppdet;
extern const tw_format tw_format_ppcls;
extern const tw_format tw_format_paddlevideo;
extern const tw_format tw_format_paddleseg;
extern const tw_format tw_format_ppocr;
extern const tw_format tw_format_paddlenlp;
extern const tw_format tw_format_megatron;
extern const tw_format tw_format_deepspeed;
extern const tw_format tw_format_tqdm;
extern const tw_format tw_format_mmdet;
extern const tw_format tw_format_detectron2;
extern const tw_format tw_format_yolo;
extern const tw_format tw_format_olmo;
extern const tw_format tw_format_glog;
extern const tw_format tw_format_pylogging;
extern const tw_format tw_format_kv;

/* Scans text for key/values into a fresh record of the given kind and emits
 * it when it looks like a step (TW_REC_STEP) or has any metric (TW_REC_EVAL).
 * Returns 1 when a record was emitted, 0 otherwise. */
int tw_emit_fields(tw_parser *p, const tw_line *line, tw_record_kind kind, const char *text,
                   size_t len);

/* Emits r as a training step when it looks like one (tw_record_is_step_like)
 * and returns 1; otherwise returns `otherwise` (0: not this format's line,
 * -1: this format's line, but no step in it). */
int tw_emit_step(tw_parser *p, const tw_line *line, tw_record *r, int otherwise);

/* For logs whose only counter runs across epochs: it is the global step. */
void tw_record_step_is_global(tw_record *r);

/* Emits r as an eval record when it carries anything; metric names and
 * loss are kept. Returns 1 if emitted. */
int tw_emit_eval(tw_parser *p, const tw_line *line, tw_record *r);

/* True when the words before the first key mark an evaluation line
 * ("eval", "[EVAL]", "val", "validation", "test"). */
bool tw_text_is_eval(const char *s, size_t len);

/* Length of a prefix "[a/b]"-style pair: parses "a/b" (with blanks) into
 * *a and *b; returns bytes consumed or 0. */
size_t tw_scan_fraction(const char *s, const char *end, long long *a, long long *b);

#endif
