/*
 * parser.c: the driver between raw input and the format table.
 *
 * It reads through zlib (so .gz and plain files share one path), splits the
 * stream into lines with memchr, cuts lines longer than TW_LINE_MAX (counting
 * them), splits progress-bar rewrites on '\r' and '\b', strips ANSI colour
 * codes, recognises a leading timestamp once for every format, and dispatches
 * each line: always-on formats first, then the locked format, then detection
 * over the whole table. Memory is one fixed buffer per input plus each
 * format's private state, whatever the size of the log. tw_parser_run()
 * hands a large plain file with jobs > 1 to parallel.c, which reads it in
 * blocks with parsers of its own and the same results.
 */
#include "trainwatch/parse.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "keywords.h"
#include "formats.h"
#include "parser.h"
#include "scan.h"
#include "trainwatch/error.h"

const char *tw_parser_path(const tw_parser *p) { return p->path; }
const tw_parse_stats *tw_parser_stats(const tw_parser *p) { return &p->stats; }
void tw_parser_set_unparsed(tw_parser *p, bool on) { p->unparsed = on; }

uint64_t tw_parser_progress(const tw_parser *p)
{
    return atomic_load_explicit(&((tw_parser *)p)->progress, memory_order_relaxed);
}

int tw_rank_from_path(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    static const char *const markers[] = {"workerlog.", "rank", "worker_", "worker."};
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++) {
        const char *m = tw_find_ci(base, len, markers[i]);
        if (!m)
            continue;
        const char *d = m + strlen(markers[i]);
        while (*d == '-' || *d == '_' || *d == '.')
            d++;
        long long v;
        if (tw_scan_uint(d, base + len, &v) && tw_rank_value(v) >= 0)
            return tw_rank_value(v);
    }
    size_t node;
    return tw_rank_from_log_dir(path, &node);
}

/* The path component ending at end (exclusive) and its start. */
static const char *component_before(const char *path, const char *end)
{
    const char *s = end;
    while (s > path && s[-1] != '/')
        s--;
    return s;
}

int tw_rank_from_log_dir(const char *path, size_t *node)
{
    const char *base = component_before(path, path + strlen(path));
    if (strcmp(base, "stdout.log") != 0 && strcmp(base, "stderr.log") != 0)
        return -1;
    if (base == path)
        return -1;
    const char *rank_end = base - 1, *rank = component_before(path, rank_end);
    long long v;
    if (rank == rank_end || tw_scan_uint(rank, rank_end, &v) != (size_t)(rank_end - rank) || tw_rank_value(v) < 0 ||
        rank == path)
        return -1;
    const char *attempt_end = rank - 1, *attempt = component_before(path, attempt_end);
    long long n;
    size_t prefix = strlen("attempt_");
    if ((size_t)(attempt_end - attempt) <= prefix || strncmp(attempt, "attempt_", prefix) != 0 ||
        tw_scan_uint(attempt + prefix, attempt_end, &n) != (size_t)(attempt_end - attempt - prefix))
        return -1;
    *node = attempt > path ? (size_t)(attempt - 1 - path) : 0;
    return tw_rank_value(v);
}


int tw_parser_new(tw_parser **out, const char *name, const tw_format *forced, int rank)
{
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    tw_parser *p = calloc(1, sizeof *p);
    if (!p)
        return TW_ENOMEM;
    p->path = strdup(name);
    p->states = calloc(count, sizeof *p->states);
    p->scratch = malloc(TW_LINE_MAX + 1);
    p->buf = malloc(BUFFER_SIZE);
    if (!p->path || !p->states || !p->scratch || !p->buf) {
        tw_parser_close(p);
        return TW_ENOMEM;
    }
    for (size_t i = 0; i < count; i++) {
        if (table[i]->state_size == 0)
            continue;
        p->states[i] = calloc(1, table[i]->state_size);
        if (!p->states[i]) {
            tw_parser_close(p);
            return TW_ENOMEM;
        }
    }
    p->fd = -1;
    p->jobs = 1;
    p->block_size = TW_PARSE_BLOCK_DEFAULT;
    p->forced = p->locked = p->continuing = -1;
    p->bar_step = -1;
    for (int i = 0; i < RECENT_FORMATS; i++)
        p->recent[i] = -1;
    for (size_t i = 0; i < count; i++) {
        if (table[i] == forced)
            p->forced = (int)i;
    }
    if (forced && p->forced < 0) {
        tw_parser_close(p);
        return TW_EFORMAT;
    }
    if (forced)
        p->stats.format = forced->name;
    p->rank = rank >= 0 ? rank : tw_rank_from_path(name);
    *out = p;
    return TW_OK;
}

