/*
 * templates.c: the lines no format read, grouped into templates by a
 * Drain-style miner, and the rare ones that look like trouble ("unusual
 * lines").
 *
 * Drain (He et al., ICWS 2017; Drain3 is the maintained implementation) in
 * its three steps:
 *  1. Preprocessing: a token with a digit (numbers, ids, hex, addresses,
 *     times) is masked to <*>, a path (a token with '/') to <PATH>, a quoted
 *     string to <STR>. A mask is a token like any other afterwards (as
 *     Drain3's named masks are): "<*>" from the mask equals "<*>".
 *  2. A fixed-depth parse tree: the first level is the line's token count
 *     (lines of different counts never meet), the next TEMPLATE_PREFIX_TOKENS
 *     levels its leading tokens (one: Drain3's default depth 4 is root,
 *     count, one token, leaf). A masked <*> goes to the wildcard child; a
 *     node has at most TW_TEMPLATES_CHILDREN_MAX children, the last one
 *     made the wildcard, which takes every later new token (Drain3's
 *     max_children). A line's last token is never a key.
 *  3. In the leaf, a list of groups: the line joins the group whose template
 *     is most similar (tokens equal at the same position / token count; a
 *     position a merge generalised counts as not equal, and between equal
 *     similarities the template with more such positions wins, as in
 *     Drain3) when that similarity is at least TW_TEMPLATES_SIMILARITY
 *     percent; the template's tokens that differ from the line's become
 *     <*>. Otherwise the line starts a group of its own.
 *
 * The threshold is 50%, not Drain3's default 0.4: 0.5 is what LogPAI's
 * benchmark settings for Drain (logparser, Drain/benchmark.py) use on 9 of
 * its 16 data sets, and these lines come whole, with no log format to cut
 * their header off, so a few shared leading words weigh more. On the
 * corpus, 0.4 merged "INFO - Total parameters: <*> M." with "INFO -
 * =====> Start epoch <*>" (VinVL) and "<*> INFO Saving config to <PATH>"
 * with "<*> INFO Wrapping model with DDP..." (OLMo); 0.5 kept them apart
 * and still made a config dump ("ppocr INFO: name : ResNet_vd", "...
 * layers : 50") one template. A person reads the result; a line merged
 * away is a line nobody sees.
 *
 * Domain guard: a token that holds a trouble word (trouble_words below,
 * searched in the masked line lowercased; a phrase such as "timed out"
 * guards each token it touches) is never generalised: where the line's
 * token or the template's is guarded, the two must be equal for the line to
 * join, so "connection refused" never joins "connection established", and
 * a trouble template keeps its words.
 *
 * Cost: the miner sees only what no format read, so a log every line of
 * which is understood costs nothing. A line costs O(its tokens): the mask,
 * the guard, one hop per tree level (a hash compare per child, at most
 * TW_TEMPLATES_CHILDREN_MAX), and the templates of one leaf, at most
 * TW_TEMPLATES_LEAF_MAX. Past a full leaf, a line that joins none of its
 * templates is grouped by its exact masked text (a hash lookup, what this
 * miner did before it clustered; such groups never merge), so prose of
 * many shapes (a tool's help text) is still counted line by line. A line
 * that would start a group past TW_TEMPLATES_MAX groups in all is counted
 * as "other". A line seen before, while its leaf has not changed since,
 * goes straight to its group (line_cache: what a repeated line costs is
 * the mask and one compare). Joining a group allocates nothing (its text
 * has room for every token widened to <*>); a new group allocates its
 * tokens and text in one block, and the tree nodes on its path.
 *
 * Each group keeps its count, the ranks it appeared on (a 64-bit set of
 * rank mod 64, and the first rank), its first line and its text, and per
 * launch (the launch its rank was in when the line came: run.c's cursor)
 * its count and first line, grown to the last launch it appeared in.
 * Ownership: tw_templates owns the groups (block, launches), the tree,
 * the exact-text table and the cache.
 *
 * A template is unusual when it is rare (at most TW_UNUSUAL_RARE lines) and
 * either says trouble (error, fatal, fail, timeout, killed, refused,
 * abort, denied, exception, out of range, segmentation), or appeared on
 * one rank of a run of several, or appeared only after its rank's last
 * training step, in each launch it appeared in, of a run with a problem (a healthy run's closing lines,
 * "training completed", a final summary, are not news).
 */
