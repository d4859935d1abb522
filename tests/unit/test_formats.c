/*
 * test_formats.c: one test per log format: a few real-shaped lines in, the
 * records that must come out. Each test is readable alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "collect.h"

static void test_hapi_verbose2_steps_and_eval(void **state)
{
    (void)state;
    collected_records *c = parse_text("Epoch 1/10\n"
                                      "step  10/938 - loss: 0.5420 - acc: 0.8203 - 23ms/step\n"
                                      "step 938/938 - loss: 0.1158 - acc: 0.9020 - 1s/step\n"
                                      "Eval begin...\n"
                                      "step 196/196 - loss: 0.5715 - acc: 0.7406 - 3ms/step\n"
                                      "Eval samples: 6250\n",
                                      NULL, NULL);
    assert_string_equal(c->stats.format, "hapi");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(r->epoch_total, 10);
    assert_int_equal(r->step, 10);
    assert_int_equal(r->step_total, 938);
    assert_true(r->loss == 0.5420);
    assert_true(fabs(r->batch_time - 0.023) < 1e-12);
    assert_true(tw_record_metric(r, "acc") == 0.8203);
    assert_true(nth_kind(c, TW_REC_STEP, 1)->batch_time == 1.0);
    const tw_record *e = nth_kind(c, TW_REC_EVAL, 0);
    assert_non_null(e);
    assert_true(tw_record_metric(e, "acc") == 0.7406);
    assert_true(tw_record_metric(e, "loss") == 0.5715);
    free(c);
}

static void test_hapi_progress_rewrites_on_one_line(void **state)
{
    (void)state;
    collected_records *c = parse_text("Epoch 1/5\nstep  10/938 [....] - loss: 0.9679 - acc: 0.4109 - ETA: 13s - 14ms/stepstep 938/938 [====] - loss: 0.1158 - acc: 0.9020 - 10ms/step          \n", NULL, NULL);
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 0)->step, 10);
    assert_true(nth_kind(c, TW_REC_STEP, 0)->eta == 13);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->step, 938);
    assert_true(nth_kind(c, TW_REC_STEP, 1)->loss == 0.1158);
    free(c);
}

static void test_ppocr_new_and_old_lines(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "[2024/03/09 15:15:33] ppocr INFO: epoch: [1/1200], global_step: 5, lr: 0.028000, loss: 6.714170, loss_text: 0.764113, avg_reader_cost: 0.23760 s, avg_batch_cost: 0.99427 s, avg_samples: 4.0, ips: 4.02304 samples/s, eta: 3 days, 10:51:17, max_mem_reserved: 11326 MB\n"
        "[2020/12/17 15:59:50] root INFO: epoch: [0/500], iter: 10, lr: 0.001000, loss: 626.317383, acc: 0.000000, reader_cost: 1.15735 s, batch_cost: 4.82684 s, samples: 2816, ips: 58.34045\n"
        "[2020/12/17 18:33:35] root INFO: cur metirc, acc: 0.002387366058816742, norm_edit_dis: 0.0334, fps: 190.05\n"
        "[2020/12/17 18:33:35] root INFO: best metirc, acc: 0.002387366058816742, best_epoch: 0\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "ppocr");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->global_step, 5);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(r->epoch_total, 1200);
    assert_true(r->data_time == 0.2376 && r->batch_time == 0.99427);
    assert_true(r->eta == 3 * 86400 + 10 * 3600 + 51 * 60 + 17);
    assert_true(tw_has(r, TW_F_TIME));
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->global_step, 10);
    assert_int_equal(count_kind(c, TW_REC_EVAL), 1);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "norm_edit_dis") == 0.0334);
    free(c);
}

static void test_ppdet_steps_and_coco_ap(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "[08/02 02:46:05] ppdet.engine INFO: Epoch: [0] [200/464] learning_rate: 0.000010 loss_class: 0.171225 loss: 34.682461 eta: 4:07:18 batch_cost: 0.4416 data_cost: 0.0002 ips: 4.5291 images/s\n"
        " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.026\n"
        "[08/02 02:48:58] ppdet.engine INFO: Best test bbox ap is 0.026.\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "ppdet");
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_non_null(r);
    assert_int_equal(r->epoch, 0);
    assert_int_equal(r->step, 200);
    assert_int_equal(r->step_total, 464);
    assert_true(r->loss == 34.682461 && r->lr == 0.00001 && r->data_time == 0.0002);
    assert_true(tw_record_metric(r, "loss_class") == 0.171225);
    assert_int_equal(count_kind(c, TW_REC_EVAL), 2);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "bbox_mAP") == 0.026);
    free(c);
}

static void test_ppcls_train_and_eval_average(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "[2024/07/31 20:24:32] ppcls INFO: [Train][Epoch 24/120][Iter: 0/304]lr(PiecewiseDecay): 0.00100000, top1: 1.00000, CELoss: 0.01757, loss: 0.01757, batch_cost: 0.61280s, reader_cost: 0.12493, ips: 26.10981 samples/s, eta: 5:01:10\n"
        "[2024/07/31 20:25:32] ppcls INFO: [Eval][Epoch 24][Iter: 0/10]CELoss: 0.3, loss: 0.3, top1: 0.9\n"
        "[2024/07/31 20:25:40] ppcls INFO: [Eval][Epoch 24][Avg]CELoss: 0.31, loss: 0.31, top1: 0.91, top5: 0.99\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "ppcls");
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->epoch, 24);
    assert_int_equal(r->step_total, 304);
    assert_true(r->lr == 0.001 && r->batch_time == 0.6128 && r->data_time == 0.12493);
    assert_int_equal(count_kind(c, TW_REC_EVAL), 1);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "top5") == 0.99);
    free(c);
}

static void test_paddleseg_train_and_eval(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "2021-11-23 20:45:58 [INFO]\t[TRAIN] epoch: 1, iter: 10/80000, loss: 6.8504, lr: 0.009999, batch_cost: 1.5401, reader_cost: 0.12922, ips: 1.2986 samples/sec | ETA 34:13:14\n"
        "2021-11-23 21:45:58 [INFO]\t[EVAL] #Images: 500 mIoU: 0.3712 Acc: 0.8650 Kappa: 0.81\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "paddleseg");
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->global_step, 10);
    assert_int_equal(r->step_total, 80000);
    assert_true(r->eta == 34 * 3600 + 13 * 60 + 14);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "mIoU") == 0.3712);
    free(c);
}

static void test_paddlevideo_ansi_and_epoch_summary(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "[10/05 20:31:36] epoch:[  1/100] \x1b[95mtrain step:10  \x1b[0m \x1b[92mloss: 3.33008 lr: 0.006990 top1: 0.12285\x1b[0m \x1b[92mbatch_cost: 0.54446 sec,\x1b[0m \x1b[92mreader_cost: 0.00037 sec,\x1b[0m ips: 117.54796 instance/sec.\n"
        "[12/25 14:25:57] epoch:[  1/25 ] val step:0    loss: 3.27431 top1: 0.12500\n"
        "[12/25 14:26:56] END epoch:1   val loss_avg: 3.62249 top1_avg: 0.14896 avg_batch_cost: 0.03663 sec\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "paddlevideo");
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->step, 10);
    assert_int_equal(r->epoch_total, 100);
    assert_true(r->batch_time == 0.54446 && r->data_time == 0.00037);
    assert_int_equal(count_kind(c, TW_REC_STEP), 1);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "top1_avg") == 0.14896);
    free(c);
}

static void test_paddlenlp_trainer_lines(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "[2024-03-03 18:06:33,568] [    INFO] - loss: 1.08327329, learning_rate: 4e-08, global_step: 1, interval_runtime: 4.8704, interval_samples_per_second: 6.57, interval_steps_per_second: 0.205, progress_or_epoch: 0.0008\n"
        "[2024-03-03 18:10:00,001] [    INFO] - eval_loss: 0.51, eval_accuracy: 0.83, eval_runtime: 12.1\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "paddlenlp");
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->global_step, 1);
    assert_true(fabs(r->batch_time - 1 / 0.205) < 1e-9);
    assert_true(r->samples_per_sec == 6.57);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "eval_accuracy") == 0.83);
    free(c);
}

static void test_glog_errors_become_events(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "I0213 23:07:05.692358  4094 nccl_context.cc:74] init nccl context nranks: 4 local rank: 0\n"
        "E0213 23:07:06.635774  4094 device_context.cc:447] something failed\n"
        "F0213 23:07:06.635774  4094 op.cc:12] Check failed: x == y\n",
        NULL, NULL);
    assert_int_equal(count_kind(c, TW_REC_EVENT), 2);
    assert_int_equal(nth_kind(c, TW_REC_EVENT, 0)->event, TW_EV_WARNING);
    assert_int_equal(nth_kind(c, TW_REC_EVENT, 1)->event, TW_EV_EXCEPTION);
    assert_string_equal(nth_kind(c, TW_REC_EVENT, 1)->message, "Check failed: x == y");
    free(c);
}

static void test_python_traceback_keeps_last_frame(void **state)
{
    (void)state;
    collected_records *c = parse_text("Traceback (most recent call last):\n"
                                      "  File \"train.py\", line 10, in <module>\n"
                                      "    main()\n"
                                      "  File \"train.py\", line 5, in main\n"
                                      "    x = y\n"
                                      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
                                      NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_non_null(e);
    assert_string_equal(e->message, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB");
    assert_string_equal(e->detail, "File \"train.py\", line 5, in main");
    assert_int_equal(e->source.line, 6);
    assert_non_null(find_event(c, TW_EV_OOM));
    free(c);
}

static int count_events(const collected_records *c, tw_event_kind kind)
{
    int n = 0;
    for (int i = 0; i < c->count; i++)
        n += c->records[i].kind == TW_REC_EVENT && c->records[i].event == kind;
    return n;
}

static void test_paddle_error_summary_and_signal(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "--------------------------------------\n"
        "C++ Traceback (most recent call last):\n"
        "--------------------------------------\n"
        "0   paddle::imperative::Tracer::TraceOp(std::string const&)\n"
        "1   paddle::operators::SyncBatchNormKernel::Compute()\n"
        "\n"
        "----------------------\n"
        "Error Message Summary:\n"
        "----------------------\n"
        "FatalError: `Termination signal` is detected by the operating system.\n"
        "  [TimeInfo: *** Aborted at 1691153636 (unix time) try \"date -d @1691153636\" if you are using GNU date ***]\n"
        "  [SignalInfo: *** SIGTERM (@0x1157b0) received by PID 1136644 (TID 0x7f84541b85c0) from PID 1136560 ***]\n"
        "\n"
        "grep: warning: GREP_OPTIONS is deprecated; please use an alias or script\n",
        NULL, NULL);
    /* the line after the summary (the next launch's shell) is no error of it */
    assert_int_equal(count_events(c, TW_EV_EXCEPTION), 0);
    const tw_record *e = find_event(c, TW_EV_SIGNAL);
    assert_non_null(e);
    assert_int_equal(e->exit_code, 15);
    assert_string_equal(e->detail, "paddle::imperative::Tracer::TraceOp(std::string const&)");
    assert_string_equal(e->message, "FatalError: `Termination signal` is detected by the operating system. "
                                    "[SIGTERM from PID 1136560 at 2023-08-04 12:53:56 UTC]");
    free(c);
}