int tw_parser_open(tw_parser **out, const char *path, const tw_format *forced, int rank)
{
    int fd;
    struct stat st;
    bool is_stdin = strcmp(path, "-") == 0;
    if (is_stdin) {
        fd = dup(STDIN_FILENO);
    } else {
        if (stat(path, &st) != 0)
            return tw_status_from_errno(errno);
        if (S_ISDIR(st.st_mode))
            return TW_EISDIR;
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0)
        return tw_status_from_errno(errno);
    tw_parser *p;
    int rc = tw_parser_new(&p, is_stdin ? "<stdin>" : path, forced, rank);
    if (rc != TW_OK) {
        close(fd);
        return rc;
    }
    /* A plain file may later be read in blocks (parallel.c): keep a
     * descriptor of our own, since gzclose() closes the one zlib has. */
    if (!is_stdin && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        p->size = (uint64_t)st.st_size;
    }
    p->gz = gzdopen(fd, "rb");
    if (!p->gz) {
        close(fd);
        tw_parser_close(p);
        return TW_ENOMEM;
    }
    gzbuffer(p->gz, READ_CHUNK);
    *out = p;
    return TW_OK;
}

void tw_parser_set_jobs(tw_parser *p, int jobs, size_t block_size)
{
    p->jobs = jobs < 1 ? 1 : jobs > TW_PARSE_JOBS_MAX ? TW_PARSE_JOBS_MAX : jobs;
    if (block_size > 0)
        p->block_size = block_size < TW_PARSE_BLOCK_MIN ? TW_PARSE_BLOCK_MIN : block_size;
}

void tw_parser_close(tw_parser *p)
{
    if (!p)
        return;
    if (p->gz)
        gzclose(p->gz);
    if (p->fd >= 0)
        close(p->fd);
    if (p->states) {
        size_t count;
        tw_formats(&count);
        for (size_t i = 0; i < count; i++)
            free(p->states[i]);
        free(p->states);
    }
    free(p->scratch);
    free(p->buf);
    free(p->idle_state);
    if (p->user_match)
        tw_user_match_free(p->user_match);
    if (!p->borrowed_path)
        free(p->path);
    free(p);
}

void tw_parser_rank_hint(tw_parser *p, int rank)
{
    if (p->rank < 0 && rank >= 0)
        p->rank = rank;
}

void tw_parser_bar_step_hint(tw_parser *p, int64_t step)
{
    if (step >= 0)
        p->bar_step = step;
}

int64_t tw_parser_bar_step(const tw_parser *p)
{
    return p->bar_step;
}

static int run_format(tw_parser *p, size_t index, const tw_format *f, const tw_line *line)
{
    p->emitted_data = false;
    return f->parse(p, p->states[index], line);
}

/* Whether format f, having read training data, takes the lock: when none is
 * held, or when a fallback holds it and f is a specific format. */
static bool lock_yields_to(const tw_parser *p, const tw_format *f)
{
    if (p->locked < 0)
        return true;
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    return table[p->locked]->fallback && !f->fallback;
}

/* Runs format i on the line; remembers it for the next line when it is in
 * a block (-1) and locks it in when it produced training data. */
