/*
 * promql.h: the subset of PromQL trainwatch evaluates itself.
 *
 * tw_pq_parse turns an expression into a tree; anything outside the subset is
 * refused there, naming the construct and its position, so a rule file fails
 * when it is loaded, not when the alert should fire. tw_pq_eval computes the
 * tree at one timestamp over a tw_store, with Prometheus 2.x semantics
 * (lookback 5m, ranges closed at both ends, extrapolated rate/increase/delta,
 * one-to-one vector matching, set operators).
 *
 * The subset: number and string literals; instant and range selectors with
 * =, !=, =~, !~ matchers (RE2 regular expressions, regex.h) and offset; + - * / % ^, comparisons with or without
 * bool, and/or/unless, on(...)/ignoring(...); sum, avg, min, max, count with
 * by/without; the functions in functions.c.
 */
#ifndef TW_RULES_PROMQL_H
#define TW_RULES_PROMQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labels.h"
#include "regex.h"
#include "store.h"

#define TW_LOOKBACK_MS (5 * 60 * 1000)
/* Deepest expression tree (and parser recursion) accepted. Prometheus has no
 * such limit, but the parser, the evaluator and tw_pq_free recurse. */
#define TW_PQ_MAX_DEPTH 256

typedef enum tw_pq_type { TW_PQ_SCALAR, TW_PQ_VECTOR, TW_PQ_MATRIX, TW_PQ_STRING } tw_pq_type;

typedef enum tw_pq_kind {
    TW_PQ_NUMBER,
    TW_PQ_STRING_LIT,
    TW_PQ_SELECTOR,
    TW_PQ_CALL,
    TW_PQ_AGGREGATE,
    TW_PQ_BINARY,
    TW_PQ_NEGATE,
} tw_pq_kind;

typedef enum tw_pq_op {
    TW_OP_ADD, TW_OP_SUB, TW_OP_MUL, TW_OP_DIV, TW_OP_MOD, TW_OP_POW,
    TW_OP_EQ, TW_OP_NE, TW_OP_GT, TW_OP_LT, TW_OP_GE, TW_OP_LE,
    TW_OP_AND, TW_OP_OR, TW_OP_UNLESS,
} tw_pq_op;

typedef enum tw_pq_agg { TW_AGG_SUM, TW_AGG_AVG, TW_AGG_MIN, TW_AGG_MAX, TW_AGG_COUNT } tw_pq_agg;

typedef enum tw_match_op { TW_MATCH_EQ, TW_MATCH_NE, TW_MATCH_RE, TW_MATCH_NRE } tw_match_op;

typedef struct tw_matcher {
    char *name, *value;
    tw_match_op op;
    tw_regex *re; /* =~ and !~: RE2 syntax, anchored at both ends (regex.h) */
} tw_matcher;

typedef struct tw_pq_node tw_pq_node;
typedef struct tw_vector tw_vector;
typedef struct tw_pq_function tw_pq_function;

struct tw_pq_node {
    tw_pq_kind kind;
    tw_pq_type type;
    int pos;   /* byte offset in the expression */
    int depth; /* levels of the tree from this node down, 1 for a leaf */
    union {
        double number;
        char *string;
        struct {
            char *metric; /* NULL when only matchers name it */
            tw_matcher *matchers;
            size_t matcher_count;
            int64_t range_ms; /* 0: instant */
            int64_t offset_ms;
        } sel;
        struct {
            const tw_pq_function *fn;
            tw_pq_node **args;
            size_t arg_count;
        } call;
        struct {
            tw_pq_agg op;
            bool without;
            tw_name_list grouping;
            tw_pq_node *expr;
        } agg;
        struct {
            tw_pq_op op;
            bool return_bool;
            bool on;             /* on(...) given (else ignoring(...) or nothing) */
            tw_name_list matching;
            tw_pq_node *lhs, *rhs;
        } bin;
        tw_pq_node *operand; /* TW_PQ_NEGATE */
    } u;
};

typedef struct tw_sample {
    tw_lset labels;
    double v;
} tw_sample;

struct tw_vector {
    tw_sample *items;
    size_t count, cap;
};

/* The evaluation context: the store, the time, and where errors go. */
typedef struct tw_pq_context {
    const tw_store *store;
    int64_t t;
    char *err;
    size_t err_cap;
} tw_pq_context;

typedef int (*tw_pq_impl)(const tw_pq_context *c, tw_pq_node *const *args, tw_vector *out, double *scalar);

struct tw_pq_function {
    const char *name;
    tw_pq_type ret;
    size_t min_args, max_args;
    tw_pq_type args[3];
    tw_pq_impl impl;
};

/* Reads a Prometheus duration (1h30m, 5m, 250ms; units largest first) at s:
 * the characters used, 0 when there is none. */
size_t tw_pq_scan_duration(const char *s, int64_t *ms);

/* Parses text; on error returns TW_ECONFIG with "col N: what" in err. */
int tw_pq_parse(const char *text, tw_pq_node **out, char *err, size_t cap);
void tw_pq_free(tw_pq_node *n);
/* Calls fn for every selector in the tree (to learn names and ranges). */
void tw_pq_walk_selectors(const tw_pq_node *n, void (*fn)(const tw_pq_node *sel, void *arg), void *arg);

/* Evaluates an expression of scalar or vector type at c->t. A scalar result
 * is returned in *scalar with out left empty. */
int tw_pq_eval(const tw_pq_context *c, const tw_pq_node *n, tw_vector *out, double *scalar);

void tw_vector_free(tw_vector *v);
int tw_vector_push(tw_vector *v, tw_lset *labels, double value); /* takes the labels */

const tw_pq_function *tw_pq_function_find(const char *name);
/* True for PromQL names trainwatch knows but does not evaluate. */
bool tw_pq_function_unsupported(const char *name);
/* Samples of a range selector per series, for the range functions. */
int tw_pq_eval_range(const tw_pq_context *c, const tw_pq_node *sel,
                     int (*per_series)(const tw_series *s, const tw_point *pts, size_t n, void *arg), void *arg);

bool tw_matchers_match(const tw_pq_node *sel, const tw_lset *labels);

#endif
