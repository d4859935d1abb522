/*
 * chart.c: line charts as inline SVG (chart.h).
 *
 * Hand-drawn on purpose: a chart is a few hundred coordinates, axes and
 * ticks, which the C code writes in less than a charting library's licence
 * header, and the page stays one file with nothing to fetch, pin or audit.
 * The one trade-off: drawing is done for a fixed width (the SVG scales), so
 * a series is reduced to the minimum and maximum of TW_CHART_BUCKETS buckets
 * of steps before it is drawn; both extremes of every bucket survive, so the
 * global minimum and maximum of each series are always among the points
 * drawn and a spike one step wide is never averaged away.
 */
#include "chart.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/grow.h"
#include "../core/json.h"
#include "html.h"
#include "trainwatch/error.h"

void tw_chart_init(tw_chart *c, const char *id, const char *title, const char *unit)
{
    memset(c, 0, sizeof *c);
    snprintf(c->id, sizeof c->id, "%s", id);
    snprintf(c->title, sizeof c->title, "%s", title);
    snprintf(c->unit, sizeof c->unit, "%s", unit);
    c->y_scale = 1;
    c->hline = NAN;
    c->t0 = NAN;
}

void tw_chart_free(tw_chart *c)
{
    for (int i = 0; i < c->series_count; i++) {
        free(c->series[i].points);
        free(c->series[i].bad);
    }
    free(c->series);
    c->series = NULL;
    c->series_count = c->series_cap = 0;
}