static int try_format(tw_parser *p, size_t i, const tw_format *f, const tw_line *line)
{
    int n = run_format(p, i, f, line);
    if (n > 0 && p->emitted_data && p->forced < 0 && lock_yields_to(p, f)) {
        p->locked = (int)i;
        p->stats.format = f->name;
    } else if (n > 0 && p->emitted_data && !f->fallback && (int)i != p->locked && p->recent[0] != (int)i) {
        /* a mixed log: keep the other formats it uses at hand (most recent first) */
        int k = 0;
        while (k < RECENT_FORMATS - 1 && p->recent[k] != (int)i)
            k++;
        for (; k > 0; k--)
            p->recent[k] = p->recent[k - 1];
        p->recent[0] = (int)i;
    }
    if (n != 0)
        p->continuing = n < 0 ? (int)i : -1;
    return n;
}

/* One index over every format's anchors; anchor_owner maps a needle to its format. */
static tw_keywords anchor_index;
static uint64_t anchored_formats;        /* formats that declared anchors */
static uint64_t anchor_owner_mask[TW_KEYWORDS_MAX];
static pthread_once_t anchor_once = PTHREAD_ONCE_INIT;

static void build_anchor_index(void)
{
    static const char *needles[TW_KEYWORDS_MAX];
    size_t count, n = 0;
    const tw_format *const *table = tw_formats(&count);
    for (size_t i = 0; i < count && i < 64; i++) {
        if (!table[i]->anchors)
            continue;
        anchored_formats |= 1ull << i;
        for (const char *const *a = table[i]->anchors; *a && n < TW_KEYWORDS_MAX; a++) {
            anchor_owner_mask[n] = 1ull << i;
            needles[n++] = *a;
        }
    }
    tw_keywords_init(&anchor_index, needles, n);
}

/* Formats worth asking detect(): those without anchors, and those whose
 * anchors occur in the line. */
static uint64_t candidate_formats(const tw_line *line)
{
    pthread_once(&anchor_once, build_anchor_index);
    uint64_t found = tw_keywords_scan(&anchor_index, line->text, line->len);
    uint64_t formats = ~anchored_formats;
    while (found) {
        int n = __builtin_ctzll(found);
        found &= found - 1;
        formats |= anchor_owner_mask[n];
    }
    return formats;
}

/* Offers the line to the specific formats among these anchored candidates,
 * in table order; true when one consumed it. */
static bool specific_first(tw_parser *p, const tw_line *line, uint64_t formats, int cont)
{
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    while (formats) {
        int i = __builtin_ctzll(formats);
        formats &= formats - 1;
        if (!table[i]->fallback && i != cont && table[i]->detect(line) &&
            try_format(p, (size_t)i, table[i], line) != 0)
            return true;
    }
    return false;
}

/* Hands the line to the formats; true when one consumed it. */
static bool dispatch_formats(tw_parser *p, const tw_line *line)
{
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    /* A format in the middle of a block (traceback, JSON document, metric
     * list) sees the next line first, whatever format is locked. */
    if (p->user && tw_user_formats_parse(p, line))
        return true;
    int cont = p->continuing;
    p->continuing = -1;
    if (cont >= 0 && try_format(p, (size_t)cont, table[cont], line) != 0)
        return true;
    int primary = p->forced >= 0 ? p->forced : p->locked;
    uint64_t candidates = 0;
    bool scanned = false;
    /* A locked fallback reads a line after the anchored specific formats
     * whose anchors the line holds (the one scan the loop below uses too):
     * a kv-locked file pays nothing more on its own lines. */
    if (p->forced < 0 && primary >= 0 && table[primary]->fallback) {
        candidates = candidate_formats(line);
        scanned = true;
        if (specific_first(p, line, candidates & anchored_formats, cont))
            return true;
        candidates &= ~anchored_formats; /* those were just offered the line */
    }
    if (primary >= 0 && primary != cont) {
        if (try_format(p, (size_t)primary, table[primary], line) != 0)
            return true;
        if (p->forced >= 0)
            return false;
    }
    if (p->forced >= 0)
        return false;
    for (int k = 0; k < RECENT_FORMATS && p->recent[k] >= 0; k++) {
        int i = p->recent[k];
        if (i != cont && table[i]->detect(line) && try_format(p, (size_t)i, table[i], line) != 0)
            return true;
    }
    if (!scanned)
        candidates = candidate_formats(line);
    for (size_t i = 0; i < count; i++) {
        const tw_format *f = table[i];
        if ((int)i == p->locked || (int)i == cont || !(candidates & (1ull << i)) || !f->detect(line))
            continue;
        if (try_format(p, i, f, line) != 0)
            return true;
    }
    return false;
}

