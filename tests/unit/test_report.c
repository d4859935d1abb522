/*
 * test_report.c: the SVG charts of the HTML report (src/report/chart.c):
 * min/max-per-bucket downsampling keeps every series' extremes and a
 * one-point spike, never draws more than two points a bucket, puts
 * non-finite values in markers, inserts exact extremes in step order; the
 * page's text escaping. The pages as a whole are tested in a browser
 * (tests/e2e/test_report.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/minmax.h"
#include "diagnose/run.h"
#include "report/chart.h"
#include "report/html.h"
#include "trainwatch/error.h"

/* Writes the chart to memory and returns the text (caller frees). Not
 * inlined: gcc 12 at -O3 then takes the returned text for a pointer to the
 * local `text` itself (-Wdangling-pointer, a false positive). */
__attribute__((noinline)) static char *render(tw_chart *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    tw_chart_write(f, c);
    fclose(f);
    return text;
}

/* The number of coordinates of the first polyline of the step view. */
static size_t polyline_points(const char *svg)
{
    const char *p = strstr(svg, "<polyline");
    assert_non_null(p);
    p = strstr(p, "points=\"");
    assert_non_null(p);
    p += 8;
    size_t n = 0;
    for (; *p && *p != '"'; p++)
        n += *p == ',';
    return n;
}

static void test_long_series_keeps_a_one_point_spike_and_both_extremes(void **state)
{
    (void)state;
    tw_chart c;
    tw_chart_init(&c, "chart-t", "T", "");
    tw_chart_series *s = tw_chart_series_add(&c, "loss", 0);
    assert_non_null(s);
    for (int i = 0; i < 100000; i++)
        assert_int_equal(tw_chart_point_add(s, i, NAN,
                                            i == 77777   ? 50.0
                                            : i == 12345 ? -3.0
                                                         : 1.0 + 1.0 / (i + 1)),
                         TW_OK);
    char *svg = render(&c);
    size_t drawn = polyline_points(svg);
    assert_true(drawn <= 2 * TW_CHART_BUCKETS);
    assert_true(drawn >= TW_CHART_BUCKETS);
    /* the table view holds the spike and the minimum */
    assert_non_null(strstr(svg, "<tr><td>77777<td>50</tr>"));
    assert_non_null(strstr(svg, "<tr><td>12345<td>-3</tr>"));
    assert_non_null(strstr(svg, "\"min\":-3"));
    assert_non_null(strstr(svg, "\"max\":50"));
    assert_non_null(strstr(svg, "\"points\":100000"));
    free(svg);
    tw_chart_free(&c);
}

static void test_short_series_is_drawn_whole(void **state)
{
    (void)state;
    tw_chart c;
    tw_chart_init(&c, "chart-t", "T", "s");
    tw_chart_series *s = tw_chart_series_add(&c, "step time", 1);
    for (int i = 0; i < 37; i++)
        tw_chart_point_add(s, i * 10, 1000.0 + i, 0.5);
    char *svg = render(&c);
    assert_int_equal(polyline_points(svg), 37);
    assert_non_null(strstr(svg, "class=\"plot v-time\"")); /* timestamps: a time view too */
    free(svg);
    tw_chart_free(&c);
}

static void test_not_finite_values_are_markers_not_points(void **state)
{
    (void)state;
    tw_chart c;
    tw_chart_init(&c, "chart-t", "T", "");
    tw_chart_series *s = tw_chart_series_add(&c, "loss", 0);
    tw_chart_point_add(s, 1, NAN, 2.0);
    tw_chart_point_add(s, 2, NAN, NAN);
    tw_chart_point_add(s, 3, NAN, INFINITY);
    assert_int_equal(s->count, 1);
    assert_int_equal(s->bad_count, 2);
    char *svg = render(&c);
    assert_non_null(strstr(svg, "NaN at step 2"));
    assert_non_null(strstr(svg, "+Inf at step 3"));
    assert_null(strstr(svg, "class=\"plot v-time\"")); /* no timestamps: no time view */
    free(svg);
    tw_chart_free(&c);
}

