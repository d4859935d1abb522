/*
 * inputs.c: what each input of an analysis is and which rank it stands
 * for. A GPU telemetry log is told from a training log by its first bytes;
 * a log's rank comes from its file name (workerlog.3, rank3) or its
 * torchrun log directory, else from the order of the files (see
 * tw_analyze_input_ranks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../parse/gpu_log.h"
#include "analyze_internal.h"
#include "trainwatch/error.h"
#include "trainwatch/parse.h"

tw_input_kind tw_analyze_input_kind(const char *path, const tw_analyze_input_options *o)
{
    size_t n = strlen(path);
    if (strcmp(path, "-") == 0 || (n > 3 && strcmp(path + n - 3, ".gz") == 0))
        return INPUT_LOG;
    FILE *f = fopen(path, "r");
    if (!f)
        return INPUT_LOG;  /* the parser says why */
    enum { HEAD = 65536 }; /* a --query-gpu header with every field is about 7 KB */
    char *head = malloc(HEAD);
    size_t got = head ? fread(head, 1, HEAD, f) : 0;
    fclose(f);
    tw_input_kind kind = INPUT_LOG;
    if (head && tw_gpu_log_detect(head, got))
        kind = INPUT_GPU;
    else if (head && o->gpu_columns && tw_gpu_log_headerless_fits(head, got, o->gpu_columns))
        kind = INPUT_GPU;
    else if (head && tw_gpu_log_headerless(head, got)) {
        kind = INPUT_GPU_UNREAD;
        fprintf(stderr,
                "trainwatch analyze: %s: a GPU log without its header (nvidia-smi --format=csv,noheader)%s: give "
                "its columns with --gpu-columns, the --query-gpu list that made it\n",
                path, o->gpu_columns ? " with another number of columns than --gpu-columns names" : "");
    }
    free(head);
    return kind;
}

/* Whether rank is among the n numbers of taken. */
static bool rank_taken(const int *taken, int n, int rank)
{
    for (int i = 0; i < n; i++) {
        if (taken[i] == rank)
            return true;
    }
    return false;
}

/* How many agents' (nodes') torchrun log directories the inputs come from. */
static int log_dir_nodes(char *const *paths, int count, const tw_input_kind *kind)
{
    int nodes = 0;
    for (int i = 0; i < count; i++) {
        size_t node, other;
        if (kind[i] != INPUT_LOG || tw_rank_from_log_dir(paths[i], &node) < 0)
            continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = kind[j] == INPUT_LOG && tw_rank_from_log_dir(paths[j], &other) >= 0 && other == node &&
                   strncmp(paths[i], paths[j], node) == 0;
        nodes += !seen;
    }
    return nodes;
}

/* The length of path's directory part ("" for a bare name: 0). */
static size_t dir_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) : 0;
}

/* The number a log input's file name gives (workerlog.3, rank3), not its
 * torchrun directory's (attempt_0/3/stderr.log); -1 when none. */
static int name_rank(const char *path, tw_input_kind kind)
{
    size_t node;
    return kind == INPUT_LOG && tw_rank_from_log_dir(path, &node) < 0 ? tw_rank_from_path(path) : -1;
}

/* A number two inputs' names give (by_name[i]) from different directories
 * (node0/log/workerlog.0 and node1/log/workerlog.0: Paddle writes
 * workerlog.N by local rank on each node), or -1; *a, *b: the two inputs. */
static int repeated_name_rank(char *const *paths, int count, const int *by_name, int *a, int *b)
{
    for (int i = 0; i < count; i++) {
        for (int j = 0; by_name[i] >= 0 && j < i; j++) {
            size_t dir = dir_len(paths[i]);
            bool same_dir = dir == dir_len(paths[j]) && strncmp(paths[i], paths[j], dir) == 0;
            if (by_name[j] == by_name[i] && !same_dir) {
                *a = j, *b = i;
                return by_name[i];
            }
        }
    }
    return -1;
}

/* The rank of each log input (ranks[i] for paths[i]): its name's
 * (workerlog.3, rank3), else its torchrun log directory's (attempt_0/3/
 * stderr.log) when every such input comes from one agent's directory. On
 * several nodes local ranks repeat and the path does not say which node is
 * which (its group_rank), so those are numbered like names without a rank:
 * in order, with the numbers no name took (a launcher's log among ranks'
 * logs must not take a rank's number). The same holds when two names in
 * different directories give one number (several nodes' workerlog.N): then
 * every input is numbered in order. A lone input keeps -1: the parser's
 * own hints decide. */
int tw_analyze_input_ranks(char *const *paths, int count, const tw_input_kind *kind, int files, int *ranks)
{
    int nodes = log_dir_nodes(paths, count, kind), taken = 0, a, b;
    for (int i = 0; i < count; i++)
        ranks[i] = name_rank(paths[i], kind[i]);
    int repeated = repeated_name_rank(paths, count, ranks, &a, &b);
    if (repeated >= 0)
        fprintf(stderr,
                "trainwatch analyze: %s and %s both name rank %d from different directories: on several nodes "
                "these numbers are local ranks, which repeat, so the inputs are numbered in the order given\n",
                paths[a], paths[b], repeated);
    int *named = malloc(sizeof *named * (size_t)(count + 1));
    if (!named)
        return TW_ENOMEM;
    if (nodes > 1)
        fprintf(stderr,
                "trainwatch analyze: the inputs come from the log directories of %d torchrun agents (nodes): "
                "their numbers are local ranks, which repeat from node to node, so the inputs are numbered in "
                "the order given\n",
                nodes);
    for (int i = 0; i < count; i++) {
        size_t node;
        int in_dir = kind[i] == INPUT_LOG ? tw_rank_from_log_dir(paths[i], &node) : -1;
        if (repeated >= 0 || (in_dir >= 0 && nodes > 1))
            ranks[i] = -1; /* numbered in order below */
        else if (in_dir >= 0)
            ranks[i] = in_dir;
        if (ranks[i] >= 0)
            named[taken++] = ranks[i];
    }
    for (int i = 0, next = 0; i < count && files > 1; i++) {
        if (kind[i] != INPUT_LOG || ranks[i] >= 0)
            continue;
        while (rank_taken(named, taken, next))
            next++;
        ranks[i] = next++;
    }
    free(named);
    return TW_OK;
}