/* A line no format read, for the template miner (tw_parser_set_unparsed):
 * a TW_REC_LINE record with the text after the timestamp. */
static void emit_unparsed(tw_parser *p, const tw_line *line)
{
    size_t start = 0;
    while (start < line->body_len && (line->body[start] == ' ' || line->body[start] == '\t'))
        start++;
    if (start == line->body_len)
        return; /* blank */
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_LINE;
    size_t len = line->body_len - start;
    tw_record_set_text(r.message, line->body + start, len);
    if (len >= TW_MESSAGE_MAX)
        tw_record_set_text(r.detail, line->body + start + TW_MESSAGE_MAX - 1, len - (TW_MESSAGE_MAX - 1));
    tw_parser_emit(p, line, &r);
}

/* A line a format read can end in the start of a traceback printed right
 * after it without a newline ("{| Epoch: 55/167 (996/1926) | Loss: 0.2907 |
 * }Traceback (most recent call last):", a progress line's carriage return):
 * the events format reads that start as well. One comparison at the line's
 * end. */
static void glued_traceback(tw_parser *p, const tw_line *line)
{
    static const char tail[] = "Traceback (most recent call last):";
    size_t n = sizeof tail - 1, len = line->len;
    while (len > 0 && (line->text[len - 1] == ' ' || line->text[len - 1] == '\r'))
        len--;
    if (len <= n || p->continuing >= 0 || memcmp(line->text + len - n, tail, n) != 0)
        return;
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    for (size_t i = 0; i < count; i++) {
        if (table[i] == &tw_format_events) {
            try_format(p, i, table[i], line);
            return;
        }
    }
}

static void dispatch(tw_parser *p, const tw_line *line)
{
    if (dispatch_formats(p, line))
        glued_traceback(p, line);
    else if (p->unparsed)
        emit_unparsed(p, line);
}

/* Copies s without ANSI escape sequences into p->scratch. */
static size_t strip_ansi(tw_parser *p, const char *s, size_t len)
{
    char *out = p->scratch;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\x1b') {
            out[o++] = s[i];
            continue;
        }
        if (i + 1 < len && s[i + 1] == '[') {
            i += 2;
            while (i < len && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e))
                i++;
        } else if (i + 1 < len && s[i + 1] == ']') {
            i += 2;
            while (i < len && s[i] != '\a' && !(s[i] == '\x1b' && i + 1 < len && s[i + 1] == '\\'))
                i++;
            if (i < len && s[i] == '\x1b')
                i++;
        } else {
            i++;
        }
    }
    return o;
}

/* The prefix torch.distributed puts before each line of a rank's output,
 * "[rank3]:" (and, under `srun --label`, the task label before it: "1:
 * [rank4]:"): its length, with the rank in *rank; 0 when the line has none. */
static size_t launcher_prefix(const char *s, size_t len, int *rank)
{
    size_t i = 0;
    while (i < len && i < 6 && s[i] >= '0' && s[i] <= '9')
        i++;
    if (i > 0 && i + 1 < len && s[i] == ':' && s[i + 1] == ' ')
        i += 2; /* srun's label, taken only before a rank prefix */
    else
        i = 0;
    if (len - i < 8 || memcmp(s + i, "[rank", 5) != 0)
        return 0;
    size_t j = i + 5;
    long long v = 0;
    while (j < len && s[j] >= '0' && s[j] <= '9' && v < 1 << 24)
        v = v * 10 + (s[j++] - '0');
    if (j == i + 5 || j + 1 >= len || s[j] != ']' || s[j + 1] != ':')
        return 0;
    *rank = (int)v;
    j += 2;
    if (j < len && s[j] == ' ')
        j++;
    return j;
}

