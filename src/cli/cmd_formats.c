/*
 * cmd_formats.c: `trainwatch formats` lists the log formats analyze knows,
 * in detection order, straight from the parser's table.
 */
#include <stdio.h>

#include "cli.h"
#include "trainwatch/parse.h"

static int run(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "trainwatch formats: takes no arguments\n");
        return TW_EXIT_USAGE;
    }
    size_t n;
    const tw_format *const *table = tw_formats(&n);
    for (size_t i = 0; i < n; i++)
        printf("%-17s %s\n", tw_format_name(table[i]), tw_format_summary(table[i]));
    return TW_EXIT_OK;
}

const tw_command tw_cmd_formats = {
    .name = "formats",
    .summary = "list the log formats analyze recognises",
    .usage = "usage: trainwatch formats\n\nLists the log formats, in detection order; any name can be given to\n`analyze --format`.\n",
    .run = run,
};
