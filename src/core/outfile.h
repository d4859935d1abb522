/*
 * outfile.h: an output file written whole or not at all. The text goes to a
 * temporary file beside the target (same directory, so the rename is
 * atomic); tw_outfile_commit() checks every write, flushes to disk and
 * renames it into place, so a reader never sees a half-written or empty
 * report, and a full disk is an error the caller hears about.
 * tw_outfile_check() answers, before any work is done, whether the target
 * can be written at all (a report path that is wrong is said before a
 * training command starts, not hours later).
 *
 * Ownership: the tw_outfile is the caller's (on its stack); commit or abort
 * releases what open took.
 */
#ifndef TW_CORE_OUTFILE_H
#define TW_CORE_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct tw_outfile {
    FILE *f;    /* write here between open and commit */
    char *path; /* the target */
    char *tmp;  /* the temporary file */
} tw_outfile;

/* 0 when path could be created or replaced; else TW_E* and a one-line reason
 * naming path in err. */
int tw_outfile_check(const char *path, char *err, size_t errlen);
int tw_outfile_open(tw_outfile *o, const char *path, char *err, size_t errlen);
/* Closes and renames into place; on any failure removes the temporary file
 * and says why in err. */
int tw_outfile_commit(tw_outfile *o, char *err, size_t errlen);
void tw_outfile_abort(tw_outfile *o);

#endif