static void process_segment(tw_parser *p, const char *s, size_t len, bool maybe_escapes)
{
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len == 0)
        return;
    if (maybe_escapes && memchr(s, '\x1b', len)) {
        len = strip_ansi(p, s, len);
        s = p->scratch;
    }
    int rank = -1;
    size_t prefix = (s[0] == '[' || (s[0] >= '0' && s[0] <= '9')) ? launcher_prefix(s, len, &rank) : 0;
    s += prefix;
    len -= prefix;
    if (len == 0)
        return;
    tw_line line = {.text = s, .len = len, .body = s, .body_len = len, .rank = rank};
    line.source.file = p->path;
    line.source.line = p->line_no;
    size_t ts = tw_scan_timestamp(s, len, &line.time);
    if (ts) {
        line.has_time = true;
        line.body = s + ts;
        line.body_len = len - ts;
    }
    dispatch(p, &line);
}

/* True when s has a byte below 0x0e (NUL, \b, \r or a rarer control
 * byte) or an ESC; the exact one is looked for only then. Sixteen bytes a
 * step with SSE2: one pass instead of one memchr for each. */
static bool has_control(const char *s, size_t len)
{
    size_t i = 0;
#ifdef __SSE2__
    const __m128i bias = _mm_set1_epi8((char)0x80), limit = _mm_set1_epi8((char)(0x0e ^ 0x80));
    const __m128i esc = _mm_set1_epi8(0x1b);
    for (; i + 16 <= len; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        /* unsigned v < 0x0e is a signed compare once the top bits are flipped */
        __m128i low = _mm_cmplt_epi8(_mm_xor_si128(v, bias), limit);
        if (_mm_movemask_epi8(_mm_or_si128(low, _mm_cmpeq_epi8(v, esc))))
            return true;
    }
#endif
    for (; i < len; i++) {
        if ((unsigned char)s[i] < 0x0e || s[i] == 0x1b)
            return true;
    }
    return false;
}

static void process_line(tw_parser *p, const char *s, size_t len)
{
    p->line_no++;
    p->stats.lines++;
    if (len > 0 && s[len - 1] == '\r')
        len--;
    if (!has_control(s, len)) {
        process_segment(p, s, len, false);
        return;
    }
    if (memchr(s, '\0', len)) {
        p->stats.binary_lines++;
        return;
    }
    /* Progress bars rewrite the line with \r or \b: each rewrite is a segment. */
    if (!memchr(s, '\r', len) && !memchr(s, '\b', len)) {
        process_segment(p, s, len, true);
        return;
    }
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\r' || s[i] == '\b') {
            process_segment(p, s + start, i - start, true);
            start = i + 1;
        }
    }
    process_segment(p, s + start, len - start, true);
}

bool tw_parser_looks_binary(const char *s, size_t len)
{
    size_t n = len < 4096 ? len : 4096, odd = 0, nul = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0)
            nul++;
        if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\b' && c != 0x1b && c != '\f')
            odd++;
    }
    /* text logs have no NUL and almost no other control bytes */
    return nul > 0 && odd * 100 > 3 * n;
}

void tw_parser_finish_formats(tw_parser *p)
{
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    for (size_t i = 0; i < count; i++) {
        if (table[i]->finish)
            table[i]->finish(p, p->states[i]);
    }
}

/* Live input: true when no format holds part of a block, so a fresh parser
 * started at the next line would continue exactly. A format that keeps
 * something for finish() is idle when its state equals a fresh (zeroed) one. */
static bool at_rest(tw_parser *p)
{
    if (p->continuing >= 0)
        return false;
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    for (size_t i = 0; i < count; i++) {
        const tw_format *f = table[i];
        if (!f->finish || !f->state_size)
            continue;
        bool idle = f->same_state ? f->same_state(p->states[i], p->idle_state)
                                  : memcmp(p->states[i], p->idle_state, f->state_size) == 0;
        if (!idle)
            return false;
    }
    return true;
}

static uint64_t records_emitted(const tw_parser *p) { return p->stats.steps + p->stats.evals + p->stats.events; }

/* Moves the resume point after a line [start, end) (stream positions) was
 * processed: past it when nothing is left open; to its start when it
 * delivered records while a block stays open (a header line that flushed
 * the previous block and opened the next: a fresh parser from there would
 * not deliver them again); otherwise it stays at the start of the block. */
