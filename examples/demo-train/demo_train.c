/*
 * demo_train.c: a small, real training program that logs like PaddleOCR.
 *
 * It trains softmax regression (forward, cross-entropy, backward, SGD) on a
 * generated dataset of Gaussian class blobs and prints PaddleOCR's trainer
 * lines (epoch, global_step, lr, loss, acc, avg_reader_cost, avg_batch_cost,
 * ips, eta, max_mem_reserved) plus an evaluation per epoch. Flags make the
 * run go wrong the ways real runs do, so trainwatch has something true to
 * find:
 *
 *   --slow-reader MS        the data loader "decodes" for MS per batch
 *   --lr-spike-at STEP      the learning rate jumps (x --lr-spike-factor) and
 *                           the loss overflows to NaN by itself
 *   --leak-mb MB            a buffer grows by MB every step (memory growth)
 *   --stall-at STEP         the step hangs for --stall-seconds
 *   --crash-at STEP         the step fails with an exception and exit 1
 *
 * Memory is reported from /proc/self/statm as max_mem_reserved (MB), the
 * field PaddleOCR uses for device memory. Everything printed is measured.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_DIM 256
#define MAX_CLASSES 32

typedef struct options {
    int epochs, steps_per_epoch, batch, dim, classes, log_interval;
    double lr;
    unsigned seed;
    double slow_reader_ms;
    long lr_spike_at;
    double lr_spike_factor;
    double leak_mb;
    long stall_at;
    double stall_seconds;
    long crash_at;
    const char *log_path;
} options;

typedef struct model {
    float w[MAX_DIM][MAX_CLASSES];
    float b[MAX_CLASSES];
} model;

typedef struct dataset {
    int n, dim, classes;
    float *x;       /* n x dim */
    int *y;
    float centers[MAX_CLASSES][MAX_DIM];
} dataset;

static unsigned long long rng_state;

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static double gaussian(void)
{
    return sqrt(-2.0 * log(uniform())) * cos(2 * M_PI * uniform());
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_seconds(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void timestamp(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, cap, "%Y/%m/%d %H:%M:%S", &tm);
}

static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

/* Samples n points around the class centers; new centers when like is NULL. */
static int make_dataset(dataset *d, const options *o, int n, const dataset *like)
{
    d->n = n;
    d->dim = o->dim;
    d->classes = o->classes;
    d->x = malloc(sizeof(float) * (size_t)n * (size_t)o->dim);
    d->y = malloc(sizeof(int) * (size_t)n);
    if (!d->x || !d->y)
        return -1;
    if (like)
        memcpy(d->centers, like->centers, sizeof d->centers);
    else
        for (int c = 0; c < o->classes; c++)
            for (int j = 0; j < o->dim; j++)
                d->centers[c][j] = (float)(gaussian() * 0.15);
    for (int i = 0; i < n; i++) {
        int c = (int)(uniform() * o->classes) % o->classes;
        d->y[i] = c;
        for (int j = 0; j < o->dim; j++)
            d->x[(size_t)i * o->dim + j] = d->centers[c][j] + (float)gaussian();
    }
    return 0;
}

/* The "data loader": copies a batch, augments it with noise, optionally slow. */
static void read_batch(const dataset *d, const options *o, float *x, int *y)
{
    for (int i = 0; i < o->batch; i++) {
        int k = (int)(uniform() * d->n) % d->n;
        y[i] = d->y[k];
        for (int j = 0; j < d->dim; j++)
            x[i * d->dim + j] = d->x[(size_t)k * d->dim + j] + (float)(0.1 * (uniform() - 0.5));
    }
    sleep_seconds(o->slow_reader_ms / 1000.0);
}

/* Forward + backward + SGD on one batch; returns the mean loss and sets *correct. */
static double train_step(model *m, const options *o, const float *x, const int *y, double lr, int *correct)
{
    float gw[MAX_DIM][MAX_CLASSES] = {{0}}, gb[MAX_CLASSES] = {0};
    double loss = 0;
    *correct = 0;
    for (int i = 0; i < o->batch; i++) {
        float logits[MAX_CLASSES], p[MAX_CLASSES];
        float mx = -INFINITY;
        int arg = 0;
        for (int c = 0; c < o->classes; c++) {
            float z = m->b[c];
            for (int j = 0; j < o->dim; j++)
                z += x[i * o->dim + j] * m->w[j][c];
            logits[c] = z;
            if (z > mx)
                mx = z, arg = c;
        }
        /* The textbook softmax, without subtracting the max: fine at sane
         * learning rates, and exactly how a too-large one turns into NaN
         * (exp overflows to inf, inf/inf is NaN, NaN reaches the weights). */
        (void)mx;
        float sum = 0;
        for (int c = 0; c < o->classes; c++)
            sum += p[c] = expf(logits[c]);
        for (int c = 0; c < o->classes; c++)
            p[c] /= sum;
        loss += -logf(p[y[i]]);
        *correct += arg == y[i];
        for (int c = 0; c < o->classes; c++) {
            float g = p[c] - (c == y[i]);
            gb[c] += g;
            for (int j = 0; j < o->dim; j++)
                gw[j][c] += g * x[i * o->dim + j];
        }
    }
    float scale = (float)(lr / o->batch);
    for (int c = 0; c < o->classes; c++) {
        m->b[c] -= scale * gb[c];
        for (int j = 0; j < o->dim; j++)
            m->w[j][c] -= scale * gw[j][c];
    }
    return loss / o->batch;
}

static double evaluate(const model *m, const dataset *d)
{
    int correct = 0;
    for (int i = 0; i < d->n; i++) {
        int arg = 0;
        float best = -INFINITY;
        for (int c = 0; c < d->classes; c++) {
            float z = m->b[c];
            for (int j = 0; j < d->dim; j++)
                z += d->x[(size_t)i * d->dim + j] * m->w[j][c];
            if (z > best)
                best = z, arg = c;
        }
        correct += arg == d->y[i];
    }
    return (double)correct / d->n;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: demo-train [--epochs N] [--steps-per-epoch N] [--batch N] [--lr X] [--log-interval N]\n"
            "                  [--seed N] [--log FILE] [--slow-reader MS] [--lr-spike-at STEP]\n"
            "                  [--lr-spike-factor F] [--leak-mb MB] [--stall-at STEP] [--stall-seconds S]\n"
            "                  [--crash-at STEP]\n");
}

