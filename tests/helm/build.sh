#!/usr/bin/env bash
# Builds helm v4.3.2 from Go modules (helm.sh/helm/v4) for tests/it/helm.rs, cached by version
# (tests/go-install.sh). Prints the cache directory on stdout.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../go-install.sh" helm v4.3.2 helm.sh/helm/v4/cmd/helm