static void test_insert_keeps_step_order_and_skips_known_steps(void **state)
{
    (void)state;
    tw_chart c;
    tw_chart_init(&c, "chart-t", "T", "");
    tw_chart_series *s = tw_chart_series_add(&c, "loss", 0);
    for (int i = 0; i < 10; i++)
        tw_chart_point_add(s, i * 10, NAN, 1);
    assert_int_equal(tw_chart_point_insert(s, 55, NAN, 9), TW_OK);
    assert_int_equal(tw_chart_point_insert(s, 50, NAN, 7), TW_OK); /* there already */
    assert_int_equal(s->count, 11);
    for (size_t i = 1; i < s->count; i++)
        assert_true(s->points[i - 1].step < s->points[i].step);
    assert_true(s->points[6].step == 55 && s->points[6].y == 9);
    tw_chart_free(&c);
}

/* 5000 evaluations of two metrics: the run keeps at most TW_EVALS_KEPT
 * points, both metrics of each evaluation kept, spread over the whole run. */
static void test_run_keeps_a_bounded_evenly_spread_evaluation_series(void **state)
{
    (void)state;
    tw_run *run;
    assert_int_equal(tw_run_new(&run, NULL), TW_OK);
    for (int i = 0; i < 5000; i++) {
        tw_record r;
        tw_record_init(&r);
        r.kind = TW_REC_EVAL;
        r.rank = 0;
        r.source.file = "eval.log";
        r.source.line = (uint64_t)i + 1;
        r.global_step = i * 100;
        r.metric_count = 2;
        snprintf(r.metrics[0].name, sizeof r.metrics[0].name, "acc");
        r.metrics[0].value = i / 5000.0;
        snprintf(r.metrics[1].name, sizeof r.metrics[1].name, "loss");
        r.metrics[1].value = 5000.0 - i;
        tw_run_add(run, &r);
    }
    const tw_eval_series *s = &run->eval_series;
    assert_true(s->count <= TW_EVALS_KEPT);
    assert_true(s->count >= TW_EVALS_KEPT / 2);
    assert_int_equal(s->count % 2, 0);
    assert_true(s->points[0].pos == 0);
    assert_true(s->points[s->count - 1].pos >= 4900 * 100 - 100 * (double)s->stride);
    for (size_t i = 0; i + 1 < s->count; i += 2) {
        assert_true(s->points[i].ordinal == s->points[i + 1].ordinal); /* both metrics of one evaluation */
        assert_int_not_equal(s->points[i].metric, s->points[i + 1].metric);
        assert_int_equal(s->points[i].ordinal % s->stride, 0);
    }
    tw_run_free(run);
}

/* 10000 steps, each with ten loss parts and an accuracy: every kept point
 * carries the first TW_POINT_LOSS_PARTS parts and the accuracy (the parts do
 * not crowd it out) with the record's values, through the series' halving;
 * the ninth and tenth parts are in the notes only. A rank without named
 * metrics has no metric array. */
