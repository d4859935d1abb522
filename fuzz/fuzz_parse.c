/*
 * fuzz_parse.c: libFuzzer target for the log parsers.
 *
 * Built once per format (TW_FUZZ_FORMAT names it: the parser is forced to
 * that format) and once without (auto-detection over the whole table, with
 * the records fed through the diagnosis rules, and the lines no format read
 * through the template miner). The input is fed as a whole
 * file: line splitting, long lines and multi-line blocks are all in play.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "trainwatch/analyze.h"
#include "trainwatch/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const tw_format *format = NULL;
#ifdef TW_FUZZ_FORMAT
    format = tw_format_find(TW_FUZZ_FORMAT);
    if (!format)
        abort();
#endif
    tw_parser *p;
    tw_run *run;
    if (tw_parser_new(&p, "fuzz.log", format, -1) != 0)
        return 0;
    if (tw_run_new(&run, NULL) != 0) {
        tw_parser_close(p);
        return 0;
    }
#ifndef TW_FUZZ_FORMAT
    tw_parser_set_unparsed(p, true);
#endif
    tw_parser_feed(p, (const char *)data, size, tw_run_add, run);
#ifndef TW_FUZZ_FORMAT
    tw_thresholds t;
    tw_thresholds_default(&t);
    tw_report *report;
    if (tw_diagnose(run, &t, &report) == 0) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            tw_report_write_json(null, report);
            tw_report_write_text(null, report, true);
            tw_run_write_templates(null, run);
            fclose(null);
        }
        tw_report_free(report);
    }
#endif
    tw_run_free(run);
    tw_parser_close(p);
    return 0;
}
