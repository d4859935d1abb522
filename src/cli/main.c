/*
 * main.c: trainwatch's entry point: looks the subcommand up in the table and
 * hands it argv. Also `help`, `--help` and `--version`.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef TW_VERSION
#define TW_VERSION "0.0.0"
#endif

static const tw_command *const commands[] = {
    &tw_cmd_analyze,
    &tw_cmd_formats,
    &tw_cmd_watch,
    &tw_cmd_run,
    &tw_cmd_rules,
    &tw_cmd_trace,
    &tw_cmd_grafana,
    &tw_cmd_prometheus_config,
    &tw_cmd_runs,
    &tw_cmd_compare,
};

#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static const tw_command *find(const char *name)
{
    for (size_t i = 0; i < COMMAND_COUNT; i++) {
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    }
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: trainwatch COMMAND [OPTIONS] [ARGS]\n\n"
                 "Observability for deep-learning training runs.\n\ncommands:\n");
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-17s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out, "  %-17s %s\n", "help", "show a command's options: trainwatch help COMMAND");
    fprintf(out, "\nexit status: 0 ok/healthy, 1 problems found, 2 bad usage or unreadable input\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return TW_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return TW_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("trainwatch %s\n", TW_VERSION);
        return TW_EXIT_OK;
    }
    if (strcmp(name, "help") == 0) {
        const tw_command *c = argc > 2 ? find(argv[2]) : NULL;
        if (argc > 2 && !c) {
            fprintf(stderr, "trainwatch: no command '%s'\n", argv[2]);
            return TW_EXIT_USAGE;
        }
        if (c)
            fputs(c->usage, stdout);
        else
            usage(stdout);
        return TW_EXIT_OK;
    }
    const tw_command *c = find(name);
    if (!c) {
        fprintf(stderr, "trainwatch: no command '%s' (see trainwatch --help)\n", name);
        return TW_EXIT_USAGE;
    }
    return c->run(argc - 1, argv + 1);
}