tw_chart_series *tw_chart_series_add(tw_chart *c, const char *name, int colour)
{
    if (TW_GROW(c->series, c->series_count, c->series_cap, 4) != TW_OK)
        return NULL;
    tw_chart_series *s = &c->series[c->series_count++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->colour = colour % TW_CHART_PALETTE;
    return s;
}

static int push(tw_chart_point **items, size_t *count, size_t *cap, tw_chart_point p)
{
    if (*count == *cap) {
        size_t n = *cap ? *cap * 2 : 64;
        tw_chart_point *grown = realloc(*items, sizeof *grown * n);
        if (!grown)
            return TW_ENOMEM;
        *items = grown;
        *cap = n;
    }
    (*items)[(*count)++] = p;
    return TW_OK;
}

int tw_chart_point_add(tw_chart_series *s, double step, double time, double y)
{
    tw_chart_point p = {step, time, y};
    if (!isfinite(step))
        return TW_OK;
    if (isfinite(y))
        return push(&s->points, &s->count, &s->cap, p);
    return push(&s->bad, &s->bad_count, &s->bad_cap, p);
}

static bool has_step(const tw_chart_point *items, size_t n, double step)
{
    for (size_t i = 0; i < n; i++) {
        if (items[i].step == step)
            return true;
    }
    return false;
}

int tw_chart_point_insert(tw_chart_series *s, double step, double time, double y)
{
    if (!isfinite(step) || has_step(s->points, s->count, step) || has_step(s->bad, s->bad_count, step))
        return TW_OK;
    tw_chart_point **items = isfinite(y) ? &s->points : &s->bad;
    size_t *count = isfinite(y) ? &s->count : &s->bad_count, *cap = isfinite(y) ? &s->cap : &s->bad_cap;
    if (push(items, count, cap, (tw_chart_point){step, time, y}) != TW_OK)
        return TW_ENOMEM;
    size_t i = *count - 1;
    while (i > 0 && (*items)[i - 1].step > step) {
        tw_chart_point t = (*items)[i - 1];
        (*items)[i - 1] = (*items)[i];
        (*items)[i] = t;
        i--;
    }
    return TW_OK;
}

void tw_chart_band_add(tw_chart *c, double step0, double step1, double time0, double time1, const char *label)
{
    if (c->band_count == TW_CHART_BANDS)
        return;
    tw_chart_band *b = &c->bands[c->band_count++];
    *b = (tw_chart_band){step0, step1, time0, time1, ""};
    snprintf(b->label, sizeof b->label, "%s", label);
}

void tw_chart_mark_add(tw_chart *c, int finding, double step, double time)
{
    if (c->mark_count < TW_CHART_MARKS)
        c->marks[c->mark_count++] = (tw_chart_mark){finding, step, time};
}

size_t tw_chart_points(const tw_chart *c)
{
    size_t n = 0;
    for (int i = 0; i < c->series_count; i++)
        n += c->series[i].count + c->series[i].bad_count;
    return n;
}

/* ---- what is drawn ------------------------------------------------- */

typedef struct range {
    double lo, hi;
} range;

static void widen(range *r, double v)
{
    if (!isfinite(v))
        return;
    if (v < r->lo)
        r->lo = v;
    if (v > r->hi)
        r->hi = v;
}

static bool range_valid(const range *r)
{
    return r->lo <= r->hi;
}

/* The indices of the points drawn: every point, or per bucket of steps the
 * one with the smallest and the one with the largest value, in step order.
 * Returns the count; picked holds at least 2 * TW_CHART_BUCKETS + 2. */
static size_t downsample(const tw_chart_series *s, range steps, size_t *picked)
{
    if (s->count <= 2 * TW_CHART_BUCKETS) {
        for (size_t i = 0; i < s->count; i++)
            picked[i] = i;
        return s->count;
    }
    size_t n = 0, lo = 0, hi = 0;
    int bucket = -1;
    double width = steps.hi > steps.lo ? steps.hi - steps.lo : 1;
    for (size_t i = 0; i <= s->count; i++) {
        int b = -1;
        if (i < s->count) {
            b = (int)((s->points[i].step - steps.lo) / width * TW_CHART_BUCKETS);
            b = b < 0 ? 0 : b >= TW_CHART_BUCKETS ? TW_CHART_BUCKETS - 1 : b;
        }
        if (b != bucket || i == s->count) {
            if (bucket >= 0) {
                size_t a = lo < hi ? lo : hi, z = lo < hi ? hi : lo;
                picked[n++] = a;
                if (z != a)
                    picked[n++] = z;
            }
            if (i == s->count)
                break;
            bucket = b;
            lo = hi = i;
            continue;
        }
        if (s->points[i].y < s->points[lo].y)
            lo = i;
        if (s->points[i].y > s->points[hi].y)
            hi = i;
    }
    return n;
}

typedef struct drawn {
    size_t *idx;
    size_t count;
} drawn;

typedef struct frame {
    range x, y;
    bool time; /* x is seconds since t0 */
    double t0;
    bool log_y;
} frame;

static double px(const frame *f, double x)
{
    double w = f->x.hi > f->x.lo ? f->x.hi - f->x.lo : 1;
    return TW_CHART_LEFT + (x - f->x.lo) / w * (TW_CHART_W - TW_CHART_LEFT - TW_CHART_RIGHT);
}

static double py(const frame *f, double y)
{
    double lo = f->y.lo, hi = f->y.hi;
    if (f->log_y) {
        y = log10(y > 0 ? y : lo > 0 ? pow(10, lo) : 1e-300);
    }
    double h = hi > lo ? hi - lo : 1;
    double v = TW_CHART_H - TW_CHART_BOTTOM - (y - lo) / h * (TW_CHART_H - TW_CHART_TOP - TW_CHART_BOTTOM);
    return v < TW_CHART_TOP ? TW_CHART_TOP : v > TW_CHART_H - TW_CHART_BOTTOM ? TW_CHART_H - TW_CHART_BOTTOM : v;
}

/* Step ticks: 1, 2 or 5 times a power of ten, about n of them. */
static double nice_step(double span, int n)
{
    if (!(span > 0))
        return 1;
    double raw = span / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void fmt_value(char *buf, size_t cap, double v)
{
    double a = fabs(v);
    if (v == 0)
        snprintf(buf, cap, "0");
    else if (a >= 1e9 || a < 1e-3)
        snprintf(buf, cap, "%.3g", v);
    else if (a >= 1e6)
        snprintf(buf, cap, "%.4gM", v / 1e6);
    else if (a >= 1e4)
        snprintf(buf, cap, "%.4gk", v / 1e3);
    else
        snprintf(buf, cap, "%.4g", v);
}

static void fmt_seconds(char *buf, size_t cap, double s)
{
    if (s < 120)
        snprintf(buf, cap, "%.0fs", s);
    else if (s < 7200)
        snprintf(buf, cap, "%.0fm", s / 60);
    else if (s < 172800)
        snprintf(buf, cap, "%.1fh", s / 3600);
    else
        snprintf(buf, cap, "%.1fd", s / 86400);
}

static void axes(FILE *out, const frame *f, const char *unit)
{
    char b[48];
    /* x ticks */
    double span = f->x.hi - f->x.lo, step = nice_step(span, 8);
    if (f->time) {
        static const double units[] = {1,   2,    5,    10,   15,    30,    60,    120,   300,    600,
                                       900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800};
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            step = units[i];
            if (span / step <= 8)
                break;
        }
        if (span / step > 8)
            step = nice_step(span, 8);
    }
    for (double x = ceil(f->x.lo / step) * step; x <= f->x.hi + step * 1e-9; x += step) {
        double X = px(f, x);
        if (f->time)
            fmt_seconds(b, sizeof b, x);
        else
            fmt_value(b, sizeof b, x);
        fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", X, TW_CHART_TOP, X,
                TW_CHART_H - TW_CHART_BOTTOM);
        fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", X,
                TW_CHART_H - TW_CHART_BOTTOM + 14, b);
    }
    /* y ticks */
    if (f->log_y) {
        for (double e = ceil(f->y.lo); e <= f->y.hi + 1e-9; e += (f->y.hi - f->y.lo > 8 ? 2 : 1)) {
            double Y = py(f, pow(10, e));
            fmt_value(b, sizeof b, pow(10, e));
            fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", TW_CHART_LEFT, Y,
                    TW_CHART_W - TW_CHART_RIGHT, Y);
            fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", TW_CHART_LEFT - 4,
                    Y + 4, b);
        }
    } else {
        double ystep = nice_step(f->y.hi - f->y.lo, 5);
        for (double y = ceil(f->y.lo / ystep) * ystep; y <= f->y.hi + ystep * 1e-9; y += ystep) {
            double Y = py(f, y);
            fmt_value(b, sizeof b, fabs(y) < ystep * 1e-9 ? 0 : y);
            fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", TW_CHART_LEFT, Y,
                    TW_CHART_W - TW_CHART_RIGHT, Y);
            fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", TW_CHART_LEFT - 4,
                    Y + 4, b);
        }
    }
    fprintf(out, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", TW_CHART_LEFT,
            TW_CHART_H - TW_CHART_BOTTOM, TW_CHART_W - TW_CHART_RIGHT, TW_CHART_H - TW_CHART_BOTTOM);
    fprintf(out, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", TW_CHART_LEFT, TW_CHART_TOP,
            TW_CHART_LEFT, TW_CHART_H - TW_CHART_BOTTOM);
    fprintf(out, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>",
            (TW_CHART_LEFT + TW_CHART_W - TW_CHART_RIGHT) / 2, TW_CHART_H - 4,
            f->time ? "time since the first timestamp" : "step");
    fprintf(out, "<text class=\"label\" transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">",
            (TW_CHART_TOP + TW_CHART_H - TW_CHART_BOTTOM) / 2);
    tw_html_text(out, unit[0] ? unit : "value");
    fputs(f->log_y ? " (log)</text>" : "</text>", out);
}

