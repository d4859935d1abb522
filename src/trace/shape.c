/*
 * shape.c: how the fast path learns the shape of an event (shape.h) while
 * it reads one member by member: the text between the values and an op
 * for each value (tw_shape_rec_value), closed at the event's end
 * (tw_shape_rec_end), and same, the shorter form that holds as text the
 * values that have not varied, built again when one does
 * (tw_shape_vary_same). Matching an event against a shape is fastpath.c's;
 * learning runs only when that match fails, so nothing here is on the
 * path of an event that matches.
 */
#include "shape.h"

#include <stdlib.h>
#include <string.h>

/* The bytes from rec->from to at as text, and op after them. */
static void rec_op(tw_shape_rec *rec, const char *at, tw_shape_op op)
{
    tw_shape_ops *o = &rec->shape->any;
    size_t len = (size_t)(at - rec->from);
    if (rec->bad || o->nops == SHAPE_OPS || len > (size_t)(SHAPE_TEXT - o->ntext)) {
        rec->bad = true;
        return;
    }
    memcpy(o->text + o->ntext, rec->from, len);
    o->ntext = (uint16_t)(o->ntext + len);
    op.len = (uint16_t)len;
    o->ops[o->nops++] = op;
}

/* Whether target is of the event's lane (pid, tid, device, stream): the
 * numbers that repeat from one event of a name to the next. */
static inline bool lane_target(int target)
{
    return target == T_PID || target == T_TID || target == T_DEVICE || target == T_STREAM;
}

/* Whether same may hold op's value as text: a value passed, or one of
 * the lane's read once in the shape (its value stored after the match, as
 * learned, can then be overwritten by no later member). */
static bool as_text(const tw_trace_shape *sh, const tw_shape_op *op)
{
    if (op->target == T_NONE || op->target == T_SKIP)
        return true;
    if (!lane_target(op->target))
        return false;
    int times = 0;
    for (const tw_shape_op *o = sh->any.ops; !o->end; o++)
        times += o->target == op->target;
    return times == 1;
}

/* Whether same holds op's value as text: one that has not varied since
 * the shape was learned, passed or of the lane. */
static bool folded(const tw_trace_shape *sh, const tw_shape_op *op)
{
    return !op->end && !op->varies && as_text(sh, op);
}

/* same, from the event learned: the values that may be text (folded) as
 * they were in it, every other value an op as in any; the lanes it holds
 * as text, to be stored after a match. */
static void build_same(tw_trace_shape *sh)
{
    tw_shape_ops *o = &sh->same;
    const char *from = sh->learned, *at = sh->learned;
    o->nops = o->ntext = 0;
    sh->nsame_lanes = 0;
    for (const tw_shape_op *op = sh->any.ops;; op++) {
        at += op->len;
        if (folded(sh, op)) {
            for (int i = 0; i < sh->nlanes; i++)
                if (sh->lanes[i].op == op - sh->any.ops)
                    sh->same_lanes[sh->nsame_lanes++] = sh->lanes[i];
            at += op->vlen;
            continue;
        }
        size_t len = (size_t)(at - from);
        memcpy(o->text + o->ntext, from, len);
        o->ntext = (uint16_t)(o->ntext + len);
        o->ops[o->nops++] = (tw_shape_op){.len = (uint16_t)len, .target = op->target, .end = op->end};
        if (op->end)
            return;
        from = at += op->vlen;
    }
}

/* The shape learned to the event's end at: its ops, the event's bytes,
 * and same built from them. */
void tw_shape_rec_end(tw_shape_rec *rec, const char *at)
{
    rec_op(rec, at, (tw_shape_op){.end = true});
    tw_trace_shape *sh = rec->shape;
    if (rec->bad)
        return;
    size_t ntext = (size_t)(at - rec->start);
    sh->ok = true;
    sh->exact = ntext <= SHAPE_TEXT;
    for (const tw_shape_op *op = sh->any.ops; !op->end; op++)
        if (lane_target(op->target) && !as_text(sh, op))
            sh->exact = false; /* a lane's number twice: same would store the one learned over the one read */
    if (!sh->exact)
        return;
    memcpy(sh->learned, rec->start, ntext);
    build_same(sh);
}

/* After same missed and any matched an event: the values folded into
 * same that differ in it (span[2i], span[2i + 1]: op i's value) now vary,
 * and same is built again with them as ops; false when none differs
 * (same cannot match this event: it is not tried again). */
bool tw_shape_vary_same(tw_trace_shape *sh, const char *const *span)
{
    bool changed = false;
    const char *at = sh->learned;
    for (tw_shape_op *op = sh->any.ops; !op->end; op++, span += 2) {
        at += op->len;
        size_t n = (size_t)(span[1] - span[0]);
        if (folded(sh, op) && (n != op->vlen || memcmp(at, span[0], n) != 0))
            op->varies = changed = true;
        at += op->vlen;
    }
    if (changed)
        build_same(sh);
    return changed;
}

/* A value at [at, after) for target: a number read as v (str: from a
 * string), or passed (T_NONE, T_SKIP). */
void tw_shape_rec_value(tw_shape_rec *rec, const char *at, const char *after, int target, double v, bool str)
{
    tw_trace_shape *sh = rec->shape;
    if (after - at > UINT16_MAX) { /* longer than any shape's text: none is learned */
        rec->bad = true;
        return;
    }
    rec_op(rec, at, (tw_shape_op){.target = (uint8_t)target, .vlen = (uint16_t)(after - at)});
    rec->from = after;
    if (lane_target(target) && !rec->bad) {
        if (sh->nlanes == 4)
            rec->bad = true;
        else
            sh->lanes[sh->nlanes++] =
                (tw_shape_lane){.target = (uint8_t)target, .op = (uint8_t)(sh->any.nops - 1), .str = str, .v = v};
    }
}

tw_trace_shape *tw_trace_shapes_new(void)
{
    return calloc(TW_TRACE_SHAPES + 16, sizeof(tw_trace_shape));
}
