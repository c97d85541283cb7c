#pragma once
// One client session end to end: connect, send on this thread while a second thread receives, then
// judge the outcome. Returns the process exit code (0 only for a clean session).
#include "options.h"

namespace larmor::client {

// Streams -f to the server and stores what comes back.
int run_stream(const Options& opts);

// Sends -Q's key and prints the RESPONSE.
int run_query(const Options& opts);

}  // namespace larmor::client
