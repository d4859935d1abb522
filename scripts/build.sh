#!/usr/bin/env bash
# build.sh DIR [CMAKE_ARGS...]: configure and build one build folder with
# CMake, quietly: one line saying what is built, the compilers' whole output
# in DIR/build.log, and on a failure the end of that log (the errors) and a
# non-zero exit. The Makefile's build, asan and fuzz-build use it, so that
# `make demo` prints the demo and not hundreds of lines of make.
set -uo pipefail
dir=$1
shift
jobs=${JOBS:-2}
mkdir -p "$dir"
log="$dir/build.log"
echo "building $dir (cmake $*; the compilers' output in $log)"
if ! { cmake -S . -B "$dir" "$@" && cmake --build "$dir" -j"$jobs"; } >"$log" 2>&1; then
  echo "build of $dir failed; the end of $log:" >&2
  grep -E -B2 -A6 'error:|Error [0-9]|CMake Error|warning:|\*\*\*' "$log" | tail -n 60 >&2 || tail -n 60 "$log" >&2
  exit 1
fi
