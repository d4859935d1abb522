/*
 * cli.c: what the subcommands share when reading their options and
 * writing their reports.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/outfile.h"
#include "../core/say.h"
#include "../core/stream.h"
#include "trainwatch/error.h"

int tw_cli_number(const char *command, const char *flag, const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= 0)) {
        fprintf(stderr, "trainwatch %s: --%s needs a non-negative number, not '%s'\n", command, flag, arg);
        return -1;
    }
    *out = v;
    return 0;
}

int tw_cli_write_html(const char *command, const char *path, int (*write)(FILE *out, const void *arg), const void *arg)
{
    char err[600];
    if (strcmp(path, "-") == 0) {
        if (write(stdout, arg) != TW_OK) {
            tw_say(TW_SAY_ERROR, command, "--html -: out of memory");
            return -1;
        }
        if (tw_stream_flush(stdout) != TW_OK) {
            tw_say(TW_SAY_ERROR, command, "--html -: could not write to standard output: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
    tw_outfile out;
    if (tw_outfile_open(&out, path, err, sizeof err) != 0) {
        tw_say(TW_SAY_ERROR, command, "--html %s", err);
        return -1;
    }
    if (write(out.f, arg) != TW_OK) {
        tw_outfile_abort(&out);
        tw_say(TW_SAY_ERROR, command, "--html %s: out of memory", path);
        return -1;
    }
    if (tw_outfile_commit(&out, err, sizeof err) != 0) {
        tw_say(TW_SAY_ERROR, command, "--html %s", err);
        return -1;
    }
    return 0;
}