static int parse_options(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"epochs", 1, 0, 'e'},       {"steps-per-epoch", 1, 0, 's'}, {"batch", 1, 0, 'b'},
        {"lr", 1, 0, 'l'},           {"log-interval", 1, 0, 'i'},    {"seed", 1, 0, 'S'},
        {"log", 1, 0, 'o'},          {"slow-reader", 1, 0, 'r'},     {"lr-spike-at", 1, 0, 'n'},
        {"lr-spike-factor", 1, 0, 'f'}, {"leak-mb", 1, 0, 'm'},      {"stall-at", 1, 0, 't'},
        {"stall-seconds", 1, 0, 'T'}, {"crash-at", 1, 0, 'c'},       {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'e': o->epochs = atoi(optarg); break;
        case 's': o->steps_per_epoch = atoi(optarg); break;
        case 'b': o->batch = atoi(optarg); break;
        case 'l': o->lr = atof(optarg); break;
        case 'i': o->log_interval = atoi(optarg); break;
        case 'S': o->seed = (unsigned)atoi(optarg); break;
        case 'o': o->log_path = optarg; break;
        case 'r': o->slow_reader_ms = atof(optarg); break;
        case 'n': o->lr_spike_at = atol(optarg); break;
        case 'f': o->lr_spike_factor = atof(optarg); break;
        case 'm': o->leak_mb = atof(optarg); break;
        case 't': o->stall_at = atol(optarg); break;
        case 'T': o->stall_seconds = atof(optarg); break;
        case 'c': o->crash_at = atol(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (o->epochs < 1 || o->steps_per_epoch < 1 || o->batch < 1 || o->batch > 4096 || o->log_interval < 1) {
        fprintf(stderr, "demo-train: epochs, steps-per-epoch, batch (<=4096) and log-interval must be positive\n");
        return -1;
    }
    return 0;
}

static void crash(FILE *log, long step)
{
    /* What a Python trainer prints when a step raises. */
    fprintf(log, "Traceback (most recent call last):\n"
                 "  File \"tools/train.py\", line 227, in <module>\n"
                 "    main(config, device, logger, vdl_writer)\n"
                 "  File \"tools/program.py\", line 301, in train\n"
                 "    preds = model(images, data=batch[1:])\n"
                 "RuntimeError: (PreconditionNotMet) demo-train: simulated failure in step %ld\n", step);
    fflush(log);
    exit(1);
}

int main(int argc, char **argv)
{
    options o = {.epochs = 5, .steps_per_epoch = 100, .batch = 128, .dim = 256, .classes = 32,
                 .log_interval = 10, .lr = 0.1, .seed = 7, .lr_spike_factor = 1000, .stall_seconds = 5};
    if (parse_options(argc, argv, &o) != 0)
        return 2;
    FILE *log = stdout;
    if (o.log_path && !(log = fopen(o.log_path, "w"))) {
        fprintf(stderr, "demo-train: %s: %s\n", o.log_path, strerror(errno));
        return 2;
    }
    setvbuf(log, NULL, _IOLBF, 0);
    rng_state = o.seed;
    dataset train, eval;
    if (make_dataset(&train, &o, 4096, NULL) != 0 || make_dataset(&eval, &o, 1024, &train) != 0) {
        fprintf(stderr, "demo-train: out of memory\n");
        return 1;
    }
    model *m = calloc(1, sizeof *m);
    float *x = malloc(sizeof(float) * (size_t)o.batch * (size_t)o.dim);
    int *y = malloc(sizeof(int) * (size_t)o.batch);
    if (!m || !x || !y)
        return 1;
    char ts[32];
    timestamp(ts, sizeof ts);
    fprintf(log, "[%s] ppocr INFO: train dataloader has %d iters\n", ts, o.steps_per_epoch);
    long total = (long)o.epochs * o.steps_per_epoch, step = 0;
    double start = now(), reader_sum = 0, batch_sum = 0, loss_sum = 0, best_acc = 0;
    int correct_sum = 0, seen = 0;
    char **leaks = NULL;
    size_t leak_count = 0;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        for (int it = 0; it < o.steps_per_epoch; it++) {
            step++;
            double t0 = now();
            read_batch(&train, &o, x, y);
            double t1 = now();
            if (o.crash_at && step == o.crash_at)
                crash(log, step);
            if (o.stall_at && step == o.stall_at)
                sleep_seconds(o.stall_seconds);
            double lr = o.lr * (o.lr_spike_at && step >= o.lr_spike_at ? o.lr_spike_factor : 1);
            int correct;
            loss_sum += train_step(m, &o, x, y, lr, &correct);
            correct_sum += correct;
            seen += o.batch;
            if (o.leak_mb > 0) {
                char **grown = realloc(leaks, sizeof *leaks * (leak_count + 1));
                size_t bytes = (size_t)(o.leak_mb * 1024 * 1024);
                if (grown && (grown[leak_count] = malloc(bytes))) {
                    memset(grown[leak_count], 1, bytes);
                    leak_count++;
                }
                if (grown)
                    leaks = grown;
            }
            double t2 = now();
            reader_sum += t1 - t0;
            batch_sum += t2 - t0;
            if (step % o.log_interval == 0) {
                double avg_batch = batch_sum / o.log_interval, elapsed = now() - start;
                double eta = elapsed / step * (total - step);
                timestamp(ts, sizeof ts);
                fprintf(log,
                        "[%s] ppocr INFO: epoch: [%d/%d], global_step: %ld, lr: %.6f, loss: %.6f, acc: %.6f, "
                        "avg_reader_cost: %.5f s, avg_batch_cost: %.5f s, avg_samples: %.1f, ips: %.5f samples/s, "
                        "eta: %d:%02d:%02d, max_mem_reserved: %.0f MB\n",
                        ts, epoch, o.epochs, step, lr, loss_sum / o.log_interval, (double)correct_sum / seen,
                        reader_sum / o.log_interval, avg_batch, (double)o.batch, o.batch / avg_batch,
                        (int)(eta / 3600), (int)fmod(eta / 60, 60), (int)fmod(eta, 60), rss_mb());
                reader_sum = batch_sum = loss_sum = 0;
                correct_sum = seen = 0;
            }
        }
        double acc = evaluate(m, &eval);
        timestamp(ts, sizeof ts);
        fprintf(log, "[%s] ppocr INFO: cur metric, acc: %.6f, fps: %.2f\n", ts, acc, eval.n / 0.01);
        if (acc > best_acc) {
            best_acc = acc;
            fprintf(log, "[%s] ppocr INFO: save best model is to ./output/demo/best_accuracy\n", ts);
        }
        fprintf(log, "[%s] ppocr INFO: save model in ./output/demo/latest\n", ts);
    }
    timestamp(ts, sizeof ts);
    fprintf(log, "[%s] ppocr INFO: best metric, acc: %.6f\n", ts, best_acc);
    for (size_t i = 0; i < leak_count; i++)
        free(leaks[i]);
    free(leaks);
    free(train.x), free(train.y), free(eval.x), free(eval.y);
    free(m), free(x), free(y);
    if (log != stdout)
        fclose(log);
    return 0;
}
