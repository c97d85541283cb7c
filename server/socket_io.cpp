#include "server/socket_io.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace larmor::server {
namespace {

// Below a typical acquisition payload (14 coils x 384 samples = 43 KiB, 32 x 512 = 128 KiB), so
// payloads of that size mostly bypass the buffer and land in place; headers and small messages are
// served from it. A buffer larger than the payloads would add one memcpy of every payload.
constexpr size_t kReadBufferBytes = 64 * 1024;

}  // namespace

std::string duration_text(std::chrono::steady_clock::duration d) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
    return std::to_string(ms) + " ms";
}

std::string read_timeout_text(std::chrono::steady_clock::duration timeout) {
    return "read timeout after " + duration_text(timeout) + " without data from the client";
}

std::string write_timeout_text(std::chrono::steady_clock::duration timeout) {
    return "write timeout after " + duration_text(timeout) + ": the client is not reading";
}

// ---------------------------------------------------------------------------------------------------
// TcpTransport

TcpTransport::TcpTransport(boost::asio::io_context& ioc, boost::asio::ip::tcp::socket socket)
    : ioc_(ioc), socket_(std::move(socket)), timer_(ioc) {
    socket_.non_blocking(true);  // read_some's fast path; waits go through the io_context
    write_fd_ = ::fcntl(socket_.native_handle(), F_DUPFD_CLOEXEC, 0);
    if (write_fd_ < 0) throw SocketError(std::string("dup of the session socket failed: ") + std::strerror(errno));
    // O_NONBLOCK belongs to the shared file description (set above); so write_some always waits
    // through poll() with a deadline.
}

TcpTransport::~TcpTransport() { close(); }

size_t TcpTransport::read_some(void* dst, size_t n, std::chrono::steady_clock::duration timeout) {
    // Fast path: the socket is non-blocking, so data already queued in the kernel costs one recv()
    // and no timer. Only when nothing is there do we wait, and then the wait races a timer on the
    // private io_context: whichever finishes first cancels the other, and run() returns once both
    // handlers ran. This is what makes the timeout real: a blocking read could wait forever on a
    // client that stopped mid-message.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        boost::system::error_code ec;
        const size_t got = socket_.read_some(boost::asio::buffer(dst, n), ec);
        if (!ec) return got;
        if (ec == boost::asio::error::eof) return 0;
        if (ec != boost::asio::error::would_block && ec != boost::asio::error::try_again)
            throw SocketError("socket read failed: " + ec.message());

        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) throw ReadTimeout(read_timeout_text(timeout));
        std::optional<boost::system::error_code> ready;
        bool expired = false;
        ioc_.restart();
        timer_.expires_after(left);
        timer_.async_wait([&](const boost::system::error_code& tec) {
            if (tec) return;  // cancelled: the socket became readable first
            expired = true;
            boost::system::error_code ignored;
            socket_.cancel(ignored);
        });
        socket_.async_wait(boost::asio::ip::tcp::socket::wait_read, [&](const boost::system::error_code& wec) {
            ready = wec;
            timer_.cancel();
        });
        ioc_.run();
        if (ready && !*ready) continue;  // readable (data, EOF or an error): the next read_some says which
        if (expired) throw ReadTimeout(read_timeout_text(timeout));
        throw SocketError("waiting for the socket failed: " + (ready ? ready->message() : std::string("no result")));
    }
}

size_t TcpTransport::write_some(const uint8_t* p, size_t n, std::chrono::steady_clock::duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const ssize_t k = ::send(write_fd_, p, n, MSG_NOSIGNAL);
        if (k > 0) return static_cast<size_t>(k);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) throw SocketError(write_timeout_text(timeout));
            pollfd pfd{write_fd_, POLLOUT, 0};
            const int r = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
            if (r < 0 && errno != EINTR) throw SocketError(std::string("poll on the socket failed: ") + std::strerror(errno));
            continue;
        }
        throw SocketError(std::string("socket write failed: ") + (k == 0 ? "no progress" : std::strerror(errno)));
    }
}

