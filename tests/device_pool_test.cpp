// Device selection (server/device_pool.h): --devices parsing against an injected device count, the
// least-loaded choice with ties to the lowest id, the counts in larmor::status, and the startup error
// of the real server for a device it does not have. No GPU needed.
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/backend.h"
#include "server/device_pool.h"
#include "server/queries.h"
#include "tests/support/server_process.h"

namespace larmor::server {
namespace {

std::string parse_error(const std::string& text, int count) {
    try {
        parse_device_list(text, count);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

TEST(DeviceList, AllAndExplicitLists) {
    EXPECT_EQ(parse_device_list("all", 3), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(parse_device_list("all", 0), std::vector<int>{});
    EXPECT_EQ(parse_device_list("0,2", 4), (std::vector<int>{0, 2}));
    EXPECT_EQ(parse_device_list(" 3 , 1", 4), (std::vector<int>{3, 1}));
    EXPECT_EQ(parse_device_list("0", 1), std::vector<int>{0});
}

TEST(DeviceList, MissingDeviceNamesItAndTheCount) {
    std::string e = parse_error("0,3", 2);
    EXPECT_NE(e.find("device 3 does not exist"), std::string::npos) << e;
    EXPECT_NE(e.find("2 CUDA devices"), std::string::npos) << e;
    e = parse_error("0", 0);
    EXPECT_NE(e.find("device 0 does not exist"), std::string::npos) << e;
    EXPECT_NE(e.find("no CUDA device"), std::string::npos) << e;
    e = parse_error("1", 1);
    EXPECT_NE(e.find("1 CUDA device (id 0)"), std::string::npos) << e;
}

TEST(DeviceList, MalformedEntriesAreNamed) {
    for (const char* bad : {"gpu0", "-1", "1.5", "0x1", "9999999999"}) {
        const std::string e = parse_error(std::string("0,") + bad, 4);
        EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << e;
    }
    EXPECT_NE(parse_error("", 4).find("''"), std::string::npos);
    EXPECT_NE(parse_error("0,,1", 4).find("''"), std::string::npos);
    EXPECT_NE(parse_error("1,0,1", 4).find("device 1 is listed twice"), std::string::npos);
    EXPECT_NE(parse_error("ALL", 4).find("'ALL'"), std::string::npos);
}

std::vector<size_t> sessions(const DevicePool& pool) {
    std::vector<size_t> n;
    for (const DeviceLoad& d : pool.load()) n.push_back(d.sessions);
    return n;
}

TEST(DevicePool, LeastLoadedDeviceTiesToTheLowestId) {
    DevicePool pool({2, 0});  // order given does not matter: ties go to the lowest id
    DeviceLease a = pool.acquire();
    DeviceLease b = pool.acquire();
    DeviceLease c = pool.acquire();
    EXPECT_EQ(a.device(), 0);
    EXPECT_EQ(b.device(), 2);
    EXPECT_EQ(c.device(), 0);
    EXPECT_EQ(sessions(pool), (std::vector<size_t>{2, 1}));
    a.reset();
    c.reset();  // device 0 now idle, device 2 has one session
    EXPECT_EQ(pool.acquire().device(), 0);  // a temporary: released at once
    DeviceLease d = pool.acquire();
    DeviceLease e = pool.acquire();
    EXPECT_EQ(d.device(), 0);
    EXPECT_EQ(e.device(), 0);  // 1 vs 1: lowest id
    EXPECT_EQ(pool.acquire().device(), 2);
    ASSERT_EQ(pool.load().size(), 2u);
    EXPECT_EQ(pool.load()[0].device, 0);
    EXPECT_EQ(pool.load()[1].device, 2);
    EXPECT_EQ(sessions(pool), (std::vector<size_t>{2, 1}));
}

TEST(DevicePool, LeasesMoveAndReleaseOnce) {
    DevicePool pool({0});
    {
        DeviceLease a = pool.acquire();
        DeviceLease b = std::move(a);
        EXPECT_FALSE(a);  // the moved-from lease holds nothing
        EXPECT_EQ(a.device(), -1);
        EXPECT_TRUE(b);
        EXPECT_EQ(sessions(pool), std::vector<size_t>{1});
        DeviceLease c;
        c = std::move(b);
        EXPECT_EQ(sessions(pool), std::vector<size_t>{1});
    }
    EXPECT_EQ(sessions(pool), std::vector<size_t>{0});
    DeviceLease empty;
    empty.reset();  // a CPU session's empty lease gives nothing back
    EXPECT_EQ(sessions(pool), std::vector<size_t>{0});
}

TEST(DevicePool, EmptyPoolRefusesToLease) {
    DevicePool pool({});
    EXPECT_TRUE(pool.empty());
    EXPECT_THROW(pool.acquire(), std::logic_error);
}

TEST(DevicePool, ConcurrentSessionsBalanceAndReturnEverything) {
    DevicePool pool({0, 1, 2});
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
        threads.emplace_back([&pool] {
            for (int i = 0; i < 2000; ++i) {
                DeviceLease lease = pool.acquire();
                ASSERT_GE(lease.device(), 0);
                ASSERT_LE(lease.device(), 2);
            }
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(sessions(pool), (std::vector<size_t>{0, 0, 0}));
    // Held leases spread evenly.
    std::vector<DeviceLease> held;
    for (int i = 0; i < 7; ++i) held.push_back(pool.acquire());
    EXPECT_EQ(sessions(pool), (std::vector<size_t>{3, 2, 2}));
}

TEST(DevicePool, StatusReportsSessionsPerDevice) {
    ServerOptions options;
    ServerStats stats;
    DevicePool pool({0, 2});
    DeviceLease lease = pool.acquire();
    const std::string status = answer_query("larmor::status", QueryContext{options, stats, &pool});
    EXPECT_NE(status.find("\"devices\": [{\"device\": 0, \"sessions\": 1}, {\"device\": 2, \"sessions\": 0}]"),
              std::string::npos)
        << status;
    const std::string none = answer_query("larmor::status", QueryContext{options, stats, nullptr});
    EXPECT_NE(none.find("\"devices\": []"), std::string::npos) << none;
}

TEST(DevicePool, ServerRefusesAMissingDeviceAtStartup) {
    const int count = static_cast<int>(cuda_devices().size());
    const std::string missing = std::to_string(count);  // one past the last device
    const test::ProcessResult r = test::run_process(
        {test::server_binary(), "--port", "0", "--address", "127.0.0.1", "--devices", "0," + missing},
        std::chrono::seconds(30));
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("CUDA device " + missing + " does not exist"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("listening on"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace larmor::server