/* A dynamic loss scaler's overflow lines (the wordings of apex's
 * scaler.py, DeepSpeed's loss_scaler.py and its fused optimizer): one
 * overflow event each, with the scale reduced to and the one attempted. */
static void test_loss_scaler_overflow_lines_are_events(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
        "[2023-07-24 13:21:32,378] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 3 Skipping "
        "step. Attempted loss scale: 4294967296, reducing to 2147483648\n"
        "[2023-08-15 06:02:11,231] [INFO] [logging.py:96:log_dist] [Rank 0] Overflow detected. Skipping step. "
        "Attempted loss scale: 1, reducing to 1\n"
        "Skipping step 12: the batch is empty\n",
        NULL, NULL);
    assert_int_equal(count_events(c, TW_EV_OVERFLOW), 3);
    const tw_record *e[3];
    for (int i = 0, n = 0; i < c->count; i++)
        if (c->records[i].kind == TW_REC_EVENT && c->records[i].event == TW_EV_OVERFLOW)
            e[n++] = &c->records[i];
    assert_true(tw_record_metric(e[0], "loss_scale") == 32768.0);
    assert_true(isnan(tw_record_metric(e[0], "attempted_loss_scale")));
    assert_true(tw_record_metric(e[1], "loss_scale") == 2147483648.0);
    assert_true(tw_record_metric(e[1], "attempted_loss_scale") == 4294967296.0);
    assert_int_equal(e[1]->rank, 3);
    assert_true(tw_record_metric(e[2], "loss_scale") == 1.0);
    assert_int_equal(e[2]->rank, 0);
    assert_string_equal(tw_event_name(TW_EV_OVERFLOW), "overflow");
    free(c);
}

/* Paddle's summary puts the message two lines below "ResourceExhaustedError:"
 * (the wording of paddle/phi/core/memory/allocation/cuda_allocator.cc). */
