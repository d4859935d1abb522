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
 *   --compute-ms MS         each step's kernels take MS (a sleep): step times
 *                           then are the simulated GPU's, not this CPU's load
 *   --lr-spike-at STEP      the learning rate jumps (x --lr-spike-factor) and
 *                           the loss overflows to NaN by itself
 *   --leak-mb MB            a buffer grows by MB every step (memory growth)
 *   --stall-at STEP         the step hangs for --stall-seconds
 *   --crash-at STEP         the step fails with an exception and exit 1
 *   --device-memory-mb MB   the simulated GPU's capacity (see below)
 *   --oom-at STEP           one oversized request (--oom-mb) at that step
 *   --bad-label-at STEP     a label outside the class range in that batch:
 *                           the loss's bounds check fails like a CUDA kernel
 *                           assertion, then the CUDA error 719 it causes
 *   --ignore-local-rank     every rank puts itself on GPU 0
 *   --device-pool DIR       the simulated GPUs are shared by processes
 *
 * The simulated GPU is a memory pool with a capacity: the parameters and
 * their gradients, each batch's activations (while the step runs), each
 * evaluation's batch, the --leak-mb buffers and the --oom-at request are
 * allocated in it, and an allocation that does not fit fails the way
 * Paddle's allocator does (MemoryError, then the Error Message Summary with
 * ResourceExhaustedError "Out of memory error on GPU N. Cannot allocate ...",
 * the sizes being the pool's own). With --device-pool DIR, processes on one
 * device index share one pool (DIR/gpuN, a table of PID and bytes under a
 * lock), so ranks put on one GPU exhaust it together. As several ranks
 * (PADDLE_TRAINERS_NUM > 1, rank PADDLE_TRAINER_ID, device FLAGS_selected_gpus
 * or PADDLE_LOCAL_RANK, as paddle.distributed.launch sets them) the program
 * prints Paddle's "init nccl context ... gpu id: N" line as it starts, and
 * Paddle's FatalError block when a SIGTERM stops it (the launcher's doing
 * when another rank failed).
 *
 * Memory is reported as max_mem_reserved (MB), the field PaddleOCR uses for
 * device memory: the pool's peak when --device-memory-mb is given, else the
 * process's resident memory from /proc/self/statm. Everything printed is
 * measured.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_DIM     256
#define MAX_CLASSES 32

typedef struct options {
    int epochs, steps_per_epoch, batch, dim, classes, log_interval;
    double lr;
    unsigned seed;
    double slow_reader_ms;
    double compute_ms; /* each step's simulated kernel time (a sleep) */
    long lr_spike_at;
    double lr_spike_factor;
    double leak_mb;
    long stall_at;
    double stall_seconds;
    long crash_at;
    double device_memory_mb; /* 0: not given (a 16 GiB device, memory read from statm) */
    long oom_at;
    double oom_mb; /* 0: the device's capacity */
    long bad_label_at;
    int ignore_local_rank;
    const char *device_pool; /* a folder: pools shared by processes; NULL: private */
    const char *log_path;
} options;

/* Where the process stands among the ranks of a job (Paddle's launcher). */
typedef struct placement {
    int rank, world, device;
} placement;

/* The simulated GPU: a capacity and what this process holds of it. A shared
 * pool is the file DIR/gpuN, one "PID BYTES" line per process, read and
 * written under flock. */
typedef struct device_pool {
    int device;
    double capacity, own, peak; /* bytes */
    int fd;                     /* the shared pool's file, -1: private */
} device_pool;

typedef struct model {
    float w[MAX_DIM][MAX_CLASSES];
    float b[MAX_CLASSES];
} model;

typedef struct dataset {
    int n, dim, classes;
    float *x; /* n x dim */
    int *y;
    float centers[MAX_CLASSES][MAX_DIM];
} dataset;