#include "templates.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../core/grow.h"
#include "trainwatch/error.h"

#define TEMPLATE_TEXT_MAX      200                       /* a masked line, NUL included */
#define TEMPLATE_TOKENS_MAX    (TEMPLATE_TEXT_MAX / 2)   /* a character and a space each */
#define TEMPLATE_CAP           (4 * TEMPLATE_TOKENS_MAX) /* every token widened to <*>, the spaces, NUL */
#define TEMPLATE_PREFIX_TOKENS 1
#define TEMPLATE_CACHE         4096 /* lines remembered (line_cache) */
#define TW_UNUSUAL_RARE        5

static const char wildcard[] = "<*>";

enum { TOKEN_WILD = 1, TOKEN_GUARD = 2 }; /* generalised by a merge; holds a trouble word */

typedef struct tw_template_launch {
    uint64_t count, first_line; /* count 0: not in this launch */
    uint32_t file;
    int rank;
} tw_template_launch;

/* A template: the first line's tokens (never change: a merge only marks
 * one TOKEN_WILD) and the text shown, rebuilt when a merge marks one. */
typedef struct tw_template {
    void *block;                  /* owned: the arrays below, first then text */
    uint32_t *hash;               /* each token's */
    uint16_t *at, *len;           /* each token in first */
    uint8_t *flag;                /* TOKEN_* of each token */
    const char *first;            /* the first line, masked */
    char *text;                   /* TEMPLATE_CAP: tokens, <*> where TOKEN_WILD, split by one space */
    int tokens, wild;             /* wild: tokens with TOKEN_WILD */
    tw_template_launch *launches; /* owned; [0, launch_count) */
    int launch_count;
    uint64_t count;
    uint64_t ranks_seen; /* rank mod 64 */
    int first_rank;
    uint32_t file;
    uint64_t first_line;
    char example[TW_MESSAGE_MAX];
} tw_template;

/* A parse-tree node: children by token (inner levels) and the groups of
 * the lines that end here (leaves), as indices into tw_templates.groups. */
typedef struct tree_node tree_node;
typedef struct tree_edge {
    uint64_t hash;
    char *key; /* owned */
    tree_node *child;
} tree_edge;
struct tree_node {
    tree_edge *edges;
    int edge_count, edge_cap;
    uint32_t *groups;
    int group_count, group_cap;
    uint32_t version; /* bumped when a group is added or its template changes */
};

/* Where a masked line went last, while its leaf has not changed since:
 * the same search would find the same group (a join only generalises the
 * group it chose, which keeps it the best), so a repeated line skips it. */
typedef struct line_cache {
    uint64_t hash; /* of the masked line */
    const tree_node *leaf;
    uint32_t version, group; /* group: index + 1 (0: empty) */
} line_cache;

struct tw_templates {
    tw_template *groups; /* [0, count) of cap */
    size_t count, cap;
    tree_node *by_length[TEMPLATE_TOKENS_MAX + 1]; /* the first level: token count */
    uint32_t *exact;   /* groups past a full leaf, by exact text: index + 1 (0: empty); 2 * TW_TEMPLATES_MAX */
    line_cache *cache; /* TEMPLATE_CACHE, by the masked line's hash */
    uint64_t lines, other;
};

/* A masked line cut into tokens (views into text). */
typedef struct line_tokens {
    char text[TEMPLATE_TEXT_MAX];
    uint32_t hash[TEMPLATE_TOKENS_MAX];
    uint16_t at[TEMPLATE_TOKENS_MAX], len[TEMPLATE_TOKENS_MAX];
    uint8_t flag[TEMPLATE_TOKENS_MAX]; /* TOKEN_GUARD, once guarded */
    int n;
    bool guarded;
} line_tokens;

