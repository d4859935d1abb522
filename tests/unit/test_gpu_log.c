/*
 * test_gpu_log.c: the GPU telemetry reader (src/parse/gpu_log.c): each
 * nvidia-smi output it reads, what it leaves out, and detection. The lines
 * are the shapes of the real outputs in ../shared/corpus/gpu/ (the
 * end-to-end test reads those files whole).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */

#include "parse/gpu_log.h"
#include "parse/scan.h"

#define MAX_SAMPLES 64

typedef struct got {
    tw_gpu_sample s[MAX_SAMPLES];
    int n;
} got;

static void keep(void *arg, const tw_gpu_sample *s)
{
    got *g = arg;
    if (g->n < MAX_SAMPLES)
        g->s[g->n++] = *s;
}

static got *read_text(const char *text)
{
    static got g;
    memset(&g, 0, sizeof g);
    tw_gpu_reader *r;
    assert_int_equal(tw_gpu_reader_new(&r), 0);
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        tw_gpu_reader_line(r, p, len, keep, &g);
        p += len + (nl != NULL);
    }
    tw_gpu_reader_free(r);
    return &g;
}

static void paddle_default_gpu_log(void **state)
{
    (void)state;
    got *g =
        read_text("index,uuid,driver_version,name,gpu_serial,display_active,display_mode\n"
                  "0,GPU-43db14ef-15e7-0c43-1a35-c81191c2a009,546.17,NVIDIA GeForce RTX 4070,[N/A],Enabled,Enabled\n"
                  "\n"
                  "pid,process_name,gpu_uuid,gpu_name,used_memory\n"
                  "index,utilization_gpu,memory_total,memory_used,memory_free,timestamp\n"
                  "0,5,12282,405,11620,2024/03/11 16:02:37.871\n"
                  "0,31,12282,9337,2688,2024/03/11 16:03:07.921\n");
    assert_int_equal(g->n, 2);
    assert_int_equal(g->s[0].gpu, 0);
    assert_true(g->s[0].util == 5);
    assert_true(g->s[1].mem_used == 9337 * 1048576.0);
    assert_true(g->s[1].mem_total == 12282 * 1048576.0);
    assert_true(g->s[1].time == tw_civil_seconds(2024, 3, 11, 16, 3, 7.921));
    assert_int_equal(g->s[1].line, 7);
}

static void query_gpu_csv_with_units(void **state)
{
    (void)state;
    got *g = read_text("timestamp, index, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n"
                       "2026/07/14 08:12:53.353, 1, NVIDIA H100 80GB HBM3, 100 %, 19818 MiB, 81559 MiB\n"
                       "2026/07/14 08:12:54.353, 1, NVIDIA H100 80GB HBM3, [N/A], [N/A], 81559 MiB\n");
    assert_int_equal(g->n, 1); /* a row with neither utilisation nor memory is no sample */
    assert_int_equal(g->s[0].gpu, 1);
    assert_true(g->s[0].util == 100);
    assert_true(g->s[0].mem_used == 19818 * 1048576.0);
}

static void headerless_csv_is_not_read(void **state)
{
    (void)state;
    got *g = read_text("2026/07/14 08:12:53.353, 0, 100 %, 19818 MiB\n");
    assert_int_equal(g->n, 0);
}

static void dmon_rows(void **state)
{
    (void)state;
    got *g = read_text("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk \n"
                       "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz \n"
                       "    0    631     63     57    100     10      0      0      0      0   2619   1980 \n"
                       "    0     69     41     47      0      0      0      0      0      0   2619    345 \n");
    assert_int_equal(g->n, 2);
    assert_true(g->s[0].util == 100);
    assert_true(g->s[1].util == 0);
    assert_true(isnan(g->s[0].time));
    assert_true(isnan(g->s[0].mem_used)); /* dmon's "mem" is a utilisation, not bytes */
}

