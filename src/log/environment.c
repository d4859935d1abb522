/*
 * environment.c: tw_log_environment(), the one INFO record a run starts
 * with: host, process, OS, CPUs and memory, the git state of the working
 * tree, ranks, CUDA_VISIBLE_DEVICES, the NVIDIA driver and GPUs (NVML,
 * dlopen'd as `trainwatch run` does: absent is fine), and what a binding
 * adds (Python, Paddle, CUDA, cuDNN versions).
 *
 * Git is read from the files under .git, with no git process: HEAD, the
 * ref (loose or packed-refs), and the index (versions 2 and 3), whose
 * entries are compared with the working tree by size and mtime, and by the
 * blob's SHA-1 when only the time differs. Like `git describe --dirty`,
 * untracked files do not make the tree dirty; staged changes not yet
 * committed are not seen (that needs the HEAD tree's objects).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "trainwatch/error.h"

#define EXTRA_MAX 32

static struct {
    char *name, *version;
} extras[EXTRA_MAX];
static size_t extra_count;
static pthread_mutex_t extras_lock = PTHREAD_MUTEX_INITIALIZER;

int tw_log_environment_add(const char *name, const char *version)
{
    if (!name || !version)
        return TW_EINVAL;
    pthread_mutex_lock(&extras_lock);
    int rc = TW_OK;
    if (extra_count == EXTRA_MAX)
        rc = TW_ELIMIT;
    else if (!(extras[extra_count].name = strdup(name)) || !(extras[extra_count].version = strdup(version))) {
        free(extras[extra_count].name);
        rc = TW_ENOMEM;
    } else
        extra_count++;
    pthread_mutex_unlock(&extras_lock);
    return rc;
}

/* ---- SHA-1 (for git blob ids) ---------------------------------------------- */

typedef struct sha1 {
    uint32_t h[5];
    uint64_t len;
    unsigned char block[64];
    size_t used;
} sha1;

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(sha1 *s, const unsigned char *p)
{
    uint32_t w[80], a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20)
            f = (b & c) | (~b & d), k = 0x5A827999;
        else if (i < 40)
            f = b ^ c ^ d, k = 0x6ED9EBA1;
        else if (i < 60)
            f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
        else
            f = b ^ c ^ d, k = 0xCA62C1D6;
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d, d = c, c = rol(b, 30), b = a, a = t;
    }
    s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e;
}

static void sha1_init(sha1 *s)
{
    *s = (sha1){{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0}, 0, {0}, 0};
}

static void sha1_update(sha1 *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->len += n;
    while (n > 0) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take, p += take, n -= take;
        if (s->used == 64) {
            sha1_block(s, s->block);
            s->used = 0;
        }
    }
}

static void sha1_final(sha1 *s, unsigned char out[20])
{
    uint64_t bits = s->len * 8;
    unsigned char pad = 0x80, zero = 0, len[8];
    sha1_update(s, &pad, 1);
    while (s->used != 56)
        sha1_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha1_update(s, len, 8);
    for (int i = 0; i < 20; i++)
        out[i] = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

/* ---- git ------------------------------------------------------------------------ */

typedef struct git_state {
    bool found;
    char commit[41], branch[256];
    int dirty; /* 1, 0, -1 unknown */
} git_state;

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *more = cap < ((size_t)256 << 20) ? realloc(buf, cap * 2 + 1) : NULL;
            if (!more) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = '\0';
}

/* The directory holding .git above cwd; .git may be a "gitdir:" file. */
static bool find_git(char *work, size_t work_len, char *gitdir, size_t gitdir_len)
{
    if (!getcwd(work, work_len))
        return false;
    for (;;) {
        char p[PATH_MAX + 8];
        struct stat st;
        snprintf(p, sizeof p, "%s/.git", work);
        if (stat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                snprintf(gitdir, gitdir_len, "%s", p);
                return true;
            }
            char *text = slurp(p, NULL);
            bool ok = text && strncmp(text, "gitdir: ", 8) == 0;
            if (ok) {
                trim(text);
                if (text[8] == '/')
                    snprintf(gitdir, gitdir_len, "%s", text + 8);
                else
                    snprintf(gitdir, gitdir_len, "%s/%s", work, text + 8);
            }
            free(text);
            return ok;
        }
        char *slash = strrchr(work, '/');
        if (!slash || slash == work)
            return false;
        *slash = '\0';
    }
}

/* A worktree's refs live in the main repository ("commondir"). */
static void common_dir(const char *gitdir, char *out, size_t cap)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/commondir", gitdir);
    char *text = slurp(p, NULL);
    if (!text) {
        snprintf(out, cap, "%s", gitdir);
        return;
    }
    trim(text);
    if (text[0] == '/')
        snprintf(out, cap, "%s", text);
    else
        snprintf(out, cap, "%s/%s", gitdir, text);
    free(text);
}

