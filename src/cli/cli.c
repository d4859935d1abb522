/*
 * cli.c: what the subcommands share when reading their options.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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