static void test_error_message_on_the_lines_after_its_name(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "----------------------\n"
        "Error Message Summary:\n"
        "----------------------\n"
        "ResourceExhaustedError: \n"
        "\n"
        "Out of memory error on GPU 0. Cannot allocate 128.000000MB memory on GPU 0, 23.431824GB memory has been "
        "allocated and available memory is only 97.625000MB.\n"
        "\n"
        "Please check whether there is any other process using GPU 0.\n"
        " (at /paddle/paddle/phi/core/memory/allocation/cuda_allocator.cc:71)\n",
        NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_non_null(e);
    assert_string_equal(e->message, "ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate "
                                    "128.000000MB memory on GPU 0, 23.431824GB memory has been allocated and "
                                    "available memory is only 97.625000MB.");
    assert_int_equal(e->source.line, 6);
    assert_int_equal(count_events(c, TW_EV_OOM), 1); /* one event, not one per line that says it */
    free(c);
}

static void test_error_name_alone_at_the_end(void **state)
{
    (void)state;
    collected_records *c = parse_text("Traceback (most recent call last):\n"
                                      "  File \"run.py\", line 3, in <module>\n"
                                      "    main()\n"
                                      "MemoryError: \n",
                                      NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_non_null(e);
    assert_string_equal(e->message, "MemoryError:");
    free(c);
}

/* Paddle's Python exception names only the type ("MemoryError: ") and puts
 * its message in the Error Message Summary below: one failure, the
 * summary's error, with the traceback's frames. */
static void test_python_name_takes_the_summarys_error(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "Traceback (most recent call last):\n"
        "  File \"tools/program.py\", line 571, in eval\n"
        "    preds = model(images)\n"
        "  File \"/usr/local/lib/python3.10/dist-packages/paddle/nn/layer/layers.py\", line 1254, in __call__\n"
        "    return self.forward(*inputs, **kwargs)\n"
        "MemoryError: \n"
        "\n"
        "--------------------------------------\n"
        "C++ Traceback (most recent call last):\n"
        "--------------------------------------\n"
        "0   paddle::memory::allocation::CUDAAllocator::AllocateImpl(unsigned long)\n"
        "\n"
        "----------------------\n"
        "Error Message Summary:\n"
        "----------------------\n"
        "ResourceExhaustedError: \n"
        "\n"
        "Out of memory error on GPU 0. Cannot allocate 1.125000MB memory on GPU 0, 64.250000kB memory has been "
        "allocated and available memory is only 959.750000kB.\n",
        NULL, NULL);
    assert_int_equal(count_events(c, TW_EV_EXCEPTION), 1);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_int_equal(e->source.line, 18);
    assert_non_null(strstr(e->message, "ResourceExhaustedError: Out of memory error on GPU 0."));
    assert_string_equal(e->detail, "File \"/usr/local/lib/python3.10/dist-packages/paddle/nn/layer/layers.py\", line "
                                   "1254, in __call__" TW_USER_FRAME "File \"tools/program.py\", line 571, in eval");
    assert_int_equal(count_events(c, TW_EV_OOM), 1);
    free(c);
}

/* The same name with a block that holds no error: said as it was. */
static void test_held_name_without_an_error_is_said(void **state)
{
    (void)state;
    collected_records *c = parse_text("Traceback (most recent call last):\n"
                                      "  File \"run.py\", line 3, in <module>\n"
                                      "    main()\n"
                                      "MemoryError: \n"
                                      "\n"
                                      "--------------------------------------\n"
                                      "C++ Traceback (most recent call last):\n"
                                      "--------------------------------------\n"
                                      "0   paddle::Run()\n"
                                      "[2024/03/09 15:15:33] ppocr INFO: something else\n",
                                      NULL, NULL);
    assert_int_equal(count_events(c, TW_EV_EXCEPTION), 1);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_string_equal(e->message, "MemoryError:");
    assert_string_equal(e->detail, "File \"run.py\", line 3, in <module>");
    assert_int_equal(e->source.line, 4); /* its own line, not where the block ended */
    free(c);
}

/* A name, then a dashed line of something else (no C++ block): the name was
 * all there was, said at its line before the next error, which keeps its own
 * frames; at the end of a log, the same. */
static void test_held_name_after_a_dashed_line_of_something_else(void **state)
{
    (void)state;
    collected_records *c = parse_text("Traceback (most recent call last):\n"
                                      "  File \"train.py\", line 5, in main\n"
                                      "MemoryError: \n"
                                      "--------------------------------------\n"
                                      "some other output\n"
                                      "Traceback (most recent call last):\n"
                                      "  File \"other.py\", line 3, in bar\n"
                                      "ValueError: bad value\n",
                                      NULL, NULL);
    assert_int_equal(count_events(c, TW_EV_EXCEPTION), 2);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_string_equal(e->message, "MemoryError:");
    assert_int_equal(e->source.line, 3);
    assert_string_equal(e->detail, "File \"train.py\", line 5, in main");
    free(c);
    c = parse_text("Traceback (most recent call last):\n"
                   "  File \"train.py\", line 5, in main\n"
                   "MemoryError: \n"
                   "--------------------------------------\n",
                   NULL, NULL);
    e = find_event(c, TW_EV_EXCEPTION);
    assert_non_null(e);
    assert_int_equal(e->source.line, 3);
    free(c);
}

/* Paddle's kernel assertion (printed once per thread), then the CUDA error
 * 719 it causes: one error, at the assertion's line. */
static void test_paddle_assertion_is_the_error_at_its_line(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "Error: /paddle/paddle/phi/kernels/gpu/cross_entropy_kernel.cu:1008 Assertion `false` failed. The value of "
        "label expected >= 0 and < 7, or == -100, but got 15. Please check label value.\n"
        "Error: /paddle/paddle/phi/kernels/gpu/cross_entropy_kernel.cu:1008 Assertion `false` failed. The value of "
        "label expected >= 0 and < 7, or == -100, but got 15. Please check label value.\n"
        "Traceback (most recent call last):\n"
        "  File \"tools/train.py\", line 10, in <module>\n"
        "    main()\n"
        "OSError: (External) CUDA error(719), unspecified launch failure.\n",
        NULL, NULL);
    assert_int_equal(count_events(c, TW_EV_EXCEPTION), 1);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_int_equal(e->source.line, 2);
    assert_non_null(strstr(e->message, "CUDA device-side assertion: cross_entropy_kernel.cu:1008 Assertion `false` "
                                       "failed. The value of label expected >= 0 and < 7"));
    free(c);
}