static void note_line(tw_parser *p, uint64_t start, uint64_t end, uint64_t records_before)
{
    if (at_rest(p)) {
        p->rest_pos = end;
        p->rest_line = p->line_no;
        p->rest_skipping = p->skipping;
    } else if (records_emitted(p) != records_before) {
        p->rest_pos = start;
        p->rest_line = p->line_no - 1;
        p->rest_skipping = false;
    }
}

/* Splits p->buf into lines and keeps a partial last line for the next read,
 * unless final is set or it outgrew TW_LINE_MAX (then it is cut, counted,
 * and the rest of it up to the next newline is dropped). */
static void split_lines(tw_parser *p, bool final)
{
    const char *buf = p->buf;
    size_t start = 0;
    uint64_t base = p->stats.bytes - p->have; /* stream position of buf[0] */
    for (;;) {
        const char *nl = memchr(buf + start, '\n', p->have - start);
        if (!nl)
            break;
        size_t len = (size_t)(nl - (buf + start));
        if (p->skipping) {
            p->skipping = false;
            if (p->track_rest && p->rest_skipping) {
                p->rest_pos = base + start + len + 1;
                p->rest_skipping = false;
            }
        } else if (!p->track_rest) {
            process_line(p, buf + start, len);
        } else {
            uint64_t records = records_emitted(p);
            process_line(p, buf + start, len);
            note_line(p, base + start, base + start + len + 1, records);
        }
        start += len + 1;
    }
    size_t rest = p->have - start;
    if (p->skipping) {
        start = p->have;
        if (p->track_rest && p->rest_skipping)
            p->rest_pos = base + start;
    } else if (rest >= TW_LINE_MAX || (final && rest > 0)) {
        if (rest >= TW_LINE_MAX) {
            p->stats.lines_cut++;
            p->skipping = !final;
        }
        uint64_t records = records_emitted(p);
        process_line(p, buf + start, rest >= TW_LINE_MAX ? TW_LINE_MAX : rest);
        if (p->track_rest)
            note_line(p, base + start, base + p->have, records);
        start = p->have;
    }
    memmove(p->buf, p->buf + start, p->have - start);
    p->have -= start;
}

void tw_parser_ingest(tw_parser *p, const char *data, size_t n)
{
    while (n > 0) {
        size_t take = n < READ_CHUNK ? n : READ_CHUNK;
        memcpy(p->buf + p->have, data, take);
        p->have += take;
        p->stats.bytes += take;
        split_lines(p, false);
        data += take;
        n -= take;
    }
}

void tw_parser_flush_line(tw_parser *p)
{
    split_lines(p, true);
    p->skipping = false;
}

static void finish_input(tw_parser *p)
{
    tw_parser_flush_line(p);
    tw_parser_finish_formats(p);
}

void tw_parser_push(tw_parser *p, const char *data, size_t len, tw_record_fn fn, void *arg)
{
    p->fn = fn;
    p->arg = arg;
    if (!p->track_rest && !p->idle_state) {
        size_t count, largest = 1;
        const tw_format *const *table = tw_formats(&count);
        for (size_t i = 0; i < count; i++)
            largest = table[i]->state_size > largest ? table[i]->state_size : largest;
        /* without it the resume point is the start of the partial line */
        p->idle_state = calloc(1, largest);
        p->track_rest = p->idle_state != NULL;
        p->rest_pos = p->stats.bytes - p->have;
        p->rest_line = p->line_no;
        p->rest_skipping = p->skipping;
    }
    tw_parser_ingest(p, data, len);
}

size_t tw_parser_pending(const tw_parser *p) { return p->skipping ? 0 : p->have; }
uint64_t tw_parser_line(const tw_parser *p) { return p->line_no; }

void tw_parser_set_line(tw_parser *p, uint64_t line)
{
    p->line_no = line;
    if (p->rest_pos == p->stats.bytes - p->have)
        p->rest_line = line;
}

void tw_parser_drop_pending(tw_parser *p)
{
    p->have = 0;
    p->skipping = false;
}

