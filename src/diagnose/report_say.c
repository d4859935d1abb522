/*
 * report_say.c: the report as trainwatch's own messages (core/say.h): one
 * per finding, at its severity, and one that sums it up. `run` with
 * --log.format logfmt or json keeps stderr to log lines only, so its
 * diagnosis goes there this way (--report FILE has all of it).
 */
#include "../core/say.h"
#include "trainwatch/analyze.h"

void tw_report_say(const tw_report *report, const char *command)
{
    static const tw_say_level level_of[] = {
        [TW_SEV_INFO] = TW_SAY_INFO, [TW_SEV_WARNING] = TW_SAY_WARN, [TW_SEV_ERROR] = TW_SAY_ERROR};
    for (int i = 0; i < report->finding_count; i++) {
        const tw_finding *f = &report->findings[i];
        const char *file = f->where.file;
        if (file)
            tw_say(level_of[f->severity], command, "finding %s: %s (rank %d, %s:%llu)", f->rule, f->title, f->rank,
                   file, (unsigned long long)f->where.line);
        else
            tw_say(level_of[f->severity], command, "finding %s: %s (rank %d)", f->rule, f->title, f->rank);
    }
    tw_say(report->healthy ? TW_SAY_INFO : TW_SAY_WARN, command, "diagnosis: %s, %d finding%s%s",
           report->healthy ? "healthy" : "not healthy", report->finding_count, report->finding_count == 1 ? "" : "s",
           report->finding_count ? " (--report FILE writes them with their evidence)" : "");
}