/* PyTorch prints the kernel's assertion, then a CUDA error that only reports it. */
static void test_device_side_assertion_is_the_error(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1141: indexSelectLargeIndex: block: [0,0,0], thread: "
        "[0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 10, in <module>\n"
        "    out = model(x)\n"
        "  File \"/usr/lib/python3/site-packages/torch/nn/modules/sparse.py\", line 162, in forward\n"
        "    return F.embedding(\n"
        "RuntimeError: CUDA error: device-side assert triggered\n",
        NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_non_null(e);
    assert_string_equal(e->message, "CUDA device-side assertion: Indexing.cu:1141: indexSelectLargeIndex: Assertion "
                                    "`srcIndex < srcSelectDimSize` failed. (reported as: RuntimeError: CUDA error: "
                                    "device-side assert triggered)");
    assert_string_equal(e->detail, "File \"/usr/lib/python3/site-packages/torch/nn/modules/sparse.py\", line 162, "
                                   "in forward" TW_USER_FRAME "File \"train.py\", line 10, in <module>");
    free(c);
}

/* PyTorch's NCCL error names the cause three lines below ("Last error:"). */
static void test_nccl_error_quotes_its_last_error(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 5, in <module>\n"
        "    dist.barrier()\n"
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n"
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \n"
        "Last error:\n"
        "socket: Address family not supported by protocol\n"
        "[2024-01-01 00:00:00] next\n",
        NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_non_null(e);
    assert_int_equal(e->source.line, 7);
    assert_non_null(strstr(e->message, "NCCL error: socket: Address family not supported by protocol (reported as: "
                                       "torch.distributed.DistBackendError: NCCL error in:"));
    free(c);
}

/* torch.distributed.elastic's agent: its rank assignment after a rendezvous
 * (the lines of the Lawrencium job in tests/corpus-extra/launcher) and its
 * report of a failed worker, by local rank. */
static const char rendezvous_block[] =
    "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:\n"
    "  restart_count=0\n"
    "  master_addr=n0000.es1\n"
    "  master_port=57850\n"
    "  group_rank=1\n"
    "  group_world_size=2\n"
    "  local_ranks=[0, 1, 2, 3]\n"
    "  role_ranks=[4, 5, 6, 7]\n"
    "  global_ranks=[4, 5, 6, 7]\n"
    "  role_world_sizes=[8, 8, 8, 8]\n"
    "  global_world_sizes=[8, 8, 8, 8]\n"
    "\n";

static void test_elastic_agent_rank_assignment(void **state)
{
    (void)state;
    collected_records *c = parse_text(rendezvous_block, NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_RANKS);
    assert_non_null(e);
    assert_int_equal(e->source.line, 9);
    assert_string_equal(e->detail, "4, 5, 6, 7");
    assert_int_equal(e->exit_code, 2);
    assert_non_null(strstr(e->message, "group_rank=1 group_world_size=2 global_ranks=[4, 5, 6, 7]"));
    assert_int_equal(count_kind(c, TW_REC_STEP), 0);
    free(c);
}

static void test_elastic_agent_rank_assignment_needs_its_lines(void **state)
{
    (void)state;
    /* local ranks not 0..n-1 in order: which global rank is whose is not said */
    collected_records *c = parse_text("[default] Rendezvous complete for workers. Result:\n"
                                      "  group_rank=1\n  group_world_size=2\n  local_ranks=[1, 0]\n"
                                      "  global_ranks=[4, 5]\n",
                                      NULL, NULL);
    assert_null(find_event(c, TW_EV_RANKS));
    free(c);
    /* the block ends at a line of another shape: a later global_ranks is not its */
    c = parse_text("[default] Rendezvous complete for workers. Result:\n  group_rank=0\n  group_world_size=1\n"
                   "  local_ranks=[0, 1]\nsomething else\n  global_ranks=[0, 1]\n",
                   NULL, NULL);
    assert_null(find_event(c, TW_EV_RANKS));
    free(c);
}

static void test_elastic_agent_failure_names_a_local_rank(void **state)
{
    (void)state;
    /* torch 2.x writes the agent's lines in glog form: they are the events format's */
    collected_records *c =
        parse_text("W0801 13:23:17.366000 32974 torch/distributed/elastic/multiprocessing/api.py:900] Sending process "
                   "33051 closing signal SIGTERM\n"
                   "W0801 13:23:17.367000 32974 torch/distributed/elastic/multiprocessing/api.py:900] Sending process "
                   "33052 closing signal SIGTERM\n"
                   "E0801 13:23:20.000000 32974 torch/distributed/elastic/multiprocessing/api.py:874] "
                   "failed (exitcode: 1) local_rank: 3 (pid: 33054) of binary: /usr/bin/python3\n",
                   NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_LAUNCHER);
    assert_non_null(e);
    assert_string_equal(e->detail, "local 3");
    assert_int_equal(e->exit_code, 3);
    assert_string_equal(e->message, "failed (exitcode: 1) local_rank: 3 (pid: 33054)");
    assert_null(find_event(c, TW_EV_WARNING));
    free(c);
}

static void test_oom_nan_checkpoint_resume_events(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate 1.2GB memory on GPU 0\n"
        "[PRECISION] [ERROR] in [device=gpu:0, op=matmul_v2, tensor=linear_0.tmp_0, dtype=fp32], numel=4, num_nan=2, num_inf=0\n"
        "save checkpoint at /home/aistudio/lstm_checkpoint/0\n"
        "Resuming from checkpoint ./output/ckpt-100\n"
        "worker 3 exited with code 137\n",
        NULL, NULL);
    assert_non_null(find_event(c, TW_EV_OOM));
    assert_non_null(find_event(c, TW_EV_NAN));
    assert_non_null(find_event(c, TW_EV_CHECKPOINT));
    assert_non_null(find_event(c, TW_EV_RESUME));
    assert_int_equal(find_event(c, TW_EV_EXIT)->exit_code, 137);
    free(c);
}

static void test_megatron_iteration_line(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        " iteration      100/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): 1234.5 | learning rate: 1.500E-04 | global batch size:   512 | lm loss: 7.123E+00 | loss scale: 65536.0 | grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "megatron");
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->global_step, 100);
    assert_int_equal(r->step_total, 500000);
    assert_true(r->loss == 7.123 && r->lr == 1.5e-4);
    assert_true(fabs(r->batch_time - 1.2345) < 1e-12);
    assert_true(tw_record_metric(r, "nan_iterations") == 0);
    free(c);
}

static void test_deepspeed_rank_lines(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "[2023-05-03 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 2] step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]\n"
        "[2023-05-03 10:00:01,000] [INFO] [timer.py:1:x] [Rank 2] steps: 10 loss: 0.1234 iter time (s): 0.567 samples/sec: 56.4\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "deepspeed");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 1);
    assert_int_equal(r->rank, 2);
    assert_true(r->loss == 0.1234 && r->batch_time == 0.567 && r->samples_per_sec == 56.4);
    free(c);
}

