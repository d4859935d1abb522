/*
 * formats.h: what the format modules share inside the parser: the line as
 * they see it, the format vtable, the format descriptors (one per file,
 * collected into the table in formats.c), and the helpers that turn
 * "key: value" text into step and eval records (emit.c). Adding a format is
 * one fmt_NAME.c defining a tw_format, plus one row in formats.c.
 */
#ifndef TW_PARSE_FORMATS_H
#define TW_PARSE_FORMATS_H

#include "scan.h"
#include "trainwatch/parse.h"

/* One physical line, as the formats see it. */
typedef struct tw_line {
    const char *text;   /* the line: no newline, no CR, ANSI escapes removed */
    size_t len;
    const char *body;   /* text after a leading timestamp, if one was found */
    size_t body_len;
    bool has_time;
    double time;        /* the leading timestamp, seconds since the epoch */
    tw_source source;
    int rank;           /* the rank a launcher's line prefix names ("[rank3]:"), -1 none */
} tw_line;

typedef struct tw_format {
    const char *name;          /* for --format and the JSON output */
    const char *summary;       /* one line for --help and the README */
    size_t state_size;         /* per-input private state, zeroed at open */
    /* Optional, NULL-terminated: a line of this format contains one of these
     * literals. The parser finds them for all formats in one pass and calls
     * detect() only where one occurs; NULL means always call detect(). */
    const char *const *anchors;
    /* Cheap test: does this line look like this format? */
    bool (*detect)(const tw_line *line);
    /* Emits records with tw_parser_emit(); returns how many it emitted, or
     * -1 when it consumed the line without emitting (part of a block). */
    int (*parse)(tw_parser *p, void *state, const tw_line *line);
    /* Optional: flush what a multi-line block still holds at end of input. */
    void (*finish)(tw_parser *p, void *state);
    /* Optional: would two states parse the same lines alike? (Without it the
     * states' bytes are compared; a state with unused bytes that may differ,
     * such as the rest of a string buffer, should say.) A block read ahead on
     * another thread is only kept when its starting state is the same as the
     * state the block before it ended in; "not the same" is always safe. */
    bool (*same_state)(const void *a, const void *b);
    /* Optional, NULL-terminated: lines starting with one of these (after a
     * timestamp, if any) set state that lasts for many lines, such as an
     * epoch header. Reading in blocks replays the last one before a block
     * so the block can start in the right state. */
    const char *const *state_lines;
    /* A generic reader (kv, counter, pylogging) that also accepts lines of
     * the specific formats: it holds the lock only until a specific format
     * reads a line, so a config dump's "iou_threshold=0.7" read as kv first
     * does not keep an OpenMMLab log's step lines from the mmdet reader. */
    bool fallback;
} tw_format;

/* For formats: fills in source, rank and time (from the line) where the record
 * left them unset, then delivers it. */
void tw_parser_emit(tw_parser *p, const tw_line *line, tw_record *record);

/* For formats: the content names the input's rank ("local rank: 3"). Used
 * only when neither the caller nor the file name gave one. */
void tw_parser_rank_hint(tw_parser *p, int rank);

/* For formats: a training progress bar stands at this step (tqdm's N of
 * N/M); a record that has no counter of its own may take it. */
void tw_parser_bar_step_hint(tw_parser *p, int64_t step);
/* The last step a progress bar of this input stood at, -1 when none. */
int64_t tw_parser_bar_step(const tw_parser *p);

extern const tw_format tw_format_trainwatch;
extern const tw_format tw_format_twlog;
extern const tw_format tw_format_events;
extern const tw_format tw_format_detr;
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
extern const tw_format tw_format_insightface;
extern const tw_format tw_format_olmo;
extern const tw_format tw_format_static_print;
extern const tw_format tw_format_glog;
extern const tw_format tw_format_pylogging;
extern const tw_format tw_format_kv;
extern const tw_format tw_format_counter;

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

/* Emits one event record at line: kind, its message (len bytes of msg),
 * a detail (NULL: none) and a code (an exit status, a signal, a rank);
 * returns 1 (one record). */
int tw_events_emit(tw_parser *p, const tw_line *line, tw_event_kind kind, const char *msg, size_t len,
                   const char *detail, int code);

/* True when the words before the first key mark an evaluation line
 * ("eval", "[EVAL]", "val", "validation", "test"). */
bool tw_text_is_eval(const char *s, size_t len);

/* Length of a prefix "[a/b]"-style pair: parses "a/b" (with blanks) into
 * *a and *b; returns bytes consumed or 0. */
size_t tw_scan_fraction(const char *s, const char *end, long long *a, long long *b);

#endif
