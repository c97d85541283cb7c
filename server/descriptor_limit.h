#pragma once
// Open files the server may hold: every session takes two descriptors (the socket and the writer's
// duplicate), every pending connection and lingering refusal one. Shells and systemd start processes
// with a soft limit of 1024, which --max-pending-connections alone would exceed, so the server raises
// its soft limit to the hard one at start and warns when the limits it was given could still run out.
#include "server/server_options.h"

namespace larmor::server {

// Raises RLIMIT_NOFILE's soft limit to its hard limit; logs a warning when the connection limits of
// `options` need more than that. Never fails the start: accept() errors are retried (server.cpp).
void raise_descriptor_limit(const ServerOptions& options);

}  // namespace larmor::server