/* Rank numbers are taken as they are, however large, and never clamped onto
 * another rank; one past any int is unknown, not a wrapped negative. */
static void test_large_rank_numbers_are_kept_or_unknown(void **state)
{
    (void)state;
    collected_records *c = parse_text("[Rank 5000] steps: 10 loss: 0.5\n"
                                      "[Rank 2147483647] steps: 10 loss: 0.5\n"
                                      "[Rank 99999999999] steps: 10 loss: 0.5\n",
                                      "deepspeed", NULL);
    assert_int_equal(count_kind(c, TW_REC_STEP), 3);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 0)->rank, 5000);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->rank, 2147483647);
    assert_true(nth_kind(c, TW_REC_STEP, 2)->rank >= -1 && nth_kind(c, TW_REC_STEP, 2)->rank <= 0);
    free(c);
    assert_int_equal(tw_rank_from_path("log/workerlog.150000"), 150000);
    assert_int_equal(tw_rank_from_path("log/workerlog.99999999999"), -1);
}

static void test_lightning_progress_bar_with_carriage_returns(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "Epoch 0:  45%|####5     | 450/1000 [00:30<00:37, 14.92it/s, loss=0.123, v_num=0]\rEpoch 0:  46%|####6     | 460/1000 [00:31<00:36, 14.90it/s, loss=0.120, v_num=0]\n"
        "Validation DataLoader 0: 100%|##########| 50/50 [00:01<00:00, 40.1it/s]\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "tqdm");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 1);
    assert_int_equal(r->epoch, 0);
    assert_int_equal(r->step, 460);
    assert_true(r->loss == 0.120);
    assert_true(fabs(r->batch_time - 1 / 14.90) < 1e-12);
    free(c);
}

static void test_mmdet_text_and_mmengine(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "2023-01-01 12:00:00,000 - mmdet - INFO - Epoch [1][50/1000]\tlr: 1.000e-02, eta: 1:00:00, time: 0.500, data_time: 0.100, memory: 3000, loss_cls: 1.0, loss: 2.0\n"
        "2023-01-01 12:10:00,000 - mmdet - INFO - Epoch(val) [1][500]\tbbox_mAP: 0.3740, bbox_mAP_50: 0.5810\n"
        "01/01 12:00:00 - mmengine - INFO - Epoch(train)  [2][ 50/1000]  lr: 2.0e-02  eta: 0:30:00  time: 0.4  data_time: 0.1  memory: 3000  loss: 1.5\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "mmdet");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(r->step, 50);
    assert_true(r->batch_time == 0.5 && r->data_time == 0.1 && r->mem_bytes == 3000.0 * 1024 * 1024);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->epoch, 2);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "bbox_mAP") == 0.374);
    free(c);
}

static void test_detectron2_events_line(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "[01/01 12:00:00 d2.utils.events]:  eta: 0:10:00  iter: 19  total_loss: 2.0  loss_cls: 0.9  time: 0.5012  data_time: 0.0100  lr: 0.00019981  max_mem: 3012M\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "detectron2");
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->global_step, 19);
    assert_true(r->loss == 2.0 && r->batch_time == 0.5012 && r->mem_bytes == 3012.0 * 1024 * 1024);
    assert_true(r->eta == 600);
    free(c);
}

static void test_json_lines_hf_mmdet_detectron2(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "{'loss': 0.1856, 'learning_rate': 4.5e-05, 'epoch': 2.0}\n"
        "{'eval_loss': 0.41, 'eval_accuracy': 0.87, 'epoch': 2.0}\n"
        "{\"mode\": \"train\", \"epoch\": 1, \"iter\": 50, \"lr\": 0.02, \"memory\": 3000, \"data_time\": 0.1, \"loss\": 2.0, \"time\": 0.5}\n"
        "{\"data_time\": 0.01, \"iteration\": 19, \"lr\": 0.0002, \"time\": 0.5, \"total_loss\": 2.0}\n"
        "{\"bbox/AP\": 37.9, \"iteration\": 90000}\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "json");
    assert_int_equal(count_kind(c, TW_REC_STEP), 3);
    assert_int_equal(count_kind(c, TW_REC_EVAL), 2);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->step, 50);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 2)->global_step, 19);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "eval_accuracy") == 0.87);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 1), "bbox/AP") == 37.9);
    free(c);
}

static void test_hf_trainer_state_document(void **state)
{
    (void)state;
    collected_records *c = parse_text("{\n  \"best_metric\": 1.12,\n  \"log_history\": [\n    {\n      \"epoch\": 0.01,\n"
                                      "      \"learning_rate\": 2.4e-06,\n      \"loss\": 2.0762,\n      \"step\": 15\n    },\n"
                                      "    {\n      \"epoch\": 0.14,\n      \"eval_loss\": 1.62,\n      \"step\": 200\n    },\n"
                                      "    {\n      \"step\": 2800,\n      \"train_loss\": 1.3,\n      \"train_runtime\": 9.0\n    }\n  ],\n"
                                      "  \"max_steps\": 2808\n}\n",
                                      NULL, NULL);
    assert_string_equal(c->stats.format, "hf-trainer-state");
    assert_int_equal(count_kind(c, TW_REC_STEP), 1);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 0)->global_step, 15);
    assert_int_equal(count_kind(c, TW_REC_EVAL), 1);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 0), "eval_loss") == 1.62);
    free(c);
}

static void test_yolo_results_csv(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "               epoch,      train/box_loss,      train/obj_loss,      train/cls_loss,   metrics/precision,     metrics/mAP_0.5,metrics/mAP_0.5:0.95,        val/box_loss,               x/lr0\n"
        "                   0,             0.12278,            0.023659,                   0,           0.0013889,          0.00078878,          0.00018939,             0.11717,              0.0937\n"
        "                   1,             0.11844,            0.024477,                   0,            0.001358,          0.00094334,          0.00026117,             0.11176,             0.08649\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "yolo");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 1);
    assert_int_equal(r->epoch, 1);
    assert_true(fabs(r->loss - (0.11844 + 0.024477)) < 1e-12);
    assert_true(r->lr == 0.08649);
    assert_true(tw_record_metric(nth_kind(c, TW_REC_EVAL, 1), "metrics/mAP_0.5") == 0.00094334);
    free(c);
}

