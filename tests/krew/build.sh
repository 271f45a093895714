#!/usr/bin/env bash
# Builds krew and validate-krew-manifest v0.4.3 from Go modules (sigs.k8s.io/krew) for the
# packaging tests, cached by version (tests/go-install.sh). Prints the cache directory on stdout.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../go-install.sh" krew v0.4.3 \
  sigs.k8s.io/krew/cmd/krew sigs.k8s.io/krew/cmd/validate-krew-manifest
