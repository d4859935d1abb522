/*
 * sdfile.c: this run's target in a shared file_sd_configs file (see
 * sdfile.h).
 *
 * The file is trainwatch's own format inside JSON: "[", one target group
 * per line, "]". Keeping one group to a line lets a writer keep the other
 * runs' groups verbatim without a JSON parser; a file in another shape is
 * refused rather than rewritten. The trade-off of flock: it is advisory, so
 * only trainwatch processes (or anything that takes FILE.lock) are kept out.
 */
#include "sdfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "../core/json.h"
#include "trainwatch/error.h"

#define PID_KEY  "\"__meta_trainwatch_pid\": \""
#define HOST_KEY "\"__meta_trainwatch_host\": "

typedef struct entries {
    char **lines; /* without the trailing comma and newline */
    size_t count, cap;
} entries;

static void entries_free(entries *e)
{
    for (size_t i = 0; i < e->count; i++)
        free(e->lines[i]);
    free(e->lines);
}

static int entries_add(entries *e, char *line)
{
    if (e->count == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 16;
        char **grown = realloc(e->lines, cap * sizeof *grown);
        if (!grown) {
            free(line);
            return TW_ENOMEM;
        }
        e->lines = grown;
        e->cap = cap;
    }
    e->lines[e->count++] = line;
    return TW_OK;
}

/* The JSON text of a string, malloc'd. */
static char *json_text(const char *s)
{
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    tw_json_cstring(f, s);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Whether another process's entry stays: it names no pid (written by
 * someone else), another host, or a process that is there. */
static bool keep_entry(const char *line, pid_t self, const char *host_json)
{
    const char *p = strstr(line, PID_KEY);
    if (!p)
        return true;
    long pid = strtol(p + strlen(PID_KEY), NULL, 10);
    const char *h = strstr(line, HOST_KEY);
    bool here = h && host_json && !strncmp(h + strlen(HOST_KEY), host_json, strlen(host_json));
    if (pid == (long)self && here)
        return false;
    if (!here || pid <= 0)
        return true;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* Reads the groups of the file that stay. A missing or empty file has none. */
static int read_entries(const char *path, pid_t self, const char *host_json, entries *out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return TW_OK;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return tw_status_from_errno(errno);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = TW_OK;
    unsigned lineno = 0;
    while (rc == TW_OK && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == ','))
            line[--n] = '\0';
        const char *t = line + strspn(line, " \t");
        if (!*t || !strcmp(t, "[") || !strcmp(t, "]") || !strcmp(t, "[]"))
            continue;
        if (*t != '{' || line[n - 1] != '}') {
            snprintf(err, errlen, "%s:%u: not a file trainwatch wrote (one target group per line expected)", path,
                     lineno);
            rc = TW_ECONFIG;
            break;
        }
        if (keep_entry(t, self, host_json)) {
            char *copy = strdup(t);
            rc = copy ? entries_add(out, copy) : TW_ENOMEM;
        }
    }
    if (rc == TW_OK && ferror(f)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = TW_EIO;
    }
    free(line);
    fclose(f);
    return rc;
}

/* Writes the groups to a temporary file beside path and renames it over. */
static int write_entries(const char *path, const entries *e, char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return tw_status_from_errno(errno);
    }
    fputs("[\n", f);
    for (size_t i = 0; i < e->count; i++)
        fprintf(f, "  %s%s\n", e->lines[i], i + 1 < e->count ? "," : "");
    fputs("]\n", f);
    bool ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    int saved = errno;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = false;
    }
    if (!ok) {
        snprintf(err, errlen, "%s: %s", path, strerror(saved ? saved : EIO));
        unlink(tmp);
        return TW_EIO;
    }
    return TW_OK;
}

/* The entry line of a target. */
static char *entry_line(const char *target, const tw_alert_label *labels, size_t n, pid_t pid, const char *host_json)
{
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputs("{\"targets\": [", f);
    tw_json_cstring(f, target);
    fprintf(f, "], \"labels\": {" PID_KEY "%ld\", " HOST_KEY "%s", (long)pid, host_json);
    for (size_t i = 0; i < n; i++) {
        fputs(", ", f);
        tw_json_cstring(f, labels[i].name);
        fputs(": ", f);
        tw_json_cstring(f, labels[i].value);
    }
    fputs("}}", f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Under FILE.lock: the file's groups that stay, plus line when given. */
static int rewrite(const char *path, pid_t pid, char *line, char *err, size_t errlen)
{
    char lock_path[4096], host[256] = "";
    snprintf(lock_path, sizeof lock_path, "%s.lock", path);
    gethostname(host, sizeof host - 1);
    char *host_json = json_text(host);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || !host_json) {
        snprintf(err, errlen, "%s: %s", lock_path, fd < 0 ? strerror(errno) : "out of memory");
        int rc = fd < 0 ? tw_status_from_errno(errno) : TW_ENOMEM;
        if (fd >= 0)
            close(fd);
        free(host_json);
        free(line);
        return rc;
    }
    int rc = TW_OK;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            snprintf(err, errlen, "%s: %s", lock_path, strerror(errno));
            rc = TW_EIO;
            break;
        }
    }
    entries e = {0};
    if (rc == TW_OK)
        rc = read_entries(path, pid, host_json, &e, err, errlen);
    if (rc == TW_OK && line) {
        rc = entries_add(&e, line);
        line = NULL;
    }
    if (rc == TW_OK)
        rc = write_entries(path, &e, err, errlen);
    entries_free(&e);
    free(line);
    free(host_json);
    close(fd); /* releases the lock */
    return rc;
}

int tw_sdfile_add(const char *path, const char *target, const tw_alert_label *labels, size_t label_count, pid_t pid,
                  char *err, size_t errlen)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char *host_json = json_text(host);
    char *line = host_json ? entry_line(target, labels, label_count, pid, host_json) : NULL;
    free(host_json);
    if (!line) {
        snprintf(err, errlen, "%s: out of memory", path);
        return TW_ENOMEM;
    }
    return rewrite(path, pid, line, err, errlen);
}

int tw_sdfile_remove(const char *path, pid_t pid, char *err, size_t errlen)
{
    return rewrite(path, pid, NULL, err, errlen);
}