static void test_olmo_header_and_indented_metrics(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "2025-12-27 22:14:36.270\thost:0\tolmo.train:990\tINFO\t[step=30/10000,epoch=0]\n"
        "    optim/total_grad_norm=1.014\n"
        "    train/CrossEntropyLoss=7.643\n"
        "    throughput/device/tokens_per_second=105,488\n"
        "    System/Peak GPU Memory (MB)=38,869\n"
        "2025-12-27 22:15:36.270\thost:0\tolmo.train:990\tINFO\t[step=40/10000,epoch=0]\n"
        "    train/CrossEntropyLoss=7.1\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "olmo");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->global_step, 30);
    assert_true(r->loss == 7.643);
    assert_true(r->mem_bytes == 38869.0 * 1024 * 1024);
    assert_true(tw_record_metric(r, "throughput/device/tokens_per_second") == 105488);
    assert_true(nth_kind(c, TW_REC_STEP, 1)->loss == 7.1);
    free(c);
}

static void test_pylogging_and_generic_kv(void **state)
{
    (void)state;
    collected_records *c = parse_text("02/13/2022 23:11:11 - INFO - Epoch: [1], step: [100], lr: 0.000020, batch_loss: 0.0052, avg_loss: 0.0849\n", NULL, NULL);
    assert_string_equal(c->stats.format, "pylogging");
    assert_true(nth_kind(c, TW_REC_STEP, 0)->loss == 0.0052);
    free(c);
    c = parse_text("epoch 3 step=120 loss=0.4312 lr=0.001 step_time=0.21\n", NULL, NULL);
    assert_string_equal(c->stats.format, "kv");
    assert_true(nth_kind(c, TW_REC_STEP, 0)->batch_time == 0.21);
    free(c);
}

static void test_trainwatch_own_lines(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "{\"schema\":\"trainwatch.record/1\",\"kind\":\"step\",\"file\":\"orig.log\",\"line\":12,\"rank\":3,\"epoch\":1,\"step\":10,\"loss\":\"NaN\",\"lr\":0.001,\"metrics\":{\"acc\":0.5}}\n"
        "{\"schema\":\"trainwatch.record/1\",\"kind\":\"event\",\"rank\":0,\"event\":\"oom\",\"message\":\"Out of \\\"memory\\\"\",\"code\":3}\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "trainwatch");
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->rank, 3);
    assert_true(isnan(r->loss) && tw_has(r, TW_F_LOSS));
    assert_int_equal(r->source.line, 12);
    assert_true(tw_record_metric(r, "acc") == 0.5);
    const tw_record *e = find_event(c, TW_EV_OOM);
    assert_string_equal(e->message, "Out of \"memory\"");
    assert_int_equal(e->exit_code, 3);
    free(c);
}

static void test_yolo_console_rows_with_rewrites(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "      Epoch    GPU_mem   box_loss   obj_loss   cls_loss  Instances       Size\n"
        "       1/99      3.21G     0.1169    0.06911    0.03919         87        640:  50%|#####     | 15/30 [00:05<00:05,  2.79it/s]\r"
        "       1/99      3.21G     0.1150    0.06900    0.03900         87        640: 100%|##########| 30/30 [00:10<00:00,  2.79it/s]\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "yolo");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 1);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(r->epoch_total, 99);
    assert_int_equal(r->step, 30);
    assert_true(fabs(r->loss - (0.1150 + 0.069 + 0.039)) < 1e-12);
    assert_true(r->mem_bytes == 3.21 * 1073741824.0);
    free(c);
}

static void test_rank_from_nccl_init_line(void **state)
{
    (void)state;
    collected_records *c = parse_text("I0804 12:48:01.021387 1136644 nccl_context.cc:83] init nccl context nranks: 2 local rank: 1 gpu id: 1 ring id: 0\n"
                                      "step 1/2 - loss: 0.5 - 1ms/step\n",
                                      NULL, "train.log");
    assert_int_equal(nth_kind(c, TW_REC_STEP, 0)->rank, 1);
    free(c);
}

static void test_forced_format_ignores_others(void **state)
{
    (void)state;
    collected_records *c = parse_text("step 1/2 - loss: 0.5 - 1ms/step\nepoch 3 step=120 loss=0.4312 lr=0.001\n", "kv", NULL);
    assert_int_equal(count_kind(c, TW_REC_STEP), 1);
    assert_true(nth_kind(c, TW_REC_STEP, 0)->loss == 0.4312);
    free(c);
}

/* faulthandler's all-threads dumps (parse/stacks.c): one event per dump, at
 * its first line, naming the main thread's innermost frame: the thread with
 * <module>, else the "Current thread", else the last listed. */
static const tw_record *nth_event(const collected_records *c, tw_event_kind kind, int n)
{
    for (int i = 0; i < c->count; i++)
        if (c->records[i].kind == TW_REC_EVENT && c->records[i].event == kind && n-- == 0)
            return &c->records[i];
    return NULL;
}

static void test_stack_dumps(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "step 1/2 - loss: 0.5 - 1ms/step\n"
        "Thread 0x00007f3c2a7fc640 (most recent call first):\n"
        "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
        "  File \"/usr/lib/python3.11/threading.py\", line 1002 in _bootstrap\n"
        "\n"
        "Current thread 0x00007f3c2bd4e740 (most recent call first):\n"
        "  File \"/home/u/proj/train.py\", line 20 in all_reduce\n"
        "  File \"/home/u/proj/train.py\", line 41 in <module>\n"
        "step 2/2 - loss: 0.4 - 1ms/step\n"
        /* no <module> thread: the one the signal hit */
        "Thread 0x0000000000000002 (most recent call first):\n"
        "  File \"a.py\", line 1 in loop\n"
        "Current thread 0x0000000000000001 (most recent call first):\n"
        "  File \"b.py\", line 7 in handler\n"
        "  File \"b.py\", line 9 in run\n"
        "\n"
        "not a frame: the dump ended\n"
        /* neither: the last listed, cut at the end of the log */
        "Thread 0x0000000000000003 (most recent call first):\n"
        "  <no Python frame>\n"
        "Thread 0x0000000000000004 (most recent call first):\n"
        "  File \"c.py\", line 3 in wait_for\n",
        NULL, "train.log");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *a = nth_event(c, TW_EV_STACKS, 0), *b = nth_event(c, TW_EV_STACKS, 1),
                    *d = nth_event(c, TW_EV_STACKS, 2);
    assert_non_null(a);
    assert_string_equal(a->message, "all_reduce (train.py:20)");
    assert_string_equal(a->detail, "2 threads");
    assert_int_equal(a->source.line, 2);
    assert_non_null(b);
    assert_string_equal(b->message, "handler (b.py:7)");
    assert_int_equal(b->source.line, 10);
    assert_non_null(d);
    assert_string_equal(d->message, "wait_for (c.py:3)");
    assert_null(nth_event(c, TW_EV_STACKS, 3));
    free(c);
}