static bool point_x(const frame *f, const tw_chart_point *p, double *x)
{
    *x = f->time ? p->time - f->t0 : p->step;
    return isfinite(*x);
}

static void bands(FILE *out, const tw_chart *c, const frame *f)
{
    for (int i = 0; i < c->band_count; i++) {
        const tw_chart_band *b = &c->bands[i];
        double x0 = f->time ? b->time0 - f->t0 : b->step0, x1 = f->time ? b->time1 - f->t0 : b->step1;
        if (!isfinite(x0) || !isfinite(x1))
            continue;
        double X0 = px(f, x0), X1 = px(f, x1);
        X0 = X0 < TW_CHART_LEFT ? TW_CHART_LEFT : X0;
        X1 = X1 > TW_CHART_W - TW_CHART_RIGHT ? TW_CHART_W - TW_CHART_RIGHT : X1;
        fprintf(out, "<rect class=\"band b%d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>", i % 2, X0,
                TW_CHART_TOP, X1 - X0 > 1 ? X1 - X0 : 1, TW_CHART_H - TW_CHART_TOP - TW_CHART_BOTTOM);
        tw_html_text(out, b->label);
        fputs("</title></rect>", out);
        fprintf(out, "<text class=\"bandlabel\" x=\"%.1f\" y=\"%.1f\">", X0 + 3, TW_CHART_TOP + 11);
        tw_html_text(out, b->label);
        fputs("</text>", out);
    }
}

