/*
 * fuzz_actions.c: libFuzzer target for what the actions read from others
 * (src/actions/): the first line of the input is an action as configured
 * ('SELECTOR=ACTION', spec.c), the rest the replies file a training process
 * wrote (control.c: hellos and results, JSON lines, any bytes). The file
 * lives in a directory of this process's own under /tmp.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actions/actions_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/tw-fuzz-actions-XXXXXX";
static tw_control control;

static void clean_up(void)
{
    unlink(control.ack_path);
    rmdir(dir);
}

static void on_reply(void *arg, const char *action, const char *result, int rank, double step, unsigned long id,
                     const char *detail)
{
    size_t *n = arg;
    (void)rank, (void)step, (void)id;
    *n += strlen(action) + strlen(result) + strlen(detail);
}

static void parse_spec(const uint8_t *data, size_t size)
{
    char *spec = strndup((const char *)data, size);
    char err[512];
    tw_action *act;
    if (spec && tw_action_parse(spec, "fuzz", 1, &act, err, sizeof err) == 0)
        tw_action_free(act);
    free(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!control.ack_path[0]) {
        if (!mkdtemp(dir))
            abort();
        snprintf(control.ack_path, sizeof control.ack_path, "%s/requests.ack", dir);
        control.fd = STDERR_FILENO; /* a channel is open; nothing is written to it here */
        atexit(clean_up);
    }
    const uint8_t *nl = memchr(data, '\n', size);
    size_t first = nl ? (size_t)(nl - data) : size;
    parse_spec(data, first);
    FILE *f = fopen(control.ack_path, "wb");
    size_t rest = size - first - (nl != NULL);
    if (!f || fwrite(data + size - rest, 1, rest, f) != rest || fclose(f) != 0)
        abort();
    control.ack_fd = -1;
    control.ack_len = 0;
    control.proc_count = 0;
    size_t seen = 0;
    tw_control_read_replies(&control, on_reply, &seen);
    if (control.ack_fd >= 0)
        close(control.ack_fd);
    return 0;
}