void TcpTransport::shutdown_send() noexcept {
    std::lock_guard<std::mutex> lock(fd_mutex_);
    if (write_fd_ >= 0) ::shutdown(write_fd_, SHUT_WR);
}

void TcpTransport::shutdown_receive() noexcept {
    std::lock_guard<std::mutex> lock(fd_mutex_);
    if (write_fd_ >= 0) ::shutdown(write_fd_, SHUT_RD);
}

void TcpTransport::close() noexcept {
    std::lock_guard<std::mutex> lock(fd_mutex_);
    if (write_fd_ >= 0) ::close(write_fd_);
    write_fd_ = -1;
    boost::system::error_code ignored;
    socket_.close(ignored);
}


// ---------------------------------------------------------------------------------------------------
// SocketReader

SocketReader::SocketReader(Transport& transport, std::chrono::steady_clock::duration timeout)
    : transport_(transport), timeout_(timeout), buffer_(kReadBufferBytes) {}

void SocketReader::read_exact(void* dst, size_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
        if (begin_ < end_) {
            const size_t k = std::min(n, end_ - begin_);
            std::memcpy(out, buffer_.data() + begin_, k);
            begin_ += k;
            bytes_read_ += k;
            out += k;
            n -= k;
            continue;
        }
        size_t got;
        if (n >= buffer_.size()) {
            got = read_some(out, n);  // large payloads go straight to their destination
            bytes_read_ += got;
            out += got;
            n -= got;
        } else {
            got = read_some(buffer_.data(), buffer_.size());
            begin_ = 0;
            end_ = got;
        }
        if (got == 0)
            throw wire::EndOfStream("connection closed by the client after " + std::to_string(bytes_read_) + " bytes");
    }
}

size_t SocketReader::read_some(void* dst, size_t n) {
    using clock = std::chrono::steady_clock;
    clock::duration wait = timeout_;
    if (has_deadline_) {
        const clock::duration left = deadline_ - clock::now();
        if (left <= clock::duration::zero()) throw ReadTimeout(deadline_why_);
        wait = std::min(wait, left);
    }
    size_t got = 0;
    const clock::time_point before = clock::now();
    try {
        got = transport_.read_some(dst, n, wait);
    } catch (const ReadTimeout&) {
        if (has_deadline_ && clock::now() >= deadline_) throw ReadTimeout(deadline_why_);
        throw;
    }
    received_ += got;
    if (min_rate_ > 0) {
        // Only the time spent waiting for the client counts: while the session is busy elsewhere (a
        // chain that holds its reader back) the client cannot send, and that is not its fault.
        window_waited_ += clock::now() - before;
        if (window_waited_ >= window_) {
            const double seconds = std::chrono::duration<double>(window_waited_).count();
            const uint64_t in_window = received_ - window_received_;
            if (double(in_window) < double(min_rate_) * seconds) {
                char text[112];
                std::snprintf(text, sizeof text, ": %llu bytes in %.1f s of waiting for them",
                              static_cast<unsigned long long>(in_window), seconds);
                throw ReadTimeout(rate_why_ + text);
            }
            window_waited_ = clock::duration::zero();
            window_received_ = received_;
        }
    }
    return got;
}

void SocketReader::set_deadline(std::chrono::steady_clock::time_point at, std::string why) {
    has_deadline_ = true;
    deadline_ = at;
    deadline_why_ = std::move(why);
}

void SocketReader::clear_deadline() { has_deadline_ = false; }

void SocketReader::set_min_rate(uint64_t bytes_per_second, std::chrono::steady_clock::duration window, std::string why) {
    min_rate_ = window > std::chrono::steady_clock::duration::zero() ? bytes_per_second : 0;
    window_ = window;
    window_waited_ = std::chrono::steady_clock::duration::zero();
    window_received_ = received_;
    rate_why_ = std::move(why);
}

