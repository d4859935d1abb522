/*
 * cmd_analyze.c: `trainwatch analyze [options] FILE...` reads training logs
 * (files, .gz, or - for stdin; tw_analyze_read), diagnoses the run and
 * writes the report: text or JSON on stdout, also as one self-contained
 * HTML page with --html (to a file, or - for stdout instead of the text),
 * the template table with --templates, or the parsed records instead
 * (--records, JSON lines, schema trainwatch.record/1). The options are
 * analyze_options.c's.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../core/outfile.h"
#include "../analyze/gpu_time.h"
#include "../supervise/cost.h"
#include "analyze_options.h"
#include "trainwatch/error.h"

/* The page's title: the first input, and how many more. */
static void html_title(char *buf, size_t cap, char **inputs, int count)
{
    const char *name = strrchr(inputs[0], '/');
    name = name ? name + 1 : inputs[0];
    if (count > 1)
        snprintf(buf, cap, "trainwatch: %s and %d more", name, count - 1);
    else
        snprintf(buf, cap, "trainwatch: %s", name);
}

/* The run in the history: job and name from the first input's file name
 * (stdin: "stdin"), the inputs as given. */
static void record_history(const analyze_options *o, tw_report *report, const tw_run *run, char **inputs)
{
    const char *base = strrchr(inputs[0], '/');
    base = strcmp(inputs[0], "-") == 0 ? "stdin" : base ? base + 1 : inputs[0];
    char joined[512];
    tw_history_identity who = {.source = "analyze",
                               .name = base,
                               .job = base,
                               .inputs = tw_cli_join_words(inputs, joined, sizeof joined),
                               .started = NAN,
                               .ended = NAN};
    tw_cli_history_record("analyze", &o->history, &who, report, run);
}

/* The GPU time of the GPU logs given, into the report; what fails is said
 * and the GPU time left out. */
static void count_gpu_time(const analyze_options *o, const tw_run *run, tw_report *report)
{
    char err[600];
    if (tw_analyze_gpu_time(run, &o->cost, report, err, sizeof err) != TW_OK)
        fprintf(stderr, "trainwatch analyze: %s; the GPU time is left out\n", err);
}

/* The report of the launch asked for; NULL when there is none (said). */
static tw_report *diagnosed(const analyze_options *o, const tw_run *run)
{
    tw_report *report;
    int rc = tw_diagnose_launch(run, &o->th, o->launch, &report);
    if (rc == TW_EINVAL)
        fprintf(stderr, "trainwatch analyze: --launch %d: the log holds %d launch%s\n", o->launch, tw_run_launches(run),
                tw_run_launches(run) == 1 ? "" : "es");
    else if (rc != TW_OK)
        fprintf(stderr, "trainwatch: out of memory\n");
    return rc == TW_OK ? report : NULL;
}

/* The report out as asked: text or JSON on stdout, the HTML page, the
 * templates. Returns the exit status. */
static int write_report(const analyze_options *o, const tw_report *report, const tw_run *run, char **inputs, int count,
                        int status)
{
    bool html_stdout = o->html && strcmp(o->html, "-") == 0;
    if (o->json && !html_stdout)
        tw_report_write_json(stdout, report);
    else if (!html_stdout) {
        tw_report_write_text(stdout, report, tw_cli_colour(o->colour));
        tw_gpu_cost_write(&report->summary.gpu_cost, stdout); /* as run's summary says it */
    }
    if (o->html) {
        char title[256];
        html_title(title, sizeof title, inputs, count);
        if (tw_cli_write_report_html("analyze", o->html, report, run, title, NULL) != 0)
            status = TW_EXIT_USAGE;
    }
    if (o->templates && !o->json && !html_stdout)
        tw_run_write_templates(stdout, run);
    /* findings are worst first */
    if (status == TW_EXIT_OK && report->finding_count > 0 && report->findings[0].severity >= o->fail_on)
        status = TW_EXIT_PROBLEMS;
    return tw_cli_finish_stdout("analyze", "the report") == 0 ? status : TW_EXIT_USAGE;
}

static int analyze(analyze_options *o, char **inputs, int count)
{
    char err[600];
    if (o->html && o->in.records) {
        fprintf(stderr, "trainwatch analyze: --html and --records do not go together (records are not a report)\n");
        return TW_EXIT_USAGE;
    }
    if (o->html && strcmp(o->html, "-") != 0 && tw_outfile_check(o->html, err, sizeof err) != 0) {
        fprintf(stderr, "trainwatch analyze: --html %s\n", err);
        return TW_EXIT_USAGE;
    }
    if (o->cost.price_file && tw_cost_check_prices(o->cost.price_file, err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch analyze: %s\n", err);
        return TW_EXIT_USAGE;
    }
    tw_run *run = NULL;
    tw_analyze_tally tally;
    if (tw_run_new(&run, &o->th) != TW_OK || tw_analyze_read(run, inputs, count, &o->in, &tally) != TW_OK) {
        fprintf(stderr, "trainwatch: out of memory\n");
        tw_run_free(run);
        return TW_EXIT_USAGE;
    }
    int status = tally.failed ? TW_EXIT_USAGE : TW_EXIT_OK;
    if (o->in.records) {
        tw_run_free(run);
        return tw_cli_finish_stdout("analyze", "the records") == 0 ? status : TW_EXIT_USAGE;
    }
    tw_report *report = diagnosed(o, run);
    const tw_summary *sum = report ? &report->summary : NULL;
    bool nothing = sum && sum->step_records == 0 && sum->eval_records == 0 && sum->events == 0;
    if (report && !nothing)
        count_gpu_time(o, run, report);
    if (report && !(nothing && tally.failed == tally.inputs)) {
        if (!nothing)
            record_history(o, report, run, inputs); /* adds the baselines' findings */
        status = write_report(o, report, run, inputs, count, nothing ? TW_EXIT_USAGE : status);
    } else {
        status = TW_EXIT_USAGE;
    }
    tw_report_free(report);
    tw_run_free(run);
    return status;
}

static int run(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    analyze_options o = {.colour = -1, .fail_on = TW_SEV_ERROR, .launch = TW_LAUNCH_LAST};
    o.in.jobs = cores < 1 ? 1 : cores > TW_PARSE_JOBS_MAX ? TW_PARSE_JOBS_MAX : (int)cores;
    tw_thresholds_default(&o.th);
    int first = tw_analyze_parse_options(argc, argv, &o);
    return first < 0 ? TW_EXIT_USAGE : analyze(&o, argv + first, argc - first);
}

const tw_command tw_cmd_analyze = {
    .name = "analyze",
    .summary = "read training logs and diagnose the run, with evidence",
    .usage = tw_analyze_usage,
    .run = run,
};