static void test_run_keeps_named_training_metrics_per_point(void **state)
{
    (void)state;
    tw_run *run;
    assert_int_equal(tw_run_new(&run, NULL), TW_OK);
    for (int i = 0; i < 10000; i++) {
        tw_record r;
        tw_record_init(&r);
        r.kind = TW_REC_STEP;
        r.rank = 0;
        r.source.file = "train.log";
        r.source.line = (uint64_t)i + 1;
        r.global_step = i;
        r.loss = 1;
        r.fields = TW_F_LOSS;
        r.metric_count = 11;
        for (int k = 0; k < 10; k++) {
            snprintf(r.metrics[k].name, sizeof r.metrics[k].name, "loss_%d", k);
            r.metrics[k].value = i * 10 + k;
        }
        snprintf(r.metrics[10].name, sizeof r.metrics[10].name, "acc");
        r.metrics[10].value = i;
        tw_record plain = r; /* rank 1 logs no named metric */
        plain.rank = 1;
        plain.metric_count = 0;
        tw_run_add(run, &plain);
        if (i == 5000) /* a record listing them in another order */
            for (int k = 0; k < 10; k++) {
                snprintf(r.metrics[k].name, sizeof r.metrics[k].name, "loss_%d", 9 - k);
                r.metrics[k].value = i * 10 + 9 - k;
            }
        tw_run_add(run, &r);
    }
    const tw_rank *rk = tw_run_rank(run, 0);
    assert_non_null(rk);
    assert_int_equal(rk->train_metrics.count, 11);
    assert_int_equal(rk->metric_slot[8], -1);
    assert_int_equal(rk->metric_slot[9], -1);
    int acc = rk->metric_slot[10];
    assert_int_equal(acc, TW_POINT_LOSS_PARTS);
    assert_true(rk->series.stride > 1 && rk->series.count <= TW_SERIES_MAX);
    for (size_t i = 0; i < rk->series.count; i++) {
        const tw_point *p = &rk->series.points[i];
        assert_int_equal(p->metric_set, (1u << (TW_POINT_LOSS_PARTS + 1)) - 1);
        for (int k = 0; k < TW_POINT_LOSS_PARTS; k++)
            assert_true(rk->series.metric[i][k] == p->pos * 10 + k);
        assert_true(rk->series.metric[i][acc] == p->pos);
    }
    assert_true(rk->series.points[rk->series.count - 1].pos >= 9999 - (double)rk->series.stride);
    assert_null(tw_run_rank(run, 1)->series.metric); /* no named metric, no array */
    assert_true(tw_run_rank(run, 1)->series.count > 0);
    tw_run_free(run);
}

/* A bounded min/max series: 100000 samples in at most TW_MINMAX_BUCKETS
 * buckets of equal size, every extreme kept with its time, in time order. */
static void test_minmax_series_keeps_every_extreme(void **state)
{
    (void)state;
    static tw_minmax m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < 100000; i++)
        tw_minmax_add(&m, i, i == 77777 ? 1000 : i == 33333 ? -5 : i % 7);
    tw_minmax_add(&m, 100000, NAN); /* not a value */
    assert_true(m.count <= TW_MINMAX_BUCKETS && m.count > TW_MINMAX_BUCKETS / 2);
    assert_int_equal(m.samples, 100000);
    uint64_t n = 0;
    for (int i = 0; i < m.count; i++) {
        assert_true(i == m.count - 1 || m.b[i].n == m.per_bucket);
        n += m.b[i].n;
    }
    assert_int_equal(n, 100000);
    static double t[2 * TW_MINMAX_BUCKETS], v[2 * TW_MINMAX_BUCKETS];
    size_t k = tw_minmax_points(&m, t, v);
    assert_true(k <= 2 * (size_t)m.count);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < k; i++) {
        assert_true(i == 0 || t[i] > t[i - 1]);
        lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
        if (v[i] == 1000)
            assert_true(t[i] == 77777);
    }
    assert_true(lo == -5 && hi == 1000);
}

static void test_text_is_escaped(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tw_html_text(f, "<script>a&b \"c\" 'd'\x1b[0m</script>");
    fclose(f);
    assert_string_equal(text, "&lt;script&gt;a&amp;b &quot;c&quot; &#39;d&#39; [0m&lt;/script&gt;");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_series_keeps_a_one_point_spike_and_both_extremes),
        cmocka_unit_test(test_short_series_is_drawn_whole),
        cmocka_unit_test(test_not_finite_values_are_markers_not_points),
        cmocka_unit_test(test_insert_keeps_step_order_and_skips_known_steps),
        cmocka_unit_test(test_run_keeps_a_bounded_evenly_spread_evaluation_series),
        cmocka_unit_test(test_run_keeps_named_training_metrics_per_point),
        cmocka_unit_test(test_minmax_series_keeps_every_extreme),
        cmocka_unit_test(test_text_is_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
