/*
 * rule_environment.c: the environment and configuration a log states
 * (framework and cuDNN versions, GPUs used, CUDA_VISIBLE_DEVICES, batch
 * size, workers, the git commit), compared across the ranks of a launch.
 * Which environment produced this model is a reproducibility question: a
 * rank with another version, commit or configuration than the others is
 * flagged. run.c keeps the facts per launch; launches.c compares launches.
 */
#include <string.h>

#include "diagnose.h"

static void check_ranks_differ(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->fact_count; i++) {
        const tw_fact *a = &run->facts[i];
        bool first = true;
        for (int j = 0; j < i; j++)
            first &= strcmp(run->facts[j].key, a->key) != 0;
        if (!first)
            continue; /* each key once, from its first value */
        for (int j = i + 1; j < run->fact_count; j++) {
            const tw_fact *b = &run->facts[j];
            if (strcmp(b->key, a->key) != 0 || b->rank == a->rank)
                continue;
            char w1[600], w2[600];
            tw_finding *f = tw_finding_add(out, "environment_differs", TW_SEV_WARNING,
                                           "Ranks differ in %s: %s on rank %d, %s on rank %d", a->key, a->value,
                                           a->rank, b->value, b->rank);
            if (!f)
                return;
            f->where = tw_run_source(run, b->file, b->line);
            f->rank = b->rank;
            tw_finding_evidence(f, "rank %d: %s %s (%s)", a->rank, a->key, a->value,
                                tw_where(run, a->file, a->line, w1, sizeof w1));
            tw_finding_evidence(f, "rank %d: %s %s (%s)", b->rank, b->key, b->value,
                                tw_where(run, b->file, b->line, w2, sizeof w2));
            tw_finding_recommend(f, "Every rank of a job should run the same code, versions and configuration: "
                                    "check the nodes' images and the files each rank read.");
            break;
        }
    }
}

const tw_rule tw_rule_environment_differs = {"environment_differs", "ranks of one launch in different environments",
                                             check_ranks_differ};
