#!/usr/bin/env bash
# Builds Larmor's CPU container image here and runs it (issue 24): Debian 12 base made with debootstrap
# and imported into podman (no registry is reachable), docker/Dockerfile built on it, then the running
# container checked from the host: /healthz from outside and, through the image's HEALTHCHECK, from
# inside; a chain directory mounted at /etc/larmor/config replaces the baked-in chains; the real R=3
# scan reconstructs through it with the host's larmor-client; /metrics counts the session; SIGTERM
# stops it cleanly. Prints the image size. Root, Debian 12, about 15-25 minutes on 2 cores the first
# time (the base and the build stage's packages), less once the base exists. Not part of .ci/run.
# Facts behind the podman settings: ../shared/docs/containers.md.
#   bash scripts/container-check.sh          (KEEP_IMAGE=0 removes the image at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SCAN=${LARMOR_SCAN:-$ROOT/../shared/data/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5}
IMAGE=localhost/larmor:cpu
BASE=localhost/debian:bookworm
NAME=larmor-check-$$
WORK=$(mktemp -d /tmp/larmor-container-XXXXXX)
step() { echo "== $*"; }
fail() { echo "container-check: FAILED: $*" >&2; exit 1; }

for tool in podman runc debootstrap; do
  command -v $tool > /dev/null || NEED=1
done
if [ -n "${NEED:-}" ]; then
  step "installing podman, runc, debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman runc debootstrap > "$WORK/apt.log"
fi
# crun stops on hybrid cgroups and the default ulimits are not permitted here (containers.md).
printf '[containers]\ndefault_ulimits = []\n' > "$WORK/containers.conf"
export CONTAINERS_CONF=$WORK/containers.conf
P=(podman --runtime runc --cgroup-manager=cgroupfs)

cleanup() {
  "${P[@]}" rm -f "$NAME" > /dev/null 2>&1 || true
  [ "${KEEP_IMAGE:-1}" = 1 ] || "${P[@]}" rmi -f "$IMAGE" > /dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if ! "${P[@]}" image exists "$BASE"; then
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2> /dev/null | head -n 1)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2> /dev/null)
  mirror=${mirror:-http://deb.debian.org/debian}
  step "Debian 12 base by debootstrap from $mirror"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" "$mirror" > "$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; fail "debootstrap"; }
  tar -C "$WORK/rootfs" -c . | "${P[@]}" import - "$BASE" > /dev/null
  rm -rf "$WORK/rootfs"
fi

step "building $IMAGE from docker/Dockerfile on $BASE"
t0=$(date +%s)
# docker format: OCI images have no HEALTHCHECK, and the check below runs the image's own.
"${P[@]}" build --format docker --network host -f docker/Dockerfile --build-arg BUILD_BASE=$BASE --build-arg RUN_BASE=$BASE \
  -t "$IMAGE" . > "$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; fail "image build"; }
size=$("${P[@]}" image inspect --format '{{.Size}}' "$IMAGE")
echo "built in $(( $(date +%s) - t0 )) s; image size $(( size / 1000000 )) MB"