static void marks(FILE *out, const tw_chart *c, const frame *f)
{
    double w = (TW_CHART_W - TW_CHART_LEFT - TW_CHART_RIGHT) * 0.02;
    for (int i = 0; i < c->mark_count; i++) {
        const tw_chart_mark *m = &c->marks[i];
        double x = f->time ? m->time - f->t0 : m->step;
        if (!isfinite(x))
            continue;
        double X = px(f, x);
        fputs("<g class=\"hl\"", out);
        if (!f->time) /* the link's target is in the step view; the script lights the time view's too */
            fprintf(out, " id=\"f-%d\"", m->finding);
        fprintf(out, " data-f=\"%d\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></g>", m->finding,
                X - w / 2, TW_CHART_TOP, w, TW_CHART_H - TW_CHART_TOP - TW_CHART_BOTTOM);
    }
}

static void series_path(FILE *out, const tw_chart *c, const tw_chart_series *s, const drawn *d, const frame *f)
{
    fprintf(out, "<polyline class=\"s c%d%s\" data-name=\"", s->colour, s->dashed ? " dashed" : "");
    tw_html_text(out, s->name);
    fputs("\" points=\"", out);
    size_t shown = 0;
    double lx = 0, ly = 0;
    for (size_t k = 0; k < d->count; k++) {
        const tw_chart_point *p = &s->points[d->idx[k]];
        double x;
        if (!point_x(f, p, &x))
            continue;
        lx = px(f, x);
        ly = py(f, p->y / c->y_scale);
        fprintf(out, "%s%.1f,%.1f", shown++ ? " " : "", lx, ly);
    }
    fputs("\"/>", out);
    if (shown == 1)
        fprintf(out, "<circle class=\"dot c%d\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>", s->colour, lx, ly);
    for (size_t k = 0; k < s->bad_count; k++) {
        const tw_chart_point *p = &s->bad[k];
        double x;
        if (!point_x(f, p, &x))
            continue;
        double X = px(f, x);
        fprintf(out, "<path class=\"bad\" d=\"M%.1f,%.1fl-5,-9h10z\"><title>", X, TW_CHART_TOP + 10);
        tw_html_text(out, s->name);
        fprintf(out, " %s at step %.0f</title></path>", isnan(p->y) ? "NaN" : p->y > 0 ? "+Inf" : "-Inf", p->step);
    }
}

static void svg(FILE *out, const tw_chart *c, const drawn *d, const frame *f)
{
    fprintf(out,
            "<svg class=\"plot %s\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-labelledby=\"%s-title\" "
            "data-x0=\"%.17g\" data-x1=\"%.17g\" data-t0=\"%.17g\" data-left=\"%.0f\" data-right=\"%.0f\">",
            f->time ? "v-time" : "v-step", TW_CHART_W, TW_CHART_H, c->id, f->x.lo, f->x.hi, f->time ? f->t0 : 0,
            TW_CHART_LEFT, TW_CHART_W - TW_CHART_RIGHT);
    bands(out, c, f);
    axes(out, f, c->unit);
    if (isfinite(c->hline)) {
        double Y = py(f, c->hline / c->y_scale);
        fprintf(out, "<line class=\"cap\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", TW_CHART_LEFT, Y,
                TW_CHART_W - TW_CHART_RIGHT, Y);
        fprintf(out, "<text class=\"caplabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">",
                TW_CHART_W - TW_CHART_RIGHT - 4, Y - 4);
        tw_html_text(out, c->hline_label);
        fputs("</text>", out);
    }
    marks(out, c, f);
    for (int i = 0; i < c->series_count; i++)
        series_path(out, c, &c->series[i], &d[i], f);
    fprintf(out, "<line class=\"guide\" x1=\"0\" y1=\"%.1f\" x2=\"0\" y2=\"%.1f\" visibility=\"hidden\"/></svg>\n",
            TW_CHART_TOP, TW_CHART_H - TW_CHART_BOTTOM);
}

