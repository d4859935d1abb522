/*
 * sdfile.h: this run's target in a Prometheus file_sd_configs file shared
 * by every run on a node (--sd-file).
 *
 * The file is a JSON array of target groups, one per line, each with the
 * target (host:port) and its labels (run, rank, host) plus
 * __meta_trainwatch_pid, which Prometheus drops after relabeling and
 * trainwatch reads to remove the entries of processes that are gone. Every
 * change takes an exclusive flock on FILE.lock, reads the file, drops this
 * process's entry and those of dead processes on this host, and writes the
 * result to a temporary file renamed over FILE, so a reader (Prometheus
 * watches the directory) never sees half a file.
 */
#ifndef TW_SUPERVISE_SDFILE_H
#define TW_SUPERVISE_SDFILE_H

#include <stddef.h>
#include <sys/types.h>

#include "trainwatch/rules.h"

/* Adds (or replaces) pid's entry: target with labels. On failure returns a
 * TW_E* code and writes a one-line reason naming the file into err. */
int tw_sdfile_add(const char *path, const char *target, const tw_alert_label *labels, size_t label_count, pid_t pid,
                  char *err, size_t errlen);
/* Removes pid's entry (and dead processes' entries). */
int tw_sdfile_remove(const char *path, pid_t pid, char *err, size_t errlen);

#endif