# The image's ports when they are free on the host (the container shares its network), so that the
# image's own HEALTHCHECK (on 9080) can run; free ones otherwise.
port_free() { ! (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=9002 HTTP=9080
port_free $PORT || PORT=$(free_port)
port_free $HTTP || HTTP=$(free_port)
# A mounted chain directory: the shipped chains plus one under a name only this directory has.
mkdir -p "$WORK/config"
cp config/* "$WORK/config/"
sed 's/^name: .*/name: "site_grappa"/' config/grappa.pbtxt > "$WORK/config/site_grappa.pbtxt"
chmod -R a+rX "$WORK/config"

step "running it: stream on $PORT, HTTP on $HTTP, chains from the mounted directory"
# (podman's complaints that there is no systemd to schedule the periodic health check go to run.log;
# the check itself is run below.)
"${P[@]}" run -d --name "$NAME" --network host -v "$WORK/config:/etc/larmor/config:ro" "$IMAGE" \
  --port "$PORT" --http-port "$HTTP" --address 127.0.0.1 > /dev/null 2> "$WORK/run.log"
http_get() {  # path -> the response, or nothing
  { exec 3<> "/dev/tcp/127.0.0.1/$HTTP"; } 2> /dev/null || return 0
  printf 'GET %s HTTP/1.0\r\n\r\n' "$1" >&3
  cat <&3
  exec 3<&-
}
for _ in $(seq 1 50); do
  http_get /healthz | head -n 1 | grep -q ' 200 ' && break
  sleep 0.2
done
http_get /healthz | head -n 1 | grep -q ' 200 ' || { "${P[@]}" logs "$NAME" | tail -20; fail "/healthz from the host"; }
echo "/healthz from the host: $(http_get /healthz | head -n 1 | tr -d '\r')"
if [ "$HTTP" = 9080 ]; then
  "${P[@]}" healthcheck run "$NAME" 2>> "$WORK/run.log" || fail "the image's HEALTHCHECK (/healthz from inside the container)"
  echo "/healthz from inside the container: the image's HEALTHCHECK passed"
else  # the HEALTHCHECK's port is taken on this host: ask the same way on the port used
  "${P[@]}" exec "$NAME" bash -c "exec 3<>/dev/tcp/127.0.0.1/$HTTP && printf 'GET /healthz HTTP/1.0\r\n\r\n' >&3 && head -n 1 <&3 | grep -q ' 200 '" \
    || fail "/healthz from inside the container"
  echo "/healthz from inside the container (port $HTTP; 9080 is taken here): 200"
fi
"${P[@]}" logs "$NAME" 2>&1 | grep -q "/etc/larmor/config" || fail "the server did not take the mounted chains"

CLIENT=build/tools/larmor-client
[ -x "$CLIENT" ] || bash scripts/build.sh > "$WORK/host-build.log"
[ -f "$SCAN" ] || fail "the real scan $SCAN is absent (LARMOR_SCAN=FILE to name another)"
step "reconstructing $(basename "$SCAN") through the container with the mounted chain site_grappa"
"$CLIENT" -a 127.0.0.1 -p "$PORT" -f "$SCAN" -c site_grappa -o "$WORK/out.h5" --png "$WORK/png" > "$WORK/client.log" 2>&1 \
  || { cat "$WORK/client.log"; fail "larmor-client"; }
images=$(ls "$WORK/png" | wc -l)
[ "$images" -ge 1 ] || fail "no images came back"
echo "images back: $images ($(ls "$WORK/png" | head -n 1) ...)"
step "the same scan as DICOM (chain cartesian_dicom, DCMTK in the image)"
"$CLIENT" -a 127.0.0.1 -p "$PORT" -f "$SCAN" -c cartesian_dicom -o "$WORK/out-dicom.h5" --dicom "$WORK/dicom" \
  > "$WORK/client-dicom.log" 2>&1 || { cat "$WORK/client-dicom.log"; fail "larmor-client --dicom"; }
dicoms=$(ls "$WORK/dicom" 2> /dev/null | wc -l)
[ "$dicoms" -ge 1 ] || fail "no DICOM files came back"
echo "DICOM files back: $dicoms ($(ls "$WORK/dicom" | head -n 1) ...)"
if command -v dciodvfy > /dev/null; then
  dciodvfy "$WORK/dicom/$(ls "$WORK/dicom" | head -n 1)" > "$WORK/dciodvfy.log" 2>&1 || true
  ! grep -q '^Error' "$WORK/dciodvfy.log" || { cat "$WORK/dciodvfy.log"; fail "dciodvfy reports errors"; }
  echo "dciodvfy: no errors"
fi
metrics=$(http_get /metrics)
sessions=$(echo "$metrics" | awk '$1 == "larmor_sessions_total" {print $2}')
[ "${sessions:-0}" -ge 2 ] || fail "/metrics does not count the sessions ($sessions)"
echo "/metrics: larmor_sessions_total $sessions"

step "stopping it (SIGTERM)"
"${P[@]}" stop -t 30 "$NAME" > /dev/null 2>> "$WORK/run.log"
code=$("${P[@]}" inspect --format '{{.State.ExitCode}}' "$NAME")
[ "$code" = 0 ] || { "${P[@]}" logs "$NAME" | tail -20; fail "exit code $code after SIGTERM"; }
echo "container-check: passed (image $IMAGE, $(( size / 1000000 )) MB)"
