/*
 * parser.h: the parser's insides, shared by parser.c (one input read in
 * order), emit.c (records leaving the parser) and parallel.c (tw_parser_run:
 * one large file read in blocks on several threads, each block by its own
 * tw_parser whose state is then compared with the state the previous block
 * ended in; other inputs in order). The dependencies run one way: parallel.c
 * uses parser.c, parser.c uses the format table (formats.c), the formats
 * emit through emit.c. Not part of the public API.
 */
#ifndef TW_PARSE_PARSER_H
#define TW_PARSE_PARSER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zlib.h>

#include "trainwatch/parse.h"

#define READ_CHUNK (256u * 1024u)
#define BUFFER_SIZE (TW_LINE_MAX + READ_CHUNK)
#define RECENT_FORMATS 3

struct tw_parser {
    char *path;
    bool borrowed_path;       /* path belongs to another parser (parallel.c's block parsers) */
    gzFile gz;
    int fd;                   /* the plain file under gz when it can be read in blocks, else -1 */
    uint64_t size;            /* its size at open */
    int jobs;                 /* threads for tw_parser_run on a large plain file */
    size_t block_size;        /* bytes per block for them */
    int forced;               /* index in the format table, -1: detect */
    int locked;               /* format detected for this input, -1: none yet */
    int continuing;           /* format inside a multi-line block (returned -1 last line), -1: none */
    int recent[RECENT_FORMATS]; /* other formats that produced data lately, most recent first */
    char *buf;                /* read buffer: one partial line plus a chunk */
    size_t have;
    bool skipping;            /* dropping the rest of a line cut at TW_LINE_MAX */
    int rank;
    int64_t bar_step;         /* the last training progress bar's step (N of N/M), -1: none yet */
    void **states;            /* one private state per format, same order as the table */
    tw_record_fn fn;
    void *arg;
    tw_parse_stats stats;
    uint64_t line_no;
    char *scratch;            /* ANSI-stripped copy of the current segment */
    bool emitted_data;        /* the current line produced a step or eval record */
    /* Live input (tw_parser_push): the last point a fresh parser could
     * resume from and continue exactly (see tw_parser_resume_point). */
    bool track_rest;
    bool rest_skipping;       /* that point is inside a line cut at TW_LINE_MAX */
    uint64_t rest_pos;        /* in bytes ingested (stats.bytes) */
    uint64_t rest_line;
    void *idle_state;         /* zeroes, as large as the largest format state */
    const struct tw_user_formats *user; /* --pattern / --formats, borrowed; NULL: none */
    void *user_match;         /* their PCRE2 match data, owned (user_formats.c) */
    bool unparsed;            /* deliver lines no format read as TW_REC_LINE records */
    _Atomic uint64_t progress; /* input bytes consumed (compressed, for .gz): tw_parser_progress */
};

/* user_formats.c: tries the user's formats on a line; 1 when one emitted. */
int tw_user_formats_parse(tw_parser *p, const struct tw_line *line);
void tw_user_match_free(void *match);

/* Parses complete lines of data (a partial last line is held back). */
void tw_parser_ingest(tw_parser *p, const char *data, size_t n);
/* Parses a held partial line as the last line of the input. */
void tw_parser_flush_line(tw_parser *p);
/* Calls every format's finish() (end of input). */
void tw_parser_finish_formats(tw_parser *p);
/* True when the first bytes of an input are not text. */
bool tw_parser_looks_binary(const char *s, size_t len);

/* Makes dst continue where src stands: format lock, blocks in progress,
 * rank and every format's state; nothing read, nothing counted. */
void tw_parser_copy_state(tw_parser *dst, const tw_parser *src);
/* True when a and b would parse the same bytes into the same records. */
bool tw_parser_same_state(const tw_parser *a, const tw_parser *b);

/* Reads p's whole input in order, on this thread (what tw_parser_run()
 * does when the input is not read in blocks: stdin, gzip, small files). */
int tw_parser_run_in_order(tw_parser *p, tw_record_fn fn, void *arg);

#endif
