#!/usr/bin/env bash
# install-deps.sh [--list] [demo|check]: install (or, with --list, only
# print) the Debian packages trainwatch needs.
#   demo   what building trainwatch and running the demo need: compilers,
#          CMake and the libraries it links (the default)
#   check  those, plus what the tests, fuzzers and benchmarks use: clang,
#          valgrind, pytest, mtail, wrk, prometheus_client, and the real
#          Prometheus, Pushgateway and Alertmanager the tests start on
#          127.0.0.1 themselves
# Debian starts the packaged servers at install, and on a systemd host they
# would listen on all interfaces: they are kept from starting while they are
# installed (policy-rc.d) and masked afterwards. Idempotent: quiet and quick
# when all is present.
set -euo pipefail

list=false
if [ "${1:-}" = "--list" ]; then list=true; shift; fi
profile=${1:-demo}
DEMO_PACKAGES=(
  build-essential cmake pkg-config
  zlib1g-dev libcmocka-dev
  libmicrohttpd-dev libcurl4-openssl-dev libyaml-dev libcrypt-dev nettle-dev libgnutls28-dev libpcre2-dev libsnappy-dev libsqlite3-dev
  python3 python3-dev python3-numpy
)
CHECK_PACKAGES=(
  time openssl
  clang libclang-rt-14-dev llvm
  python3-pytest valgrind
  mtail wrk python3-prometheus-client libspdlog-dev jq libyajl-dev python3-venv python3-pip python3-yaml
  chromium
)
SERVER_PACKAGES=(prometheus prometheus-pushgateway prometheus-alertmanager)
SERVICES=(prometheus prometheus-pushgateway prometheus-alertmanager prometheus-node-exporter)

case "$profile" in
  demo) wanted=("${DEMO_PACKAGES[@]}") ;;
  check) wanted=("${DEMO_PACKAGES[@]}" "${CHECK_PACKAGES[@]}" "${SERVER_PACKAGES[@]}") ;;
  *) echo "usage: install-deps.sh [demo|check]" >&2; exit 2 ;;
esac

if $list; then printf '%s\n' "${wanted[@]}"; exit 0; fi

missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# No packaged server may start while it is installed: invoke-rc.d asks
# policy-rc.d, and 101 means "not allowed". An existing policy is left alone.
policy=/usr/sbin/policy-rc.d
placed_policy=false
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# placed by trainwatch install-deps.sh while installing\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  placed_policy=true
fi
cleanup() { if $placed_policy; then $SUDO rm -f "$policy"; fi; }
trap cleanup EXIT

echo "install-deps ($profile): installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

# Masked, the packaged servers stay down across reboots too; the tests start
# their own, as the user running them, on 127.0.0.1 and free ports.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
  for s in "${SERVICES[@]}"; do
    if systemctl list-unit-files "$s.service" >/dev/null 2>&1; then
      $SUDO systemctl mask --now "$s.service" >/dev/null 2>&1 || true
    fi
  done
fi
