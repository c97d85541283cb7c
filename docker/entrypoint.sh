#!/bin/bash
# The container's entry point: larmor-server on every interface (a container's loopback cannot be
# reached from outside it), the stream on 9002, HTTP status on 9080, and the chains from
# /etc/larmor/config when a directory with chains is mounted there, else the ones baked in.
# Arguments go to the server; one of these four flags given there replaces the default here (the
# server takes each flag once).
set -euo pipefail
given() {
  local flag=$1 a
  shift
  for a in "$@"; do [[ $a == "$flag" || $a == "$flag="* ]] && return 0; done
  return 1
}
config=/opt/larmor/share/larmor/config
if compgen -G "/etc/larmor/config/*.pbtxt" > /dev/null; then
  config=/etc/larmor/config
fi
defaults=()
given --address "$@" || defaults+=(--address 0.0.0.0)
given --port "$@" || defaults+=(--port 9002)
given --http-port "$@" || defaults+=(--http-port 9080)
given --config-dir "$@" || defaults+=(--config-dir "$config")
exec larmor-server "${defaults[@]}" "$@"