static void legend(FILE *out, const tw_chart *c)
{
    fputs("<ul class=\"legend\">", out);
    for (int i = 0; i < c->series_count; i++) {
        const tw_chart_series *s = &c->series[i];
        fprintf(out, "<li><span class=\"key c%d%s\"></span>", s->colour, s->dashed ? " dashed" : "");
        tw_html_text(out, s->name);
        if (s->bad_count)
            fprintf(out, " <span class=\"badkey\">&#9660; %zu not finite</span>", s->bad_count);
        fputs("</li>", out);
    }
    if (isfinite(c->hline)) {
        fputs("<li><span class=\"key capkey\"></span>", out);
        tw_html_text(out, c->hline_label);
        fputs("</li>", out);
    }
    fputs("</ul>\n", out);
}

/* Facts of each series for a reader of the page (and for the tests): the
 * points it has, the points drawn, the extremes of its finite values. */
static void data_json(FILE *out, const tw_chart *c, const drawn *d)
{
    fprintf(out, "<script type=\"application/json\" class=\"chart-data\">{\"id\":\"%s\",\"y_scale\":", c->id);
    tw_json_number(out, c->y_scale);
    fputs(",\"series\":[", out);
    for (int i = 0; i < c->series_count; i++) {
        const tw_chart_series *s = &c->series[i];
        range r = {INFINITY, -INFINITY};
        for (size_t k = 0; k < s->count; k++)
            widen(&r, s->points[k].y);
        fprintf(out, "%s{\"name\":", i ? "," : "");
        tw_json_cstring(out, s->name);
        fprintf(out, ",\"points\":%zu,\"drawn\":%zu,\"not_finite\":%zu,\"min\":", s->count, d[i].count, s->bad_count);
        if (range_valid(&r))
            tw_json_number(out, r.lo);
        else
            fputs("null", out);
        fputs(",\"max\":", out);
        if (range_valid(&r))
            tw_json_number(out, r.hi);
        else
            fputs("null", out);
        fputc('}', out);
    }
    fputs("]}</script>\n", out);
}

static void table_row(FILE *out, const tw_chart *c, const tw_chart_point *p, double t0, bool have_time)
{
    if (c->time_only)
        fputs("<tr><td>", out); /* no step: the hover script reads NaN */
    else
        fprintf(out, "<tr><td>%.17g", p->step);
    if (have_time) {
        if (isfinite(p->time))
            fprintf(out, "<td>%.3f", p->time - t0);
        else
            fputs("<td>", out);
    }
    if (isfinite(p->y))
        fprintf(out, "<td>%.9g", p->y / c->y_scale);
    else
        fprintf(out, "<td>%s", isnan(p->y) ? "NaN" : p->y > 0 ? "+Inf" : "-Inf");
    fputs("</tr>", out);
}

/* The points drawn, one table body per series: the text alternative of the
 * chart, which the hover script also reads its values from. */
static void table(FILE *out, const tw_chart *c, const drawn *d, bool have_time, double t0)
{
    fprintf(out,
            "<details class=\"tableview\"><summary>Table of the points drawn</summary><table class=\"points\" "
            "data-chart=\"%s\"><thead><tr><th>step</th>",
            c->id);
    if (have_time)
        fputs("<th>time (s since the first)</th>", out);
    fputs("<th>", out);
    tw_html_text(out, c->unit[0] ? c->unit : "value");
    fputs("</th></tr></thead>\n", out);
    for (int i = 0; i < c->series_count; i++) {
        const tw_chart_series *s = &c->series[i];
        fputs("<tbody data-series=\"", out);
        tw_html_text(out, s->name);
        fprintf(out, "\"><tr><th colspan=\"%d\">", have_time ? 3 : 2);
        tw_html_text(out, s->name);
        fputs("</th></tr>", out);
        for (size_t k = 0; k < d[i].count; k++)
            table_row(out, c, &s->points[d[i].idx[k]], t0, have_time);
        for (size_t k = 0; k < s->bad_count; k++)
            table_row(out, c, &s->bad[k], t0, have_time);
        fputs("</tbody>\n", out);
    }
    fputs("</table></details>\n", out);
}

/* The frame of one view: x over steps or seconds since t0, y over the
 * values drawn (and the horizontal line). */
