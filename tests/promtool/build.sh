#!/usr/bin/env bash
# Builds promtool of Prometheus v3.16 (module github.com/prometheus/prometheus v0.316.0) from Go
# modules for tests/it/operator_metrics.rs (`promtool check metrics`, Prometheus' own naming
# linter), cached by version (tests/go-install.sh). Prints the cache directory on stdout.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../go-install.sh" promtool v0.316.0 github.com/prometheus/prometheus/cmd/promtool
