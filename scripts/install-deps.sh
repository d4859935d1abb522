#!/usr/bin/env bash
# install-deps.sh: install every Debian package that trainwatch's build, tests,
# fuzzers and benchmarks need. Idempotent: quiet and quick when all are present.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config time
  zlib1g-dev libcmocka-dev
  clang libclang-rt-14-dev llvm
  python3 python3-pytest
  valgrind
  mtail
  libmicrohttpd-dev libcurl4-openssl-dev libyaml-dev libcrypt-dev libpcre2-dev openssl
  prometheus prometheus-pushgateway prometheus-alertmanager
  wrk python3-prometheus-client
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
