// End-to-end throughput of larmor-server on loopback, side by side with a raw socket copy of the
// same bytes in the same run: the raw copy is the ceiling the server's framing, decoding and
// chain plumbing are judged against.
//   BM_RawSocketCopy/<MB>          the encoded stream sent to a sink that only reads
//   BM_ServerSession/<chain>/<MB>  the same stream as a full session (config, header, data, CLOSE)
#include <benchmark/benchmark.h>

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/frame_source.h"
#include "bench/loopback.h"
#include "wire/codec.h"

#ifndef LARMOR_BINARY_DIR
#error "LARMOR_BINARY_DIR must point at the build tree"
#endif

namespace {

using larmor::bench::connect_loopback;
using larmor::bench::send_all;
using larmor::bench::ServerProcess;

// The encoded acquisitions of `frames` frames.
std::vector<uint8_t> encode_frames(int frames) {
    std::vector<uint8_t> out;
    for (int f = 0; f < frames; ++f)
        for (int y = 0; y < larmor::bench::kLines; ++y) {
            std::vector<uint8_t> bytes = larmor::wire::encode(larmor::wire::WireMessage(larmor::bench::frame_readout(f, y)));
            out.insert(out.end(), bytes.begin(), bytes.end());
        }
    return out;
}


// A socket that only reads: the raw-copy ceiling.
class Sink {
public:
    Sink() {
        listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 4) != 0)
            throw std::runtime_error("sink: bind/listen failed");
        socklen_t len = sizeof a;
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
    }
    ~Sink() { ::close(listener_); }
    uint16_t port() const { return port_; }
    // Accepts one connection and reads until EOF, then acknowledges with one byte.
    std::thread serve_one() {
        return std::thread([this] {
            int c = ::accept(listener_, nullptr, nullptr);
            std::vector<char> buf(1 << 20);
            while (::recv(c, buf.data(), buf.size(), 0) > 0) {
            }
            ::close(c);
        });
    }

private:
    int listener_ = -1;
    uint16_t port_ = 0;
};


ServerProcess& server() {
    static ServerProcess s;
    return s;
}

void BM_RawSocketCopy(benchmark::State& state) {
    const std::vector<uint8_t> stream = encode_frames(int(state.range(0)));
    Sink sink;
    for (auto _ : state) {
        std::thread t = sink.serve_one();
        int fd = connect_loopback(sink.port());
        send_all(fd, stream.data(), stream.size());
        ::shutdown(fd, SHUT_WR);
        t.join();
        ::close(fd);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(stream.size()));
    state.counters["frames_per_s"] = benchmark::Counter(double(state.range(0)), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["MB"] = double(stream.size()) / 1e6;
}

// A whole session: CONFIG_FILE, header, the frames, CLOSE; waits for the server's CLOSE.
void run_session(const std::string& chain, const std::vector<uint8_t>& stream, int& images) {
    using namespace larmor::wire;
    int fd = connect_loopback(server().port());
    std::vector<uint8_t> head = encode(WireMessage(ConfigFile{chain}));
    std::vector<uint8_t> hdr = encode(WireMessage(ParameterScript{larmor::bench::frame_header_xml()}));
    head.insert(head.end(), hdr.begin(), hdr.end());
    std::thread reader([&] {
        larmor::bench::SocketReader in(fd);
        Limits limits;
        for (;;) {
            WireMessage m = read_message(in, limits);
            if (std::holds_alternative<Close>(m)) break;
            if (std::holds_alternative<larmor::Image>(m)) ++images;
            if (auto* t = std::get_if<larmor::Text>(&m))
                if (t->text.find("ERROR") != std::string::npos) throw std::runtime_error(t->text);
        }
    });
    send_all(fd, head.data(), head.size());
    send_all(fd, stream.data(), stream.size());
    std::vector<uint8_t> close = encode(WireMessage(Close{}));
    send_all(fd, close.data(), close.size());
    reader.join();
    ::close(fd);
}

void BM_ServerSession(benchmark::State& state, const std::string& chain) {
    const int frames = int(state.range(0));
    const std::vector<uint8_t> stream = encode_frames(frames);
    int images = 0;
    try {
        run_session(chain, stream, images);  // warm-up: plans, pools, first-touch
        images = 0;
        for (auto _ : state) run_session(chain, stream, images);
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(stream.size()));
    state.counters["frames_per_s"] = benchmark::Counter(double(frames), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["images"] = double(images) / double(state.iterations());
    state.counters["MB"] = double(stream.size()) / 1e6;
}

}  // namespace

BENCHMARK(BM_RawSocketCopy)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ServerSession, passthrough, std::string("passthrough"))->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ServerSession, cartesian_rss, std::string("cartesian-rss"))->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ServerSession, cartesian_walsh, std::string("cartesian"))->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