static const char *const trouble_words[] = {"error",        "fatal",        "fail",  "timeout", "timed out",
                                            "killed",       "refused",      "abort", "denied",  "exception",
                                            "out of range", "segmentation", NULL};

static void node_free(tree_node *node)
{
    if (!node)
        return;
    for (int i = 0; i < node->edge_count; i++) {
        free(node->edges[i].key);
        node_free(node->edges[i].child);
    }
    free(node->edges);
    free(node->groups);
    free(node);
}

void tw_templates_free(tw_templates *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->count; i++) {
        free(t->groups[i].block);
        free(t->groups[i].launches);
    }
    free(t->groups);
    free(t->exact);
    free(t->cache);
    for (int n = 0; n <= TEMPLATE_TOKENS_MAX; n++)
        node_free(t->by_length[n]);
    free(t);
}

/* Masks text into out (NUL-terminated, at most TEMPLATE_TEXT_MAX): tokens
 * split by one space. */
static void mask(const char *text, char *out)
{
    size_t o = 0;
    const char *p = text;
    while (*p && o + 8 < TEMPLATE_TEXT_MAX) {
        if (*p == ' ' || *p == '\t') {
            if (o && out[o - 1] != ' ')
                out[o++] = ' ';
            p++;
            continue;
        }
        if (*p == '"' || *p == '\'') { /* a quoted string, to its closing quote */
            const char *close = strchr(p + 1, *p);
            if (close) {
                memcpy(out + o, "<STR>", 5);
                o += 5;
                p = close + 1;
                continue;
            }
        }
        const char *q = p;
        bool digit = false, slash = false;
        while (*q && *q != ' ' && *q != '\t') {
            digit |= isdigit((unsigned char)*q) != 0;
            slash |= *q == '/';
            q++;
        }
        size_t n = (size_t)(q - p);
        if (slash) {
            memcpy(out + o, "<PATH>", 6);
            o += 6;
        } else if (digit) {
            memcpy(out + o, "<*>", 3);
            o += 3;
        } else {
            if (o + n >= TEMPLATE_TEXT_MAX - 1)
                n = TEMPLATE_TEXT_MAX - 1 - o;
            memcpy(out + o, p, n);
            o += n;
        }
        p = q;
    }
    while (o && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
}

/* Marks the tokens a trouble word touches (TOKEN_GUARD). */
static void guard(line_tokens *l)
{
    if (l->guarded)
        return;
    l->guarded = true;
    char lower[TEMPLATE_TEXT_MAX];
    size_t i = 0;
    for (; l->text[i]; i++)
        lower[i] = (char)tolower((unsigned char)l->text[i]);
    lower[i] = '\0';
    for (const char *const *w = trouble_words; *w; w++) {
        size_t wlen = strlen(*w);
        for (const char *hit = strstr(lower, *w); hit; hit = strstr(hit + 1, *w)) {
            size_t from = (size_t)(hit - lower), to = from + wlen;
            for (int k = 0; k < l->n; k++) {
                if (l->at[k] < to && l->at[k] + l->len[k] > from)
                    l->flag[k] |= TOKEN_GUARD;
            }
        }
    }
}

/* Masks message and cuts it into tokens (not yet guarded); n 0: nothing
 * left. */
static void tokenize(const char *message, line_tokens *l)
{
    mask(message, l->text);
    l->n = 0;
    for (size_t i = 0; l->text[i];) {
        uint32_t h = 2166136261u;
        size_t end = i;
        for (; l->text[end] && l->text[end] != ' '; end++)
            h = (h ^ (unsigned char)l->text[end]) * 16777619u;
        l->hash[l->n] = h;
        l->at[l->n] = (uint16_t)i;
        l->len[l->n] = (uint16_t)(end - i);
        l->flag[l->n++] = 0;
        i = l->text[end] ? end + 1 : end;
    }
    l->guarded = false; /* guard() when it matters: not for a line seen before */
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static tree_edge *edge_of(tree_node *node, const char *key, size_t len, uint64_t hash)
{
    for (int i = 0; i < node->edge_count; i++) {
        tree_edge *e = &node->edges[i];
        if (e->hash == hash && strlen(e->key) == len && memcmp(e->key, key, len) == 0)
            return e;
    }
    return NULL;
}

static tree_node *child_by(tree_node *node, const char *key, size_t len)
{
    tree_edge *e = edge_of(node, key, len, hash_bytes(key, len));
    return e ? e->child : NULL;
}

/* The leaf a line's search ends in (Drain's tree search: each leading token
 * by its own child, else the wildcard's); NULL: none yet. */
static tree_node *find_leaf(const tw_templates *t, const line_tokens *l)
{
    tree_node *node = t->by_length[l->n];
    for (int d = 0; node && d < TEMPLATE_PREFIX_TOKENS && d < l->n - 1; d++) {
        tree_node *next = child_by(node, l->text + l->at[d], l->len[d]);
        node = next ? next : child_by(node, wildcard, strlen(wildcard));
    }
    return node;
}

static tree_node *node_new(tree_node **slot)
{
    return *slot = calloc(1, sizeof **slot);
}

/* node's child for key, made (NULL: out of memory). */
static tree_node *add_child(tree_node *node, const char *key, size_t len)
{
    if (TW_GROW(node->edges, node->edge_count, node->edge_cap, 4) != TW_OK)
        return NULL;
    tree_edge *e = &node->edges[node->edge_count];
    if (!(e->key = malloc(len + 1)))
        return NULL;
    memcpy(e->key, key, len);
    e->key[len] = '\0';
    e->hash = hash_bytes(key, len);
    if (!node_new(&e->child)) {
        free(e->key);
        return NULL;
    }
    node->edge_count++;
    return e->child;
}

/* The child a new group's token goes to (Drain's insertion): its own, a
 * masked token the wildcard, a new token its own while there is room, the
 * last room taken by the wildcard, which takes every token after that. */
static tree_node *step_down(tree_node *node, const char *key, size_t len)
{
    tree_node *own = child_by(node, key, len);
    if (own)
        return own;
    size_t wlen = strlen(wildcard);
    tree_node *wild = child_by(node, wildcard, wlen);
    if (len == wlen && memcmp(key, wildcard, wlen) == 0)
        return add_child(node, wildcard, wlen);
    if (wild)
        return node->edge_count < TW_TEMPLATES_CHILDREN_MAX ? add_child(node, key, len) : wild;
    if (node->edge_count + 1 < TW_TEMPLATES_CHILDREN_MAX)
        return add_child(node, key, len);
    return add_child(node, wildcard, wlen);
}

/* The leaf a new group of l goes to, made as needed (NULL: out of memory). */
static tree_node *make_leaf(tw_templates *t, const line_tokens *l)
{
    tree_node *node = t->by_length[l->n];
    if (!node && !node_new(&t->by_length[l->n]))
        return NULL;
    node = t->by_length[l->n];
    for (int d = 0; node && d < TEMPLATE_PREFIX_TOKENS && d < l->n - 1; d++)
        node = step_down(node, l->text + l->at[d], l->len[d]);
    return node;
}

static bool token_equal(const tw_template *e, const line_tokens *l, int i)
{
    return e->hash[i] == l->hash[i] && e->len[i] == l->len[i] &&
           memcmp(e->first + e->at[i], l->text + l->at[i], l->len[i]) == 0;
}

/* How much of e's template l shares: *same tokens equal, *wild positions a
 * merge generalised. False when a guarded token differs (l may not join),
 * or when fewer than floor tokens can be equal (l will not). */
static bool similarity(const tw_template *e, const line_tokens *l, int floor, int *same, int *wild)
{
    *same = *wild = 0;
    for (int i = 0; i < l->n; i++) {
        if (e->flag[i] & TOKEN_WILD) {
            if (l->flag[i] & TOKEN_GUARD)
                return false; /* a trouble word is never taken into a <*> */
            (*wild)++;
        } else if (token_equal(e, l, i)) {
            (*same)++;
        } else if ((e->flag[i] | l->flag[i]) & TOKEN_GUARD) {
            return false;
        }
        if (*same + (l->n - 1 - i) < floor)
            return false;
    }
    return true;
}

/* The group of leaf l joins (Drain's fast match), or NULL. */
static tw_template *best_match(tw_templates *t, const tree_node *leaf, const line_tokens *l)
{
    int needed = (TW_TEMPLATES_SIMILARITY * l->n + 99) / 100;
    tw_template *best = NULL;
    int best_same = -1, best_wild = -1;
    for (int i = 0; i < leaf->group_count; i++) {
        tw_template *e = &t->groups[leaf->groups[i]];
        int same, wild;
        if (!similarity(e, l, best_same > needed ? best_same : needed, &same, &wild))
            continue;
        if (same > best_same || (same == best_same && wild > best_wild)) {
            best = e;
            best_same = same;
            best_wild = wild;
        }
    }
    return best;
}

/* e's text, from its first line's tokens and <*>. */
static void write_text(tw_template *e)
{
    size_t o = 0;
    for (int i = 0; i < e->tokens; i++) {
        const char *token = e->flag[i] & TOKEN_WILD ? wildcard : e->first + e->at[i];
        size_t n = e->flag[i] & TOKEN_WILD ? strlen(wildcard) : e->len[i];
        if (o)
            e->text[o++] = ' ';
        memcpy(e->text + o, token, n);
        o += n;
    }
    e->text[o] = '\0';
}

/* e's template with each token that differs from l's made <*>; true when
 * one did. */
static bool generalise(tw_template *e, const line_tokens *l)
{
    bool changed = false;
    for (int i = 0; i < l->n; i++) {
        if (!(e->flag[i] & TOKEN_WILD) && !token_equal(e, l, i)) {
            e->flag[i] |= TOKEN_WILD;
            e->wild++;
            changed = true;
        }
    }
    if (changed)
        write_text(e);
    return changed;
}

/* Room for one more group (and its index in leaf, when leaf). */
static int make_room(tw_templates *t, tree_node *leaf)
{
    if (TW_GROW_SIZE(t->groups, t->count, t->cap, 64) != TW_OK ||
        (leaf && TW_GROW(leaf->groups, leaf->group_count, leaf->group_cap, 4) != TW_OK))
        return TW_ENOMEM;
    if (!leaf && !t->exact && !(t->exact = calloc(2 * TW_TEMPLATES_MAX, sizeof *t->exact)))
        return TW_ENOMEM;
    return TW_OK;
}

/* The group of l's exact text among those past a full leaf; *slot: where
 * it is, or where it goes. */
static tw_template *exact_group(tw_templates *t, const line_tokens *l, size_t *slot)
{
    size_t i = hash_bytes(l->text, strlen(l->text)) % (2 * TW_TEMPLATES_MAX);
    for (; t->exact && t->exact[i]; i = (i + 1) % (2 * TW_TEMPLATES_MAX)) {
        tw_template *e = &t->groups[t->exact[i] - 1];
        if (strcmp(e->text, l->text) == 0)
            break;
    }
    *slot = i;
    return t->exact && t->exact[i] ? &t->groups[t->exact[i] - 1] : NULL;
}

/* The group l starts, in leaf or (NULL: past a full leaf) by its exact text. */
static tw_template *start_group(tw_templates *t, const line_tokens *l, const tw_record *r, uint32_t file,
                                tree_node *leaf, size_t slot)
{
    tw_template *e = &t->groups[t->count];
    memset(e, 0, sizeof *e);
    size_t n = (size_t)l->n, first = strlen(l->text) + 1;
    char *block = malloc(n * (sizeof *e->hash + 2 * sizeof *e->at + sizeof *e->flag) + first + TEMPLATE_CAP);
    if (!(e->block = block))
        return NULL;
    e->hash = memcpy(block, l->hash, n * sizeof *e->hash); /* the widest first: each array aligned */
    e->at = memcpy(block + n * sizeof *e->hash, l->at, n * sizeof *e->at);
    e->len = memcpy(e->at + n, l->len, n * sizeof *e->len);
    e->flag = memcpy(e->len + n, l->flag, n * sizeof *e->flag);
    e->first = memcpy(e->flag + n, l->text, first);
    e->text = memcpy((char *)e->first + first, l->text, first);
    e->tokens = l->n;
    e->first_rank = r->rank < 0 ? 0 : r->rank;
    e->file = file;
    e->first_line = r->source.line;
    snprintf(e->example, sizeof e->example, "%s", r->message);
    if (leaf) {
        leaf->groups[leaf->group_count++] = (uint32_t)t->count;
        leaf->version++;
    } else
        t->exact[slot] = (uint32_t)t->count + 1;
    t->count++;
    return e;
}

/* The group of a line that joined none in its leaf: a new one in the leaf
 * Drain's insertion gives it; past a full leaf, the group of its exact
 * text (made when new). NULL with *err TW_OK: TW_TEMPLATES_MAX groups made,
 * the line is other. */
static tw_template *place(tw_templates *t, const line_tokens *l, const tw_record *r, uint32_t file, int *err)
{
    *err = TW_ENOMEM;
    tree_node *leaf = make_leaf(t, l);
    if (!leaf)
        return NULL;
    size_t slot = 0;
    if (leaf->group_count == TW_TEMPLATES_LEAF_MAX) {
        tw_template *e = exact_group(t, l, &slot);
        if (e)
            return e;
        leaf = NULL;
    }
    if (t->count == TW_TEMPLATES_MAX) {
        *err = TW_OK;
        return NULL;
    }
    if (make_room(t, leaf) != TW_OK)
        return NULL;
    if (!leaf) /* the table may have been made just now */
        exact_group(t, l, &slot);
    return start_group(t, l, r, file, leaf, slot);
}

/* Counts a line of e in launch (0-based), growing its launches. */
static int count_in_launch(tw_template *e, int launch, const tw_record *r, uint32_t file)
{
    if (launch < 0)
        launch = 0;
    if (launch >= e->launch_count) {
        tw_template_launch *grown = realloc(e->launches, sizeof *grown * (size_t)(launch + 1));
        if (!grown)
            return TW_ENOMEM;
        memset(grown + e->launch_count, 0, sizeof *grown * (size_t)(launch + 1 - e->launch_count));
        e->launches = grown;
        e->launch_count = launch + 1;
    }
    tw_template_launch *l = &e->launches[launch];
    if (l->count++ == 0) {
        l->first_line = r->source.line;
        l->file = file;
        l->rank = r->rank < 0 ? 0 : r->rank;
    }
    return TW_OK;
}

/* The group l went to last time, when its leaf has not changed since. A
 * template with no <*> that equals l needs no guard: no token differs. */
static tw_template *cached(tw_templates *t, const tree_node *leaf, line_tokens *l, uint64_t hash)
{
    const line_cache *c = &t->cache[hash % TEMPLATE_CACHE];
    if (!leaf || !c->group || c->hash != hash || c->leaf != leaf || c->version != leaf->version)
        return NULL;
    tw_template *e = &t->groups[c->group - 1];
    if (e->wild)
        guard(l);
    int same, wild; /* against a hash collision: the template already covers l as it is */
    return similarity(e, l, 0, &same, &wild) && same + wild == l->n ? e : NULL;
}

static void remember(tw_templates *t, const tree_node *leaf, uint64_t hash, const tw_template *e)
{
    if (leaf)
        t->cache[hash % TEMPLATE_CACHE] =
            (line_cache){.hash = hash, .leaf = leaf, .version = leaf->version, .group = (uint32_t)(e - t->groups) + 1};
}

/* The group of l: remembered, Drain's match in its leaf (generalised), or
 * placed anew; NULL with *err TW_OK: other. */
static tw_template *group_of(tw_templates *t, line_tokens *l, const tw_record *r, uint32_t file, int *err)
{
    *err = TW_OK;
    uint64_t hash = hash_bytes(l->text, strlen(l->text));
    tree_node *leaf = find_leaf(t, l);
    tw_template *e = cached(t, leaf, l, hash);
    if (e)
        return e;
    guard(l);
    if (leaf && (e = best_match(t, leaf, l)) != NULL) {
        leaf->version += generalise(e, l);
    } else if (!(e = place(t, l, r, file, err))) {
        return NULL;
    }
    remember(t, leaf, hash, e);
    return e;
}

int tw_templates_add(tw_templates **tp, const tw_record *r, uint32_t file, int launch)
{
    tw_templates *t = *tp;
    if (!t) {
        if (!(t = calloc(1, sizeof *t)) || !(t->cache = calloc(TEMPLATE_CACHE, sizeof *t->cache))) {
            free(t);
            return TW_ENOMEM;
        }
        *tp = t;
    }
    t->lines++;
    line_tokens l;
    tokenize(r->message, &l);
    if (l.n == 0)
        return TW_OK;
    int err;
    tw_template *e = group_of(t, &l, r, file, &err);
    if (!e) {
        t->other += err == TW_OK;
        return err;
    }
    e->count++;
    e->ranks_seen |= 1ull << ((r->rank < 0 ? 0 : r->rank) % 64);
    return count_in_launch(e, launch, r, file);
}

static bool says_trouble(const char *text)
{
    char lower[TEMPLATE_CAP];
    size_t i = 0;
    for (; text[i] && i + 1 < sizeof lower; i++)
        lower[i] = (char)tolower((unsigned char)text[i]);
    lower[i] = '\0';
    for (const char *const *w = trouble_words; *w; w++) {
        if (strstr(lower, *w))
            return true;
    }
    return false;
}

/* Entries in first-line order within a file, files in order. */
static int by_place(const void *a, const void *b)
{
    const tw_template *x = *(tw_template *const *)a, *y = *(tw_template *const *)b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->first_line < y->first_line ? -1 : x->first_line > y->first_line;
}

static tw_template **sorted(const tw_templates *t)
{
    tw_template **list = malloc(sizeof *list * (t->count ? t->count : 1));
    if (!list)
        return NULL;
    for (size_t i = 0; i < t->count; i++)
        list[i] = &t->groups[i];
    qsort(list, t->count, sizeof *list, by_place);
    return list;
}

static bool has_word(const char *text)
{
    for (const char *p = text; *p; p++) {
        if (isalpha((unsigned char)p[0]) && isalpha((unsigned char)p[1]))
            return true;
    }
    return false;
}

/* The template appeared only after the last step its rank made, judged in
 * each launch it appeared in (what a process printed as it went down): in
 * every launch with a line of it, its first line there follows the last
 * step its rank made in that launch. A launch in which the rank made no
 * step has no "after" (a start-up line of a launch that never trained, or a
 * config dump printed again by each attempt, is no news). */
static bool after_last_step(const tw_run *run, const tw_template *e)
{
    bool after = false;
    for (int i = 0; i < e->launch_count; i++) {
        const tw_template_launch *l = &e->launches[i];
        if (!l->count)
            continue;
        const tw_rank *rk = i < tw_run_launches(run) ? tw_run_rank(tw_run_launch(run, i), l->rank) : NULL;
        if (!rk || rk->steps == 0 || rk->last.file != l->file || rk->last.line > l->first_line)
            return false;
        after = true;
    }
    return after;
}

/* The launch (1-based) of the template's first line: the first it appeared in. */
static int first_launch(const tw_template *e)
{
    for (int i = 0; i < e->launch_count; i++) {
        if (e->launches[i].count)
            return i + 1;
    }
    return 1;
}

int tw_templates_unusual(const tw_run *run, bool healthy, tw_unusual_line **out, int *count)
{
    *out = NULL;
    *count = 0;
    const tw_templates *t = run->templates;
    if (!t || t->count == 0)
        return TW_OK;
    tw_template **list = sorted(t);
    tw_unusual_line *items = calloc(TW_UNUSUAL_MAX, sizeof *items);
    if (!list || !items) {
        free(list);
        free(items);
        return TW_ENOMEM;
    }
    int ranks = 0;
    for (int i = 0; i < run->rank_count; i++)
        ranks += run->ranks[i]->used;
    int n = 0;
    for (size_t i = 0; i < t->count && n < TW_UNUSUAL_MAX; i++) {
        const tw_template *e = list[i];
        if (e->count > TW_UNUSUAL_RARE || !has_word(e->text))
            continue; /* frequent, or decoration ("-----") */
        unsigned why = 0;
        why |= says_trouble(e->text) ? TW_UNUSUAL_TROUBLE : 0;
        why |= ranks > 1 && __builtin_popcountll(e->ranks_seen) == 1 ? TW_UNUSUAL_ONE_RANK : 0;
        why |= !healthy && after_last_step(run, e) ? TW_UNUSUAL_AFTER_LAST_STEP : 0;
        if (!why)
            continue;
        tw_unusual_line *u = &items[n++];
        snprintf(u->template_text, sizeof u->template_text, "%s", e->text);
        snprintf(u->example, sizeof u->example, "%s", e->example);
        u->why = why;
        u->count = e->count;
        u->rank = e->first_rank;
        u->ranks = __builtin_popcountll(e->ranks_seen);
        u->where = tw_run_source(run, e->file, e->first_line);
        u->launch = first_launch(e);
        u->launch_count = e->launch_count < TW_UNUSUAL_LAUNCHES ? e->launch_count : TW_UNUSUAL_LAUNCHES;
        for (int l = 0; l < u->launch_count; l++)
            u->launch_lines[l] = e->launches[l].count;
    }
    free(list);
    *out = items;
    *count = n;
    return TW_OK;
}

/* "1:3,3:5": the lines of each launch it appeared in (1-based). */
static const char *by_launch(const tw_template *e, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < e->launch_count && n + 24 < cap; i++) {
        if (e->launches[i].count)
            n += (size_t)snprintf(buf + n, cap - n, "%s%d:%llu", n ? "," : "", i + 1,
                                  (unsigned long long)e->launches[i].count);
    }
    return buf;
}

void tw_templates_write(FILE *out, const tw_run *run)
{
    const tw_templates *t = run->templates;
    if (run->lines_not_mined)
        fprintf(out, "\nTemplates  %llu unread lines could not be grouped: out of memory\n",
                (unsigned long long)run->lines_not_mined);
    if (!t || t->count == 0) {
        if (!run->lines_not_mined)
            fputs("\nTemplates  no line went unread by the formats\n", out);
        return;
    }
    fprintf(out, "\nTemplates  %zu of the %llu lines no format read%s\n", t->count, (unsigned long long)t->lines,
            t->other ? " (more templates counted as other)" : "");
    tw_template **list = sorted(t);
    if (!list)
        return;
    fprintf(out, "  %8s  %5s  %-12s  %-40s  %s\n", "lines", "ranks", "by launch", "first", "template");
    for (size_t i = 0; i < t->count; i++) {
        const tw_template *e = list[i];
        char where[256], launches[256];
        tw_where(run, e->file, e->first_line, where, sizeof where);
        fprintf(out, "  %8llu  %5d  %-12s  %-40s  %s\n", (unsigned long long)e->count,
                __builtin_popcountll(e->ranks_seen), by_launch(e, launches, sizeof launches), where, e->text);
    }
    if (t->other)
        fprintf(out, "  %8llu  %5s  %-12s  %-40s  %s\n", (unsigned long long)t->other, "", "", "", "(other templates)");
    free(list);
}

void tw_run_write_templates(FILE *out, const tw_run *run)
{
    tw_templates_write(out, run);
}

const char *tw_unusual_why(unsigned why, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s%s%s", why & TW_UNUSUAL_TROUBLE ? "says trouble" : "",
             (why & TW_UNUSUAL_TROUBLE) && (why & ~TW_UNUSUAL_TROUBLE) ? ", " : "",
             why & TW_UNUSUAL_ONE_RANK ? "one rank only" : "",
             (why & TW_UNUSUAL_ONE_RANK) && (why & TW_UNUSUAL_AFTER_LAST_STEP) ? ", " : "",
             why & TW_UNUSUAL_AFTER_LAST_STEP ? "after the last step" : "");
    return buf;
}