static unsigned long long rng_state;
static volatile sig_atomic_t terminated;    /* a SIGTERM came (caught as one of several ranks) */
static volatile sig_atomic_t terminated_by; /* from this PID */

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
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !terminated) {
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

/* ---- the simulated GPU ------------------------------------------------ */

/* Paddle's string::HumanReadableSize: "%f" and the unit, powers of 1024. */
static void human_size(double bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    size_t i = 0;
    while (bytes >= 1024 && i + 1 < sizeof units / sizeof units[0])
        bytes /= 1024, i++;
    snprintf(buf, cap, "%f%s", bytes, units[i]);
}

/* The other live processes' entries of the shared pool (dead ones dropped):
 * their bytes in all, and, when out is given, their lines copied into it
 * (*used bytes). */
static double pool_read_others(device_pool *d, pid_t self, char *out, size_t cap, size_t *used)
{
    char text[8192];
    ssize_t n = pread(d->fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    double others = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        long pid;
        double bytes;
        if (sscanf(line, "%ld %lf", &pid, &bytes) != 2 || pid == self || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
            continue;
        others += bytes;
        if (out && *used < cap)
            *used += (size_t)snprintf(out + *used, cap - *used, "%ld %.0f\n", pid, bytes);
    }
    return others;
}

static double pool_others(device_pool *d, pid_t self)
{
    return pool_read_others(d, self, NULL, 0, NULL);
}

/* Rewrites the shared pool with this process's entry set to own (0: gone). */
static void pool_write(device_pool *d, pid_t self, double own)
{
    char out[8192];
    size_t used = 0;
    pool_read_others(d, self, out, sizeof out, &used);
    if (own > 0 && used < sizeof out)
        used += (size_t)snprintf(out + used, sizeof out - used, "%ld %.0f\n", (long)self, own);
    if (used > sizeof out)
        used = sizeof out;
    if (ftruncate(d->fd, 0) != 0 || pwrite(d->fd, out, used, 0) != (ssize_t)used)
        fprintf(stderr, "demo-train: the device pool: %s\n", strerror(errno));
}

static int pool_open(device_pool *d, const options *o, int device)
{
    d->device = device;
    d->capacity = (o->device_memory_mb > 0 ? o->device_memory_mb : 16384) * 1024 * 1024;
    d->own = d->peak = 0;
    d->fd = -1;
    if (!o->device_pool)
        return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/gpu%d", o->device_pool, device);
    d->fd = open(path, O_RDWR | O_CREAT, 0644);
    if (d->fd < 0) {
        fprintf(stderr, "demo-train: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Takes bytes from the pool: 0, or -1 when they do not fit (*in_use: what
 * every process on the device holds then). */
static int pool_alloc(device_pool *d, double bytes, double *in_use)
{
    double others = 0;
    if (d->fd >= 0) {
        flock(d->fd, LOCK_EX);
        others = pool_others(d, getpid());
    }
    *in_use = others + d->own;
    int fits = others + d->own + bytes <= d->capacity;
    if (fits) {
        d->own += bytes;
        d->peak = d->own > d->peak ? d->own : d->peak;
        if (d->fd >= 0)
            pool_write(d, getpid(), d->own);
    }
    if (d->fd >= 0)
        flock(d->fd, LOCK_UN);
    return fits ? 0 : -1;
}

static void pool_free(device_pool *d, double bytes)
{
    d->own -= bytes;
    if (d->fd < 0)
        return;
    flock(d->fd, LOCK_EX);
    pool_write(d, getpid(), d->own);
    flock(d->fd, LOCK_UN);
}

/* The process is going: what it held on the device is the others' again. */
static void pool_close(device_pool *d)
{
    if (d->fd < 0)
        return;
    flock(d->fd, LOCK_EX);
    pool_write(d, getpid(), 0);
    flock(d->fd, LOCK_UN);
    close(d->fd);
    d->fd = -1;
}

/* What Paddle prints when its allocator cannot serve a request: the Python
 * traceback ending in MemoryError, then the Error Message Summary (the
 * default FLAGS_call_stack_level prints no C++ frames). "allocated" is the
 * process's own, "available" what the device has left. */
static void out_of_memory(FILE *log, device_pool *d, double bytes, double in_use, const char *where)
{
    char want[32], have[32], left[32];
    human_size(bytes, want, sizeof want);
    human_size(d->own, have, sizeof have);
    human_size(d->capacity - in_use, left, sizeof left);
    fprintf(log,
            "Traceback (most recent call last):\n"
            "  File \"tools/train.py\", line 227, in <module>\n"
            "    main(config, device, logger, vdl_writer)\n"
            "%s"
            "  File \"/usr/local/lib/python3.10/dist-packages/paddle/nn/layer/layers.py\", line 1254, in __call__\n"
            "    return self.forward(*inputs, **kwargs)\n"
            "MemoryError: \n\n"
            "----------------------\n"
            "Error Message Summary:\n"
            "----------------------\n"
            "ResourceExhaustedError: \n\n"
            "Out of memory error on GPU %d. Cannot allocate %s memory on GPU %d, %s memory has been allocated and "
            "available memory is only %s.\n\n"
            "Please check whether there is any other process using GPU %d.\n"
            "1. If yes, please stop them, or start PaddlePaddle on another GPU.\n"
            "2. If no, please decrease the batch size of your model. \n"
            " (at /paddle/paddle/fluid/memory/allocation/cuda_allocator.cc:86)\n",
            where, d->device, want, d->device, have, left, d->device);
    fflush(log);
    pool_close(d);
    exit(1);
}

/* Takes bytes from the device, or fails the run as Paddle does. */
static void device_take(FILE *log, device_pool *d, double bytes, const char *frames)
{
    double in_use;
    if (pool_alloc(d, bytes, &in_use) != 0)
        out_of_memory(log, d, bytes, in_use, frames);
}

/* The Python frames down to the model's call, in training and in evaluation. */
static const char train_frames[] = "  File \"tools/program.py\", line 301, in train\n"
                                   "    preds = model(images, data=batch[1:])\n";
static const char eval_frames[] = "  File \"tools/program.py\", line 355, in train\n"
                                  "    cur_metric = eval(model, valid_dataloader, post_process_class, eval_class)\n"
                                  "  File \"tools/program.py\", line 571, in eval\n"
                                  "    preds = model(images)\n";

/* ---- ranks ------------------------------------------------------------ */

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

/* As paddle.distributed.launch sets it: the rank, the world, and the GPU
 * (FLAGS_selected_gpus, else the local rank); a program that ignores them
 * puts every rank on GPU 0. */
static placement place(const options *o)
{
    placement p = {.rank = env_int("PADDLE_TRAINER_ID", 0), .world = env_int("PADDLE_TRAINERS_NUM", 1)};
    p.device = env_int("FLAGS_selected_gpus", env_int("PADDLE_LOCAL_RANK", env_int("LOCAL_RANK", 0)));
    if (o->ignore_local_rank || p.device < 0)
        p.device = 0;
    return p;
}

/* Paddle's collective start-up line, glog-style, as init_parallel_env prints it. */
static void say_placement(FILE *log, const placement *p)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%m%d %H:%M:%S", &tm);
    fprintf(log,
            "I%s.%06ld %5ld nccl_context.cc:74] init nccl context nranks: %d local rank: %d gpu id: %d ring id: 0\n",
            when, (long)tv.tv_usec, (long)getpid(), p->world, p->rank, p->device);
}

static void on_sigterm(int sig, siginfo_t *info, void *context)
{
    (void)sig, (void)context;
    terminated_by = info ? info->si_pid : 0;
    terminated = 1;
}

/* What Paddle's signal handler prints when the launcher stops a rank; then
 * the process dies of the signal, as Paddle's does. */
static void die_of_sigterm(FILE *log, device_pool *d)
{
    long long now_s = (long long)time(NULL);
    fprintf(log,
            "\n\n--------------------------------------\n"
            "C++ Traceback (most recent call last):\n"
            "--------------------------------------\n"
            "0   paddle::framework::SignalHandle(char const*, int)\n\n"
            "----------------------\n"
            "Error Message Summary:\n"
            "----------------------\n"
            "FatalError: `Termination signal` is detected by the operating system.\n"
            "  [TimeInfo: *** Aborted at %lld (unix time) try \"date -d @%lld\" if you are using GNU date ***]\n"
            "  [SignalInfo: *** SIGTERM (@0x%x) received by PID %ld (TID 0x%lx) from PID %d ***]\n\n",
            now_s, now_s, (unsigned)terminated_by, (long)getpid(), (unsigned long)pthread_self(), (int)terminated_by);
    fflush(log);
    pool_close(d);
    signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
    exit(143);
}

static void catch_sigterm(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigterm;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}

/* The loss reads p[label]: Paddle's cross-entropy kernel checks the label
 * first, and on the GPU a failed check is a device-side assertion, printed
 * by each thread that hit it, which the next CUDA call reports as error 719. */
static void check_labels(FILE *log, const options *o, const int *y, device_pool *d)
{
    int bad = 0;
    for (int i = 0; i < o->batch; i++) {
        if (y[i] >= 0 && y[i] < o->classes)
            continue;
        fprintf(
            log,
            "Error: /paddle/paddle/phi/kernels/gpu/cross_entropy_kernel.cu:1008 Assertion `false` failed. The value "
            "of label expected >= 0 and < %d, or == -100, but got %d. Please check label value.\n",
            o->classes, y[i]);
        bad++;
    }
    if (!bad)
        return;
    fprintf(log,
            "Traceback (most recent call last):\n"
            "  File \"tools/train.py\", line 227, in <module>\n"
            "    main(config, device, logger, vdl_writer)\n"
            "  File \"tools/program.py\", line 332, in train\n"
            "    stats = {k: float(v) if v.shape == [] else v.numpy().mean() for k, v in loss.items()}\n"
            "  File \"tools/program.py\", line 332, in <dictcomp>\n"
            "    stats = {k: float(v) if v.shape == [] else v.numpy().mean() for k, v in loss.items()}\n"
            "OSError: (External) CUDA error(719), unspecified launch failure. \n"
            "  [Hint: 'cudaErrorLaunchFailure'. An exception occurred on the device while executing a kernel. Common "
            "causes include dereferencing an invalid device pointer and accessing out of bounds shared memory. This "
            "leaves the process in an inconsistent state and any further CUDA work will return the same error. To "
            "continue using CUDA, the process must be terminated and relaunched.] (at "
            "/paddle/paddle/phi/backends/gpu/cuda/cuda_info.cc:259)\n\n");
    fflush(log);
    pool_close(d);
    exit(1);
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
            "                  [--seed N] [--log FILE] [--slow-reader MS] [--compute-ms MS] [--lr-spike-at STEP]\n"
            "                  [--lr-spike-factor F] [--leak-mb MB] [--stall-at STEP] [--stall-seconds S]\n"
            "                  [--crash-at STEP] [--device-memory-mb MB] [--oom-at STEP] [--oom-mb MB]\n"
            "                  [--bad-label-at STEP] [--ignore-local-rank] [--device-pool DIR]\n"
            "\n"
            "Faults, each a real effect of the training code:\n"
            "  --slow-reader MS        the data loader takes MS more per batch\n"
            "  --compute-ms MS         each step's kernels take MS (a sleep), so step times do not vary with load\n"
            "  --lr-spike-at STEP      the learning rate jumps x--lr-spike-factor (1000); the loss overflows to NaN\n"
            "  --leak-mb MB            MB more device memory kept every step (memory growth)\n"
            "  --stall-at STEP         the step hangs for --stall-seconds (5)\n"
            "  --crash-at STEP         the step raises an exception; exit 1\n"
            "  --device-memory-mb MB   the simulated GPU's capacity (16384); what does not fit fails as Paddle's\n"
            "                          out-of-memory error, exit 1; max_mem_reserved is then the GPU's peak\n"
            "  --oom-at STEP           one request of --oom-mb MB (default: the capacity) at STEP\n"
            "  --bad-label-at STEP     a label outside the classes at STEP: a CUDA-style assertion and error 719\n"
            "  --ignore-local-rank     as one of several ranks, put itself on GPU 0 (not FLAGS_selected_gpus)\n"
            "  --device-pool DIR       processes share each simulated GPU N (the file DIR/gpuN)\n"
            "As one of several ranks (PADDLE_TRAINERS_NUM > 1; PADDLE_TRAINER_ID, FLAGS_selected_gpus) it prints\n"
            "Paddle's \"init nccl context\" line first and Paddle's FatalError block when a SIGTERM stops it.\n");
}

static int parse_options(int argc, char **argv, options *o)
{
    // clang-format off
    static const struct option longopts[] = {
        {"epochs", 1, 0, 'e'},       {"steps-per-epoch", 1, 0, 's'}, {"batch", 1, 0, 'b'},
        {"lr", 1, 0, 'l'},           {"log-interval", 1, 0, 'i'},    {"seed", 1, 0, 'S'},
        {"log", 1, 0, 'o'},          {"slow-reader", 1, 0, 'r'},     {"lr-spike-at", 1, 0, 'n'},
        {"lr-spike-factor", 1, 0, 'f'}, {"leak-mb", 1, 0, 'm'},      {"stall-at", 1, 0, 't'},
        {"stall-seconds", 1, 0, 'T'}, {"crash-at", 1, 0, 'c'},       {"help", 0, 0, 'h'},
        {"device-memory-mb", 1, 0, 'M'}, {"oom-at", 1, 0, 'O'},      {"oom-mb", 1, 0, 'B'},
        {"bad-label-at", 1, 0, 'L'}, {"ignore-local-rank", 0, 0, 'g'}, {"device-pool", 1, 0, 'P'},
        {"compute-ms", 1, 0, 'C'},
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
        case 'C': o->compute_ms = atof(optarg); break;
        case 'n': o->lr_spike_at = atol(optarg); break;
        case 'f': o->lr_spike_factor = atof(optarg); break;
        case 'm': o->leak_mb = atof(optarg); break;
        case 't': o->stall_at = atol(optarg); break;
        case 'T': o->stall_seconds = atof(optarg); break;
        case 'c': o->crash_at = atol(optarg); break;
        case 'M': o->device_memory_mb = atof(optarg); break;
        case 'O': o->oom_at = atol(optarg); break;
        case 'B': o->oom_mb = atof(optarg); break;
        case 'L': o->bad_label_at = atol(optarg); break;
        case 'g': o->ignore_local_rank = 1; break;
        case 'P': o->device_pool = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    // clang-format on
    if (o->epochs < 1 || o->steps_per_epoch < 1 || o->batch < 1 || o->batch > 4096 || o->log_interval < 1) {
        fprintf(stderr, "demo-train: epochs, steps-per-epoch, batch (<=4096) and log-interval must be positive\n");
        return -1;
    }
    if (o->device_memory_mb < 0 || o->oom_mb < 0) {
        fprintf(stderr, "demo-train: --device-memory-mb and --oom-mb must not be negative\n");
        return -1;
    }
    return 0;
}

static void crash(FILE *log, long step)
{
    /* What a Python trainer prints when a step raises. */
    fprintf(log,
            "Traceback (most recent call last):\n"
            "  File \"tools/train.py\", line 227, in <module>\n"
            "    main(config, device, logger, vdl_writer)\n"
            "  File \"tools/program.py\", line 301, in train\n"
            "    preds = model(images, data=batch[1:])\n"
            "RuntimeError: (PreconditionNotMet) demo-train: simulated failure in step %ld\n",
            step);
    fflush(log);
    exit(1);
}

int main(int argc, char **argv)
{
    options o = {.epochs = 5,
                 .steps_per_epoch = 100,
                 .batch = 128,
                 .dim = 256,
                 .classes = 32,
                 .log_interval = 10,
                 .lr = 0.1,
                 .seed = 7,
                 .lr_spike_factor = 1000,
                 .stall_seconds = 5};
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
    placement where = place(&o);
    device_pool gpu;
    if (pool_open(&gpu, &o, where.device) != 0)
        return 2;
    if (where.world > 1) {
        catch_sigterm();
        say_placement(log, &where);
    }
    /* on the device for the whole run: the parameters and their gradients */
    device_take(log, &gpu, 2.0 * (o.dim * o.classes + o.classes) * sizeof(float), train_frames);
    /* for one step: the batch, its logits and probabilities */
    double activations = ((double)o.batch * o.dim + 2.0 * o.batch * o.classes) * sizeof(float);
    double eval_batch = ((double)eval.n * eval.dim + (double)eval.n * eval.classes) * sizeof(float);
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
            if (terminated)
                die_of_sigterm(log, &gpu);
            if (o.bad_label_at && step == o.bad_label_at)
                y[step % o.batch] = o.classes; /* labels 1..C where 0..C-1 are meant */
            check_labels(log, &o, y, &gpu);
            if (o.stall_at && step == o.stall_at)
                sleep_seconds(o.stall_seconds);
            double lr = o.lr * (o.lr_spike_at && step >= o.lr_spike_at ? o.lr_spike_factor : 1);
            int correct;
            device_take(log, &gpu, activations, train_frames);
            if (o.oom_at && step == o.oom_at) { /* one oversized tensor, freed with the step's */
                double big = (o.oom_mb > 0 ? o.oom_mb * 1024 * 1024 : gpu.capacity);
                device_take(log, &gpu, big, train_frames);
                pool_free(&gpu, big);
            }
            loss_sum += train_step(m, &o, x, y, lr, &correct);
            sleep_seconds(o.compute_ms / 1000.0);
            pool_free(&gpu, activations);
            correct_sum += correct;
            seen += o.batch;
            if (o.leak_mb > 0) {
                char **grown = realloc(leaks, sizeof *leaks * (leak_count + 1));
                size_t bytes = (size_t)(o.leak_mb * 1024 * 1024);
                device_take(log, &gpu, (double)bytes, train_frames);
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
                        reader_sum / o.log_interval, avg_batch, (double)o.batch, o.batch / avg_batch, (int)(eta / 3600),
                        (int)fmod(eta / 60, 60), (int)fmod(eta, 60),
                        o.device_memory_mb > 0 ? gpu.peak / (1024.0 * 1024.0) : rss_mb());
                reader_sum = batch_sum = loss_sum = 0;
                correct_sum = seen = 0;
            }
        }
        device_take(log, &gpu, eval_batch, eval_frames);
        double acc = evaluate(m, &eval);
        pool_free(&gpu, eval_batch);
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
    pool_close(&gpu);
    if (log != stdout)
        fclose(log);
    return 0;
}