void SocketReader::discard_until_eof(std::chrono::steady_clock::duration max_wait, size_t max_bytes) noexcept {
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    size_t dropped = 0;
    try {
        for (;;) {
            const auto left = deadline - std::chrono::steady_clock::now();
            if (left <= std::chrono::steady_clock::duration::zero() || dropped >= max_bytes) return;
            const size_t got = transport_.read_some(buffer_.data(), buffer_.size(), left);
            if (got == 0) return;
            dropped += got;
        }
    } catch (...) {
        // Timeout or reset: either way the client has had its chance to read the reply.
    }
}

// ---------------------------------------------------------------------------------------------------
// SocketWriter

SocketWriter::SocketWriter(Transport& transport, std::chrono::steady_clock::duration timeout)
    : transport_(transport), timeout_(timeout) {}

SocketWriter::~SocketWriter() { stop_posting(); }

void SocketWriter::write_all(const uint8_t* p, size_t n) {
    while (n > 0) {
        // The timeout is per progress: a slow but reading client is not cut off mid-image.
        const size_t k = transport_.write_some(p, n, timeout_);
        p += k;
        n -= k;
        bytes_written_ += k;
    }
}

bool SocketWriter::write_message(const std::vector<uint8_t>& bytes, bool seal_after) {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (sealed_ || failed_ || closed_) return false;
    try {
        write_all(bytes.data(), bytes.size());
        if (seal_after) sealed_ = true;
        return true;
    } catch (const std::exception& e) {
        error_ = e.what();
        failed_ = true;
        if (seal_after) sealed_ = true;
        return false;
    }
}

void SocketWriter::wait_posted() {
    std::unique_lock<std::mutex> lock(post_mutex_);
    idle_cv_.wait(lock, [&] { return posted_.empty() && !posting_; });
}

bool SocketWriter::send(const std::vector<uint8_t>& bytes) {
    wait_posted();
    return write_message(bytes, false);
}

bool SocketWriter::send_last(const std::vector<uint8_t>& bytes) {
    wait_posted();
    return write_message(bytes, true);
}

bool SocketWriter::post(std::vector<uint8_t> bytes) {
    if (sealed_ || failed_ || closed_) return false;
    std::lock_guard<std::mutex> lock(post_mutex_);
    if (stopping_) return false;
    if (!poster_.joinable()) {
        try {
            poster_ = std::thread([this] { drain_posted(); });
        } catch (const std::system_error&) {
            return false;  // no thread to be had: the caller sends it itself, later
        }
    }
    posted_.push_back(std::move(bytes));
    post_cv_.notify_one();
    return true;
}

void SocketWriter::drain_posted() {
    std::unique_lock<std::mutex> lock(post_mutex_);
    for (;;) {
        post_cv_.wait(lock, [&] { return stopping_ || !posted_.empty(); });
        if (stopping_) {
            posted_.clear();  // the connection is closed: nothing can be written any more
            idle_cv_.notify_all();
            return;
        }
        std::vector<uint8_t> bytes = std::move(posted_.front());
        posted_.pop_front();
        posting_ = true;
        lock.unlock();
        write_message(bytes, false);  // a failure is kept in error_, as for send()
        lock.lock();
        posting_ = false;
        if (posted_.empty()) idle_cv_.notify_all();
    }
}

void SocketWriter::stop_posting() noexcept {
    {
        std::lock_guard<std::mutex> lock(post_mutex_);
        stopping_ = true;
    }
    post_cv_.notify_all();
    if (poster_.joinable() && poster_.get_id() != std::this_thread::get_id()) poster_.join();
}

void SocketWriter::seal() {
    std::lock_guard<std::mutex> lock(write_mutex_);
    sealed_ = true;
}

void SocketWriter::shutdown_send() noexcept {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (!closed_) transport_.shutdown_send();
}

void SocketWriter::shutdown_receive() noexcept { transport_.shutdown_receive(); }

void SocketWriter::close() noexcept {
    {
        std::lock_guard<std::mutex> lock(write_mutex_);
        if (!closed_) transport_.close();
        closed_ = true;
        sealed_ = true;
    }
    stop_posting();  // its thread finds the writer closed and ends
}

std::string SocketWriter::error() const {
    std::lock_guard<std::mutex> lock(write_mutex_);
    return error_;
}

}  // namespace larmor::server