/* argparse refusing a command line is a crash before anything ran; a
 * compiler's "file.c:1: error:" or a sentence with ".py: error: " in it is not. */
static void test_usage_errors(void **state)
{
    (void)state;
    collected_records *c = parse_text("usage: train.py [-h] [--local_rank LOCAL_RANK]\n"
                                      "train.py: error: unrecognized arguments: --local-rank=1\n"
                                      "the log of run.py: error: none\n"
                                      "main.c:10: error: expected ';'\n",
                                      NULL, "train.log");
    const tw_record *e = nth_event(c, TW_EV_EXCEPTION, 0);
    assert_non_null(e);
    assert_string_equal(e->message, "train.py: error: unrecognized arguments: --local-rank=1");
    assert_int_equal(e->source.line, 2);
    assert_null(nth_event(c, TW_EV_EXCEPTION, 1));
    free(c);
}

/* detectron2's closing line after a failure in the first iteration has no
 * loss and no time: still the step report that says where it failed. */
static void test_detectron2_closing_line_without_losses(void **state)
{
    (void)state;
    collected_records *c = parse_text("[08/30 15:37:29] d2.utils.events INFO:  iter: 0       lr: N/A  max_mem: 22043M\n"
                                      "[08/30 15:37:29] d2.engine.hooks INFO:  iter: 3  max_mem: 10M\n",
                                      "detectron2", "train.log");
    assert_int_equal(count_kind(c, TW_REC_STEP), 1);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->global_step, 0);
    assert_true(tw_has(r, TW_F_MEM) && r->mem_bytes == 22043.0 * 1024 * 1024);
    free(c);
}

/* detectron2's own start and resume lines: the rank banner starts a launch,
 * "Starting training from iteration N" is a resume when N is not 0. */
static void test_detectron2_launch_and_resume_lines(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "[11/16 04:44:52] detectron2 INFO: Rank of current process: 0. World size: 6\n"
        "[11/16 04:45:00] d2.engine.train_loop INFO: Starting training from iteration 5500\n"
        "[11/16 04:45:22] d2.utils.events INFO:  eta: 5:50:57  iter: 5519  total_loss: 0.3326  time: 0.6683\n"
        "[11/17 08:11:51] d2.engine.train_loop INFO: Starting training from iteration 0\n"
        "[11/17 08:11:52] mylib INFO: Starting training from iteration 7\n",
        "detectron2", "train.log");
    assert_int_equal(count_events(c, TW_EV_LAUNCH), 1);
    assert_int_equal(count_events(c, TW_EV_RESUME), 1);
    const tw_record *r = nth_event(c, TW_EV_RESUME, 0);
    assert_string_equal(r->message, "Starting training from iteration 5500");
    assert_int_equal(r->source.line, 2);
    assert_string_equal(nth_event(c, TW_EV_LAUNCH, 0)->message, "Rank of current process: 0. World size: 6");
    assert_int_equal(count_kind(c, TW_REC_STEP), 1);
    free(c);
}

/* A traceback printed right after a progress line without its newline:
 * the step is read and the traceback starts there. */
static void test_traceback_glued_to_a_step_line(void **state)
{
    (void)state;
    collected_records *c = parse_text("epoch 1 step 1 loss 0.51\n"
                                      "epoch 1 step 2 loss 0.50}Traceback (most recent call last):\n"
                                      "  File \"train.py\", line 3, in save\n"
                                      "    torch.save(m, p)\n"
                                      "OSError: [Errno 28] No space left on device\n",
                                      NULL, "train.log");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    assert_int_equal(count_events(c, TW_EV_EXCEPTION), 1);
    const tw_record *e = nth_event(c, TW_EV_EXCEPTION, 0);
    assert_string_equal(e->message, "OSError: [Errno 28] No space left on device");
    free(c);
    /* a tqdm bar, then torch's rank prefix that the block's lines carry */
    c = parse_text("Map: 100%|##########| 39531/39531 [00:07<00:00, 5189.64 examples/s][rank0]: Traceback (most "
                   "recent call last):\n"
                   "[rank0]:   File \"train.py\", line 192, in train_step\n"
                   "[rank0]:     labels = batch[\"labels\"].to(device)\n"
                   "[rank0]: KeyError: 'labels'\n",
                   NULL, "train.log");
    assert_int_equal(count_events(c, TW_EV_EXCEPTION), 1);
    e = nth_event(c, TW_EV_EXCEPTION, 0);
    assert_string_equal(e->message, "KeyError: 'labels'");
    assert_int_equal(e->source.line, 4);
    free(c);
}

/* InsightFace arcface_torch: fields found by their words in any order, the
 * loss after the speed, the scale a metric; a wrapped line read whole. */
static void test_insightface_lines(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "Training: 2023-03-14 09:08:47,984-Speed 2183.37 samples/sec   Loss 9.1200   LearningRate 0.001000   "
        "Epoch: 0   Global Step: 30   Fp16 Grad Scale: 65536   Required: 144 hours\n"
        "Speed 2000.00  samples/sec  Epoch: 1    Global Step: 40    Loss 8.5000    MI Loss 0.2000    LR: 0.1    "
        "Required: 2 hours\n"
        "Training: 2023-03-14 09:08:43,293-Speed 2178.40 samples/sec   Loss nan   LearningRate 0.001000   \n"
        "Epoch: 1   Global Step: 50   Fp16 Grad Scale:  0   Required: 194 hours\n",
        NULL, "train.log");
    assert_string_equal(c->stats.format, "insightface");
    assert_int_equal(count_kind(c, TW_REC_STEP), 3);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_int_equal(r->global_step, 30);
    assert_int_equal(r->epoch, 0);
    assert_true(r->loss == 9.12 && r->lr == 0.001 && r->samples_per_sec == 2183.37 && r->eta == 144 * 3600.0);
    assert_true(tw_record_metric(r, "loss_scale") == 65536);
    r = nth_kind(c, TW_REC_STEP, 1);
    assert_true(r->global_step == 40 && r->loss == 8.5 && r->lr == 0.1);
    r = nth_kind(c, TW_REC_STEP, 2);
    assert_int_equal(r->global_step, 50);
    assert_true(isnan(r->loss) && r->samples_per_sec == 2178.40 && tw_record_metric(r, "loss_scale") == 0);
    assert_int_equal(r->source.line, 4);
    free(c);
    /* not its lines: key: value pairs with "Global Step:" and no speed, and
     * MXNet's Speedometer (an epoch, no step): other readers take them */
    c = parse_text("Epoch: 0, Global Step: 10, Loss: 2.9400, LR: 0.0001\n"
                   "Epoch: 0, Global Step: 20, Loss: 2.8812, LR: 0.0001\n"
                   "Epoch[0] Batch [10] Speed 1234.5 samples/sec Loss 2.9400 lr=0.1\n",
                   NULL, "train.log");
    assert_string_not_equal(c->stats.format, "insightface");
    assert_int_equal(count_kind(c, TW_REC_STEP), 3);
    free(c);
}