static frame make_frame(const tw_chart *c, const drawn *d, bool time, double t0)
{
    frame f = {{INFINITY, -INFINITY}, {INFINITY, -INFINITY}, time, t0, false};
    bool positive = true;
    for (int i = 0; i < c->series_count; i++) {
        const tw_chart_series *s = &c->series[i];
        for (size_t k = 0; k < d[i].count; k++) {
            const tw_chart_point *p = &s->points[d[i].idx[k]];
            double x;
            if (!point_x(&f, p, &x))
                continue;
            widen(&f.x, x);
            widen(&f.y, p->y / c->y_scale);
            positive = positive && p->y > 0;
        }
        for (size_t k = 0; k < s->bad_count; k++) {
            double x;
            if (point_x(&f, &s->bad[k], &x))
                widen(&f.x, x);
        }
    }
    for (int i = 0; i < c->band_count; i++) {
        widen(&f.x, time ? c->bands[i].time0 - t0 : c->bands[i].step0);
        widen(&f.x, time ? c->bands[i].time1 - t0 : c->bands[i].step1);
    }
    if (isfinite(c->hline))
        widen(&f.y, c->hline / c->y_scale);
    if (!range_valid(&f.x))
        f.x = (range){0, 1};
    if (!range_valid(&f.y))
        f.y = (range){0, 1};
    if (f.x.hi == f.x.lo)
        f.x.lo -= 1, f.x.hi += 1;
    if (positive && f.y.lo > 0 && f.y.hi / f.y.lo >= 1000) {
        f.log_y = true;
        f.y.lo = floor(log10(f.y.lo));
        f.y.hi = ceil(log10(f.y.hi));
        if (f.y.hi == f.y.lo)
            f.y.hi += 1;
        return f;
    }
    if (f.y.hi == f.y.lo) {
        double pad = f.y.lo ? fabs(f.y.lo) * 0.1 : 1;
        f.y.lo -= pad, f.y.hi += pad;
    } else {
        double pad = (f.y.hi - f.y.lo) * 0.05;
        f.y.hi += pad;
        f.y.lo = f.y.lo >= 0 && f.y.lo - pad < 0 ? 0 : f.y.lo - pad;
    }
    return f;
}

void tw_chart_write(FILE *out, tw_chart *c)
{
    drawn *d = calloc((size_t)(c->series_count ? c->series_count : 1), sizeof *d);
    range steps = {INFINITY, -INFINITY}, times = {INFINITY, -INFINITY};
    for (int i = 0; i < c->series_count; i++) {
        for (size_t k = 0; k < c->series[i].count; k++) {
            widen(&steps, c->series[i].points[k].step);
            widen(&times, c->series[i].points[k].time);
        }
        for (size_t k = 0; k < c->series[i].bad_count; k++)
            widen(&times, c->series[i].bad[k].time);
    }
    for (int i = 0; d && i < c->series_count; i++) {
        d[i].idx = malloc(sizeof(size_t) * (c->series[i].count < 2 * TW_CHART_BUCKETS + 2 ? c->series[i].count + 1
                                                                                          : 2 * TW_CHART_BUCKETS + 2));
        if (d[i].idx)
            d[i].count = downsample(&c->series[i], steps, d[i].idx);
    }
    bool have_time = range_valid(&times);
    double t0 = isfinite(c->t0) && c->t0 < times.lo ? c->t0 : times.lo;
    fprintf(out, "<figure class=\"chart%s\" id=\"%s\"><figcaption id=\"%s-title\">",
            !have_time     ? " notime"
            : c->time_only ? " timeonly"
                           : "",
            c->id, c->id);
    tw_html_text(out, c->title);
    fputs("</figcaption>\n", out);
    if (c->note[0]) {
        fputs("<p class=\"note\">", out);
        tw_html_text(out, c->note);
        fputs("</p>\n", out);
    }
    legend(out, c);
    fputs("<div class=\"tip\" hidden></div>\n", out);
    if (d) {
        if (!c->time_only || !have_time) {
            frame f = make_frame(c, d, false, 0);
            c->log_y = f.log_y;
            svg(out, c, d, &f);
        }
        if (have_time) {
            frame t = make_frame(c, d, true, t0);
            c->log_y = c->time_only ? t.log_y : c->log_y;
            svg(out, c, d, &t);
        }
        table(out, c, d, have_time, have_time ? t0 : 0);
        data_json(out, c, d);
    }
    fputs("</figure>\n", out);
    for (int i = 0; d && i < c->series_count; i++)
        free(d[i].idx);
    free(d);
}