static void read_ref(const char *gitdir, const char *ref, char commit[41])
{
    char p[PATH_MAX * 4];
    snprintf(p, sizeof p, "%s/%s", gitdir, ref);
    char *own = slurp(p, NULL); /* a worktree's own HEAD-like refs */
    if (own) {
        trim(own);
        snprintf(commit, 41, "%.40s", own);
        free(own);
        return;
    }
    char common[PATH_MAX * 3];
    common_dir(gitdir, common, sizeof common);
    gitdir = common;
    snprintf(p, sizeof p, "%s/%s", gitdir, ref);
    char *text = slurp(p, NULL);
    if (text) {
        trim(text);
        snprintf(commit, 41, "%.40s", text);
        free(text);
        return;
    }
    snprintf(p, sizeof p, "%s/packed-refs", gitdir);
    text = slurp(p, NULL);
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (strlen(line) > 41 && line[40] == ' ' && strcmp(line + 41, ref) == 0) {
            snprintf(commit, 41, "%.40s", line);
            break;
        }
    }
    free(text);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool blob_matches(const char *path, off_t size, const unsigned char id[20])
{
    size_t n;
    char *data = slurp(path, &n);
    if (!data)
        return false;
    sha1 s;
    sha1_init(&s);
    char header[32];
    int h = snprintf(header, sizeof header, "blob %lld", (long long)size);
    sha1_update(&s, header, (size_t)h + 1);
    sha1_update(&s, data, n);
    free(data);
    unsigned char out[20];
    sha1_final(&s, out);
    return (off_t)n == size && memcmp(out, id, 20) == 0;
}

/* 1 dirty, 0 clean, -1 unknown (no index, version 4, corrupt). */
static int index_dirty(const char *work, const char *gitdir)
{
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/index", gitdir);
    size_t n;
    unsigned char *ix = (unsigned char *)slurp(p, &n);
    if (!ix)
        return -1;
    int result = -1;
    if (n < 12 || memcmp(ix, "DIRC", 4) != 0 || (be32(ix + 4) != 2 && be32(ix + 4) != 3))
        goto done;
    uint32_t count = be32(ix + 8);
    size_t at = 12;
    result = 0;
    for (uint32_t i = 0; i < count && result == 0; i++) {
        if (at + 62 > n) {
            result = -1;
            break;
        }
        const unsigned char *e = ix + at;
        uint32_t mtime = be32(e + 8), mtime_ns = be32(e + 12), mode = be32(e + 24), size = be32(e + 36);
        uint16_t flags = (uint16_t)(e[60] << 8 | e[61]);
        size_t header = 62 + ((flags & 0x4000) ? 2 : 0);
        const char *name = (const char *)e + header;
        size_t name_len = strnlen(name, n - at - header);
        if (at + header + name_len >= n) {
            result = -1;
            break;
        }
        at += (header + name_len + 8) & ~(size_t)7; /* NUL-padded to a multiple of 8 */
        if ((mode & 0170000) == 0160000)
            continue; /* a submodule: its own repository */
        char file[PATH_MAX * 2];
        snprintf(file, sizeof file, "%s/%s", work, name);
        struct stat st;
        if (lstat(file, &st) != 0 || (uint32_t)st.st_size != size) {
            result = 1;
            break;
        }
        if ((uint32_t)st.st_mtim.tv_sec == mtime && (uint32_t)st.st_mtim.tv_nsec == mtime_ns)
            continue;
        if (S_ISREG(st.st_mode) && !blob_matches(file, st.st_size, e + 40))
            result = 1;
    }
done:
    free(ix);
    return result;
}

static git_state read_git(void)
{
    git_state g = {.dirty = -1};
    char work[PATH_MAX], gitdir[PATH_MAX + 8];
    if (!find_git(work, sizeof work, gitdir, sizeof gitdir))
        return g;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/HEAD", gitdir);
    char *head = slurp(p, NULL);
    if (!head)
        return g;
    g.found = true;
    trim(head);
    if (strncmp(head, "ref: ", 5) == 0) {
        const char *ref = head + 5;
        snprintf(g.branch, sizeof g.branch, "%s", strncmp(ref, "refs/heads/", 11) == 0 ? ref + 11 : ref);
        read_ref(gitdir, ref, g.commit);
    } else {
        snprintf(g.commit, sizeof g.commit, "%.40s", head); /* detached */
    }
    free(head);
    g.dirty = index_dirty(work, gitdir);
    return g;
}

/* ---- NVML ------------------------------------------------------------------------- */

typedef struct gpu_info {
    char driver[80];
    char names[512];
    unsigned count;
} gpu_info;

static gpu_info read_nvml(void)
{
    gpu_info g = {{0}, {0}, 0};
    const char *library = getenv("TW_NVML_LIBRARY");
    void *lib = dlopen(library && *library ? library : "libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib)
        return g;
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*shutdown)(void) = (int (*)(void))dlsym(lib, "nvmlShutdown");
    int (*driver)(char *, unsigned) = (int (*)(char *, unsigned))dlsym(lib, "nvmlSystemGetDriverVersion");
    int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(lib, "nvmlDeviceGetCount_v2");
    int (*handle)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    int (*name)(void *, char *, unsigned) = (int (*)(void *, char *, unsigned))dlsym(lib, "nvmlDeviceGetName");
    if (init && shutdown && init() == 0) {
        if (driver)
            driver(g.driver, sizeof g.driver);
        if (count && handle && name && count(&g.count) == 0) {
            for (unsigned i = 0; i < g.count; i++) {
                void *dev;
                char n[96];
                if (handle(i, &dev) != 0 || name(dev, n, sizeof n) != 0)
                    continue;
                size_t used = strlen(g.names);
                snprintf(g.names + used, sizeof g.names - used, "%s%s", used ? ", " : "", n);
            }
        }
        shutdown();
    }
    dlclose(lib);
    return g;
}

