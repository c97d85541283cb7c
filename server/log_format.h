#pragma once
// larmor-server's log lines (--log-format): text for people at a console, or JSON Lines for a log
// collector (one object per line: time in UTC, level, logger, session and peer where the line belongs
// to a session, message), so that a hospital's log stack can filter a session without parsing text.
#include <memory>
#include <string>

#include <spdlog/formatter.h>

namespace larmor::server {

// One JSON object per record: {"time": "2026-11-29T05:10:00.123Z", "level": "info", "logger": "...",
// "session": "s3", "peer": "10.0.0.5:51234", "message": "..."}; session and peer come from a session
// logger's name ("<id> <peer>") or from a message that starts with "[<id>]" (the gadgets' lines).
std::unique_ptr<spdlog::formatter> json_log_formatter();

// Sets up the default logger on stderr: level ("info", ...), format "text" or "json". Throws
// std::invalid_argument naming an unknown format.
void setup_logging(const std::string& level, const std::string& format);

}  // namespace larmor::server