void tw_parser_resume_point(const tw_parser *p, tw_parser_resume *out)
{
    if (!p->track_rest) {
        out->back = p->have;
        out->line = p->line_no;
        out->skip_line = p->skipping;
        return;
    }
    out->back = p->stats.bytes - p->rest_pos;
    out->line = p->rest_line;
    out->skip_line = p->rest_skipping;
}

void tw_parser_end_blocks(tw_parser *p, tw_record_fn fn, void *arg)
{
    p->fn = fn;
    p->arg = arg;
    tw_parser_finish_formats(p);
    p->continuing = -1;
    if (p->track_rest && !p->skipping) {
        p->rest_pos = p->stats.bytes - p->have;
        p->rest_line = p->line_no;
        p->rest_skipping = false;
    }
}

void tw_parser_skip_line(tw_parser *p)
{
    p->have = 0;
    p->skipping = true;
    if (p->track_rest) {
        p->rest_pos = p->stats.bytes;
        p->rest_skipping = true;
    }
}

int tw_parser_feed(tw_parser *p, const char *data, size_t len, tw_record_fn fn, void *arg)
{
    p->fn = fn;
    p->arg = arg;
    tw_parser_ingest(p, data, len);
    finish_input(p);
    return TW_OK;
}

int tw_parser_run_in_order(tw_parser *p, tw_record_fn fn, void *arg)
{
    p->fn = fn;
    p->arg = arg;
    bool first = true;
    int rc = TW_OK;
    for (;;) {
        int n = gzread(p->gz, p->buf + p->have, READ_CHUNK);
        if (n < 0) {
            int zerr;
            gzerror(p->gz, &zerr);
            rc = (zerr == Z_ERRNO) ? tw_status_from_errno(errno) : TW_EGZIP;
            break;
        }
        if (n == 0)
            break;
        if (first && tw_parser_looks_binary(p->buf + p->have, (size_t)n))
            return TW_EBINARY;
        first = false;
        p->have += (size_t)n;
        p->stats.bytes += (uint64_t)n;
        split_lines(p, false);
        z_off_t at = gzoffset(p->gz);
        if (at >= 0)
            atomic_store_explicit(&p->progress, (uint64_t)at, memory_order_relaxed);
    }
    if (rc == TW_OK) {
        /* zlib reports a gzip stream cut short only once it is drained. */
        int zerr;
        gzerror(p->gz, &zerr);
        if (zerr != Z_OK && zerr != Z_STREAM_END)
            rc = (zerr == Z_ERRNO) ? TW_EIO : TW_EGZIP;
    }
    finish_input(p);
    return rc;
}

void tw_parser_copy_state(tw_parser *dst, const tw_parser *src)
{
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    dst->forced = src->forced;
    dst->locked = src->locked;
    dst->continuing = src->continuing;
    memcpy(dst->recent, src->recent, sizeof dst->recent);
    dst->rank = src->rank;
    dst->bar_step = src->bar_step;
    dst->user = src->user;
    dst->unparsed = src->unparsed;
    for (size_t i = 0; i < count; i++) {
        if (table[i]->state_size)
            memcpy(dst->states[i], src->states[i], table[i]->state_size);
    }
    dst->have = 0;
    dst->skipping = false;
    dst->line_no = 0;
    memset(&dst->stats, 0, sizeof dst->stats);
    dst->stats.format = src->stats.format;
}

bool tw_parser_same_state(const tw_parser *a, const tw_parser *b)
{
    if (a->forced != b->forced || a->locked != b->locked || a->continuing != b->continuing ||
        a->rank != b->rank || a->bar_step != b->bar_step || memcmp(a->recent, b->recent, sizeof a->recent) != 0 ||
        a->have != 0 || b->have != 0 || a->skipping || b->skipping)
        return false;
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    for (size_t i = 0; i < count; i++) {
        const tw_format *f = table[i];
        if (!f->state_size)
            continue;
        bool same = f->same_state ? f->same_state(a->states[i], b->states[i])
                                  : memcmp(a->states[i], b->states[i], f->state_size) == 0;
        if (!same)
            return false;
    }
    return true;
}