/* ---- the record ------------------------------------------------------------------- */

static void read_argv(char *out, size_t cap)
{
    size_t n;
    char *raw = slurp("/proc/self/cmdline", &n);
    out[0] = '\0';
    if (!raw)
        return;
    for (size_t i = 0; i + 1 < n; i++) {
        if (raw[i] == '\0')
            raw[i] = ' ';
    }
    snprintf(out, cap, "%s", raw);
    free(raw);
}

static double process_start(void)
{
    char *stat = slurp("/proc/self/stat", NULL);
    char *close = stat ? strrchr(stat, ')') : NULL;
    double start = -1;
    unsigned long long ticks;
    /* field 22 (starttime) is the 20th after the command's ')' */
    if (close && sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                        &ticks) == 1) {
        struct sysinfo si;
        struct timespec now;
        if (sysinfo(&si) == 0 && clock_gettime(CLOCK_REALTIME, &now) == 0)
            start = (double)now.tv_sec - (double)si.uptime + (double)ticks / (double)sysconf(_SC_CLK_TCK);
    }
    free(stat);
    return start;
}

void tw_log_environment(tw_logger *l)
{
    tw_log_environment_as(l, NULL, __FILE__, __func__, __LINE__);
}

void tw_log_environment_as(tw_logger *l, const char *name, const char *file, const char *func, int line)
{
    if (!l)
        l = tw_logger_get(NULL);
    if (!tw_log_enabled(l, TW_LEVEL_INFO))
        return;
    const tw_log_process *proc = tw_log_process_info();
    char argv[2048], cwd[PATH_MAX] = "", user[64] = "", os[300] = "", start[40] = "";
    read_argv(argv, sizeof argv);
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = '\0';
    struct passwd pw, *found = NULL;
    char pwbuf[1024];
    if (getpwuid_r(getuid(), &pw, pwbuf, sizeof pwbuf, &found) == 0 && found)
        snprintf(user, sizeof user, "%s", pw.pw_name);
    struct utsname u;
    const char *kernel = "";
    if (uname(&u) == 0) {
        snprintf(os, sizeof os, "%s %s", u.sysname, u.machine);
        kernel = u.release;
    }
    double started = process_start();
    if (started > 0) {
        char b[40];
        tw_log_out o = {b, 0, sizeof b - 1, false};
        tw_log_clock_refresh((int64_t)(started * 1e9));
        tw_out_rfc3339(&o, (int64_t)(started * 1e9));
        b[o.len] = '\0';
        snprintf(start, sizeof start, "%s", b);
    }
    struct sysinfo si;
    int64_t memory = sysinfo(&si) == 0 ? (int64_t)si.totalram * (int64_t)si.mem_unit : -1;
    git_state git = read_git();
    gpu_info gpu = read_nvml();
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");

    tw_log_field f[24 + EXTRA_MAX];
    size_t n = 0;
    f[n++] = tw_field_str("host", proc->host);
    f[n++] = tw_field_int("pid", proc->pid);
    f[n++] = tw_field_str("argv", argv);
    f[n++] = tw_field_str("cwd", cwd);
    f[n++] = tw_field_str("user", user);
    f[n++] = tw_field_str("start_time", start);
    f[n++] = tw_field_str("os", os);
    f[n++] = tw_field_str("kernel", kernel);
    f[n++] = tw_field_int("cpus", sysconf(_SC_NPROCESSORS_ONLN));
    f[n++] = tw_field_int("memory_bytes", memory);
    if (git.found) {
        f[n++] = tw_field_str("git_commit", git.commit);
        f[n++] = tw_field_str("git_branch", git.branch[0] ? git.branch : "HEAD");
        if (git.dirty >= 0)
            f[n++] = tw_field_bool("git_dirty", git.dirty == 1);
    }
    f[n++] = tw_field_int("rank", proc->rank);
    f[n++] = tw_field_int("local_rank", proc->local_rank);
    f[n++] = tw_field_int("world_size", proc->world_size);
    if (cvd)
        f[n++] = tw_field_str("cuda_visible_devices", cvd);
    if (gpu.driver[0])
        f[n++] = tw_field_str("nvidia_driver", gpu.driver);
    if (gpu.count) {
        f[n++] = tw_field_int("gpu_count", gpu.count);
        f[n++] = tw_field_str("gpus", gpu.names);
    }
    pthread_mutex_lock(&extras_lock);
    for (size_t i = 0; i < extra_count; i++)
        f[n++] = tw_field_str(extras[i].name, extras[i].version);
    tw_log_write_as(l, name, TW_LEVEL_INFO, file, func, line, "environment", f, n);
    pthread_mutex_unlock(&extras_lock);
}
