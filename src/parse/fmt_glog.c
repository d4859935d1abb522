/*
 * fmt_glog.c: glog lines, as Paddle's C++ core prints them.
 *
 *   I0213 23:07:05.692358  4094 nccl_context.cc:74] init nccl context nranks: 4 ...
 *   W0213 23:07:06.635774  4094 device_context.cc:447] Please NOTE: device: 0, ...
 *   E0405 10:23:45.123456  1234 file.cc:404] something failed
 *   F0405 10:23:45.123456  1234 file.cc:404] Check failed: ...
 *
 * Severity E lines become warning events and F (fatal) lines exception
 * events; I and W lines are Paddle's chatter and are consumed quietly, except
 * that the NCCL init line tells the rank of a log whose name does not, and
 * the lines each process prints once as it starts (its first NCCL ring, its
 * GPU's compute capability, the launcher's store listening, a worker's
 * connection to that store) become launch
 * events: where a launch begins. torch.distributed.elastic's agent writes in
 * this form too (torch 2.x): its report of a failed worker and its rank
 * assignment are left to the events format, which reads them in any form.
 */
#include <string.h>

#include "formats.h"

static bool detect(const tw_line *line)
{
    const char *s = line->text;
    return line->has_time && line->len > 6 && strchr("IWEF", s[0]) && tw_is_digit(s[1]) &&
           tw_find(line->body, line->body_len, "] ") != NULL;
}

/* Printed once by each process as it starts; ring 0 is the first ring. */
static bool starts_launch(const tw_line *line)
{
    const char *s = line->body;
    size_t len = line->body_len;
    if (tw_find(s, len, "init nccl context"))
        return (len > 10 && memcmp(s + len - 10, "ring id: 0", 10) == 0) ||
               (len > 10 && memcmp(s + len - 10, "ring_id: 0", 10) == 0);
    return tw_find(s, len, "GPU Compute Capability") || tw_find(s, len, "The server starts to listen on") ||
           (tw_find(s, len, "tcp_utils.cc") && tw_find(s, len, "] Successfully connected to "));
}

/* The line as an event: the message after "] ", the source location as detail. */
static int emit(tw_parser *p, const tw_line *line, tw_event_kind kind)
{
    const char *msg = tw_find(line->body, line->body_len, "] ") + 2;
    size_t len = line->body_len - (size_t)(msg - line->body);
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = kind;
    tw_record_set_text(r.message, msg, len);
    tw_record_set_text(r.detail, line->body, (size_t)(msg - 2 - line->body));
    tw_parser_emit(p, line, &r);
    return 1;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    if (!detect(line))
        return 0;
    char severity = line->text[0];
    if (tw_find(line->body, line->body_len, "torch/distributed/elastic/") &&
        (tw_find(line->body, line->body_len, "failed (exitcode: ") ||
         tw_find(line->body, line->body_len, "Rendezvous complete for workers")))
        return 0;
    /* Paddle's collective init names the rank: "init nccl context nranks: 4 local rank: 1" */
    const char *rank = tw_find(line->body, line->body_len, "local rank: ");
    long long value;
    if (rank && tw_scan_uint(rank + 12, line->body + line->body_len, &value) && tw_rank_value(value) >= 0)
        tw_parser_rank_hint(p, tw_rank_value(value));
    if (severity != 'E' && severity != 'F')
        return starts_launch(line) ? emit(p, line, TW_EV_LAUNCH) : -1;
    return emit(p, line, severity == 'F' ? TW_EV_EXCEPTION : TW_EV_WARNING);
}

const tw_format tw_format_glog = {
    .name = "glog",
    .summary = "glog lines (Lmmdd hh:mm:ss.uuuuuu tid file:line] msg); E and F become events",
    .detect = detect,
    .parse = parse,
};