static void dmon_with_date_time_and_fb(void **state)
{
    (void)state;
    got *g = read_text("#Date       Time        gpu     sm    mem     fb\n"
                       "#YYYYMMDD   HH:MM:SS    Idx      %      %     MB\n"
                       " 20240311   16:02:37      0     22      5   9337\n");
    assert_int_equal(g->n, 1);
    assert_true(g->s[0].time == tw_civil_seconds(2024, 3, 11, 16, 2, 37));
    assert_true(g->s[0].util == 22);
    assert_true(g->s[0].mem_used == 9337 * 1048576.0);
}

static void pmon_skips_processes_without_numbers(void **state)
{
    (void)state;
    got *g = read_text("# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command \n"
                       "# Idx           #    C/G      %      %      %      %      %      %    name \n"
                       "    0      11327     C      -      -      -      -      -      -    memhog         \n"
                       "    0      11345     C     99     10      -      -      -      -    gpu_burn       \n");
    assert_int_equal(g->n, 1);
    assert_true(g->s[0].util == 99);
}

static void query_snapshot(void **state)
{
    (void)state;
    got *g = read_text("==============NVSMI LOG==============\n"
                       "\n"
                       "Timestamp                                              : Tue Jul 14 08:12:38 2026\n"
                       "Attached GPUs                                          : 1\n"
                       "GPU 00000000:00:09.0\n"
                       "    Product Name                                       : NVIDIA H100 80GB HBM3\n"
                       "    FB Memory Usage\n"
                       "        Total                                          : 81559 MiB\n"
                       "        Reserved                                       : 479 MiB\n"
                       "        Used                                           : 19818 MiB\n"
                       "    BAR1 Memory Usage\n"
                       "        Total                                          : 131072 MiB\n"
                       "        Used                                           : 1 MiB\n"
                       "    Utilization\n"
                       "        GPU                                            : 100 %\n"
                       "        Memory                                         : 9 %\n");
    assert_int_equal(g->n, 1);
    assert_int_equal(g->s[0].gpu, 0);
    assert_true(g->s[0].util == 100);
    assert_true(g->s[0].mem_used == 19818 * 1048576.0);
    assert_true(g->s[0].mem_total == 81559 * 1048576.0);
    assert_true(g->s[0].time == tw_civil_seconds(2026, 7, 14, 8, 12, 38));
}

static void detection(void **state)
{
    (void)state;
    const char *paddle = "index,uuid,driver_version,name,gpu_serial,display_active,display_mode\n"
                         "0,GPU-43db,546.17,NVIDIA GeForce RTX 4070,[N/A],Enabled,Enabled\n\n"
                         "pid,process_name,gpu_uuid,gpu_name,used_memory\n"
                         "index,utilization_gpu,memory_total,memory_used,memory_free,timestamp\n";
    assert_true(tw_gpu_log_detect(paddle, strlen(paddle)));
    const char *metrics_csv = "epoch,step,loss,lr\n1,10,0.5,0.1\n";
    assert_false(tw_gpu_log_detect(metrics_csv, strlen(metrics_csv)));
    const char *train = "[2024/03/09 15:15:33] ppocr INFO: epoch: [1/2], global_step: 5, loss: 0.5\n";
    assert_false(tw_gpu_log_detect(train, strlen(train)));
    const char *dmon = "# gpu    pwr  gtemp  mtemp     sm    mem\n";
    assert_true(tw_gpu_log_detect(dmon, strlen(dmon)));
    const char *cut = "# gpu    pwr  gtemp  mtemp     sm    mem"; /* no newline: undecided */
    assert_false(tw_gpu_log_detect(cut, strlen(cut)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(paddle_default_gpu_log),
        cmocka_unit_test(query_gpu_csv_with_units),
        cmocka_unit_test(headerless_csv_is_not_read),
        cmocka_unit_test(dmon_rows),
        cmocka_unit_test(dmon_with_date_time_and_fb),
        cmocka_unit_test(pmon_skips_processes_without_numbers),
        cmocka_unit_test(query_snapshot),
        cmocka_unit_test(detection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
