/*
 * log_demo.c: a short training run logged with libtrainwatch logging, the
 * way a train.py would: one setup call (console on rank 0, a rotating text
 * file and a JSON-lines file per rank), the environment record, steps with
 * typed fields, an evaluation, a secret that never reaches the log, and a
 * tensor logged by its shape only.
 *
 *   log-demo [--dir DIR] [--steps N] [--async]
 *
 * Then: trainwatch analyze DIR/train_rank_0.log (or .jsonl).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/log.h"

int main(int argc, char **argv)
{
    const char *dir = ".";
    int steps = 50;
    bool async = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--async") == 0)
            async = true;
        else {
            fprintf(stderr, "usage: log-demo [--dir DIR] [--steps N] [--async]\n");
            return 2;
        }
    }
    char text[4096], json[4096];
    snprintf(text, sizeof text, "%s/train_rank_{rank}.log", dir);
    snprintf(json, sizeof json, "%s/train_rank_{rank}.jsonl", dir);

    tw_log_options o = tw_log_options_default();
    o.file_path = text;
    o.json_path = json;
    o.async = async;
    int rc = tw_log_setup(&o); /* a file that cannot be opened is said on stderr; the run goes on */
    tw_log_environment_add("demo", "1.0");
    tw_log_environment(NULL);

    tw_logger *train = tw_logger_get("trainer"), *data = tw_logger_get("trainer.data");
    TW_LOG_INFO(data, "dataset ready", tw_field_str("url", "https://alice:s3cret@data.example.com/set"),
                tw_field_str("api_token", "tok-123"));
    int64_t shape[] = {32, 3, 224, 224};
    TW_LOG_DEBUG(data, "first batch", tw_log_summary("batch", "tensor float32", shape, 4, 32 * 3 * 224 * 224));
    double loss = 2.5;
    for (int step = 1; step <= steps; step++) {
        loss = loss * 0.97 + 0.01 * sin(step);
        if (step % 5 == 0)
            TW_LOG_INFO(train, "Step", tw_field_int("step", step), tw_field_double("loss", round(loss * 1e4) / 1e4),
                        tw_field_double("lr", 1e-3), tw_field_double("time", 0.42));
        if (step % 25 == 0)
            TW_LOG_INFO(train, "eval", tw_field_int("step", step), tw_field_double("accuracy", 0.5 + step / 200.0));
    }
    TW_LOG_WARNING(train, "training finished", tw_field_int("steps", steps));
    tw_log_flush();
    return rc == 0 ? 0 : 1;
}
