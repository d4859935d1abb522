#!/usr/bin/env bash
# Runs the ingest benchmark (see ingest.py). Usage: bench/ingest.sh [BUILD_DIR] [SIZE_MB]
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/ingest.py" "${1:-build}" "${2:-1024}"
