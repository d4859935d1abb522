// log_spdlog.cpp: the spdlog side of bench/log_compare.py: ns per call of
// spdlog's rotating file logger (10 MB x 5), sync and async (queue 65536,
// overrun_oldest: never blocks, as ours drops), the same record as
// bench/log_bench.c: "Step step={} loss={}".
//   log-spdlog sync|async THREADS COUNT DIR
#include <spdlog/async.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char **argv)
{
    if (argc < 5)
        return 2;
    std::string mode = argv[1];
    int threads = std::atoi(argv[2]);
    long count = std::atol(argv[3]);
    std::string path = std::string(argv[4]) + "/spdlog.log";
    std::shared_ptr<spdlog::logger> log;
    if (mode == "async") {
        spdlog::init_thread_pool(65536, 1);
        log = spdlog::rotating_logger_mt<spdlog::async_factory_impl<spdlog::async_overflow_policy::overrun_oldest>>(
            "bench", path, 10 * 1000 * 1000, 5);
    } else {
        log = spdlog::rotating_logger_mt("bench", path, 10 * 1000 * 1000, 5);
    }
    log->set_pattern("%Y-%m-%d %H:%M:%S.%e | %l | %n | %!:%# | %v");
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++)
        pool.emplace_back([&] {
            for (long i = 0; i < count; i++)
                log->info("Step step={} loss={}", i, 2.134);
        });
    for (auto &t : pool)
        t.join();
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    spdlog::shutdown();
    std::printf("ns_per_call %.2f\n", ns / (double)count);
    return 0;
}
