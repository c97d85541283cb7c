#include "server/log_format.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <stdexcept>
#include <string_view>

namespace larmor::server {
namespace {

void append_view(spdlog::memory_buf_t& dest, std::string_view s) { dest.append(s.data(), s.data() + s.size()); }

// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped; bytes >= 0x80
// pass as they are (UTF-8 stays UTF-8).
void append_json_string(spdlog::memory_buf_t& dest, std::string_view s) {
    dest.push_back('"');
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                append_view(dest, "\\\"");
                break;
            case '\\':
                append_view(dest, "\\\\");
                break;
            case '\n':
                append_view(dest, "\\n");
                break;
            case '\r':
                append_view(dest, "\\r");
                break;
            case '\t':
                append_view(dest, "\\t");
                break;
            default:
                if (c < 0x20) {
                    char u[8];
                    std::snprintf(u, sizeof u, "\\u%04x", c);
                    append_view(dest, u);
                } else {
                    dest.push_back(ch);
                }
        }
    }
    dest.push_back('"');
}

// "s12" and the like: the server's session ids.
bool looks_like_session_id(std::string_view s) {
    if (s.size() < 2 || s[0] != 's') return false;
    for (size_t i = 1; i < s.size(); ++i)
        if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    return true;
}

class JsonFormatter final : public spdlog::formatter {
public:
    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
        const auto t = msg.time;
        const std::time_t secs = std::chrono::system_clock::to_time_t(t);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
        std::tm utc{};
        gmtime_r(&secs, &utc);
        char when[96];  // room for any int the fields could hold (-Wformat-truncation)
        std::snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                      utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(ms));
        const std::string_view logger(msg.logger_name.data(), msg.logger_name.size());
        std::string_view message(msg.payload.data(), msg.payload.size());
        std::string_view session, peer;
        const size_t space = logger.find(' ');
        if (space != std::string_view::npos && looks_like_session_id(logger.substr(0, space))) {
            session = logger.substr(0, space);
            peer = logger.substr(space + 1);
        } else if (message.size() > 3 && message[0] == '[') {
            const size_t close = message.find(']');
            if (close != std::string_view::npos && looks_like_session_id(message.substr(1, close - 1))) {
                session = message.substr(1, close - 1);
                message.remove_prefix(close + 1);
                while (!message.empty() && message.front() == ' ') message.remove_prefix(1);
            }
        }
        append_view(dest, "{\"time\": \"");
        append_view(dest, when);
        append_view(dest, "\", \"level\": ");
        const auto level = spdlog::level::to_string_view(msg.level);
        append_json_string(dest, std::string_view(level.data(), level.size()));
        append_view(dest, ", \"logger\": ");
        append_json_string(dest, space != std::string_view::npos && !session.empty() ? "session" : logger);
        if (!session.empty()) {
            append_view(dest, ", \"session\": ");
            append_json_string(dest, session);
        }
        if (!peer.empty()) {
            append_view(dest, ", \"peer\": ");
            append_json_string(dest, peer);
        }
        append_view(dest, ", \"message\": ");
        append_json_string(dest, message);
        append_view(dest, "}\n");
    }

    std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

}  // namespace

std::unique_ptr<spdlog::formatter> json_log_formatter() { return std::make_unique<JsonFormatter>(); }

void setup_logging(const std::string& level, const std::string& format) {
    if (format != "text" && format != "json")
        throw std::invalid_argument("--log-format '" + format + "': use text or json");
    auto logger =
        format == "json" ? spdlog::stderr_logger_mt("larmor-server") : spdlog::stderr_color_mt("larmor-server");
    if (format == "json")
        logger->set_formatter(json_log_formatter());
    else  // %n is the logger name: "larmor-server" for the server, "<session id> <peer>" for sessions.
        logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [%n] %v");
    logger->set_level(spdlog::level::from_str(level));
    logger->flush_on(spdlog::level::warn);
    spdlog::set_default_logger(logger);
}

}  // namespace larmor::server