/* The package's JSON log holds a dump in one record's "stacks" field. */
static void test_stack_dump_in_a_json_record(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "{\"@timestamp\":\"2026-12-07T04:00:00.000+00:00\",\"log.level\":\"WARNING\",\"log.logger\":\"trainer\","
        "\"message\":\"stack dump (signal SIGUSR2)\",\"ecs.version\":\"8.11.0\",\"trainwatch\":{\"rank\":2,"
        "\"stacks\":\"Thread 0x00007f3c2a7fc640 (most recent call first):\\n  File \\\"/usr/lib/python3.11/"
        "threading.py\\\", line 324 in wait\\n\\nCurrent thread 0x00007f3c2bd4e740 (most recent call first):\\n"
        "  File \\\"/w/hang_ranks.py\\\", line 40 in load_batch\\n  File \\\"/w/hang_ranks.py\\\", line 60 in "
        "<module>\\n\"}}\n",
        NULL, "train.log"); /* the rank from the record, not the file name */
    const tw_record *e = nth_event(c, TW_EV_STACKS, 0);
    assert_non_null(e);
    assert_string_equal(e->message, "load_batch (hang_ranks.py:40)");
    assert_string_equal(e->detail, "2 threads");
    assert_int_equal(e->rank, 2);
    assert_null(nth_event(c, TW_EV_WARNING, 0));
    free(c);
}

/* DETR's log.txt: an epoch's train_ averages are a step, its test_ losses and
 * first COCO value an evaluation; layer copies and unscaled twins are left out. */
static void test_detr_epoch_lines(void **state)
{
    (void)state;
    collected_records *c = parse_text(
        "{\"train_lr\": 9.99e-05, \"train_class_error\": 41.68, \"train_loss\": 18.22, \"train_loss_ce\": 1.04, "
        "\"train_loss_ce_0\": 1.15, \"train_loss_ce_unscaled\": 0.52, \"test_class_error\": 21.5, \"test_loss\": 14.36, "
        "\"test_coco_eval_bbox\": [0.0434, 0.1011, 0.0321], \"epoch\": 0, \"n_parameters\": 43196001}\n"
        "{\"train_lr\": 9.99e-05, \"train_loss\": 15.1, \"test_loss\": 12.9, \"test_coco_eval_bbox\": [0.0912, 0.2], "
        "\"epoch\": 1, \"n_parameters\": 43196001}\n",
        NULL, NULL);
    assert_string_equal(c->stats.format, "detr");
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    const tw_record *r = nth_kind(c, TW_REC_STEP, 0);
    assert_true(r->loss == 18.22 && r->lr == 9.99e-05);
    assert_int_equal(r->epoch, 0);
    assert_true(tw_record_metric(r, "loss_ce") == 1.04);
    assert_true(isnan(tw_record_metric(r, "loss_ce_0")) && isnan(tw_record_metric(r, "loss_ce_unscaled")));
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->global_step, 1);
    const tw_record *e = nth_kind(c, TW_REC_EVAL, 1);
    assert_non_null(e);
    assert_true(tw_record_metric(e, "loss") == 12.9 && tw_record_metric(e, "bbox/AP") == 0.0912);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hapi_verbose2_steps_and_eval),
        cmocka_unit_test(test_hapi_progress_rewrites_on_one_line),
        cmocka_unit_test(test_ppocr_new_and_old_lines),
        cmocka_unit_test(test_ppdet_steps_and_coco_ap),
        cmocka_unit_test(test_ppcls_train_and_eval_average),
        cmocka_unit_test(test_paddleseg_train_and_eval),
        cmocka_unit_test(test_paddlevideo_ansi_and_epoch_summary),
        cmocka_unit_test(test_paddlenlp_trainer_lines),
        cmocka_unit_test(test_glog_errors_become_events),
        cmocka_unit_test(test_python_traceback_keeps_last_frame),
        cmocka_unit_test(test_paddle_error_summary_and_signal),
        cmocka_unit_test(test_loss_scaler_overflow_lines_are_events),
        cmocka_unit_test(test_error_message_on_the_lines_after_its_name),
        cmocka_unit_test(test_error_name_alone_at_the_end),
        cmocka_unit_test(test_python_name_takes_the_summarys_error),
        cmocka_unit_test(test_held_name_without_an_error_is_said),
        cmocka_unit_test(test_held_name_after_a_dashed_line_of_something_else),
        cmocka_unit_test(test_paddle_assertion_is_the_error_at_its_line),
        cmocka_unit_test(test_device_side_assertion_is_the_error),
        cmocka_unit_test(test_nccl_error_quotes_its_last_error),
        cmocka_unit_test(test_elastic_agent_rank_assignment),
        cmocka_unit_test(test_elastic_agent_rank_assignment_needs_its_lines),
        cmocka_unit_test(test_elastic_agent_failure_names_a_local_rank),
        cmocka_unit_test(test_oom_nan_checkpoint_resume_events),
        cmocka_unit_test(test_megatron_iteration_line),
        cmocka_unit_test(test_deepspeed_rank_lines),
        cmocka_unit_test(test_large_rank_numbers_are_kept_or_unknown),
        cmocka_unit_test(test_lightning_progress_bar_with_carriage_returns),
        cmocka_unit_test(test_mmdet_text_and_mmengine),
        cmocka_unit_test(test_detectron2_events_line),
        cmocka_unit_test(test_json_lines_hf_mmdet_detectron2),
        cmocka_unit_test(test_hf_trainer_state_document),
        cmocka_unit_test(test_yolo_results_csv),
        cmocka_unit_test(test_olmo_header_and_indented_metrics),
        cmocka_unit_test(test_pylogging_and_generic_kv),
        cmocka_unit_test(test_trainwatch_own_lines),
        cmocka_unit_test(test_yolo_console_rows_with_rewrites),
        cmocka_unit_test(test_rank_from_nccl_init_line),
        cmocka_unit_test(test_forced_format_ignores_others),
        cmocka_unit_test(test_stack_dumps),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_stack_dump_in_a_json_record),
        cmocka_unit_test(test_detectron2_closing_line_without_losses),
        cmocka_unit_test(test_detectron2_launch_and_resume_lines),
        cmocka_unit_test(test_traceback_glued_to_a_step_line),
        cmocka_unit_test(test_insightface_lines),
        cmocka_unit_test(test_detr_epoch_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
