#!/usr/bin/env bash
# Builds the Python virtual environment the Go kruntimes project's Python runtime server
# (../shared/runtimes/kruntimes-python-runtime, run unchanged) needs for the tests: grpcio and
# protobuf at pinned versions, cached outside the repository in
# ${KRUNTIMES_GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kruntimes}/python-runtime-grpcio-V-protobuf-W.
# Prints that directory on stdout (its interpreter is DIR/bin/python: start the server with
# PYTHON=DIR/bin/python .../kruntimes-python-runtime/run --port=PORT --work-dir=DIR); with a
# working environment already there it builds nothing.
#
# The environment is built in a temporary sibling directory and renamed into place, so DIR
# exists only complete. Its interpreter does not depend on the path it was created at (a venv's
# python finds its prefix from pyvenv.cfg beside it); the console scripts and activate files
# that would name the temporary path are removed: use DIR/bin/python (and DIR/bin/python -m pip).
set -euo pipefail
grpcio=1.85.4
protobuf=7.36.2
cache_root=${KRUNTIMES_GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruntimes}
out="$cache_root/python-runtime-grpcio-$grpcio-protobuf-$protobuf"

# Whether DIR/bin/python runs and has both packages.
usable() {
  [[ -x "$1/bin/python" ]] && "$1/bin/python" -c 'import grpc, google.protobuf' >/dev/null 2>&1
}

if usable "$out"; then
  echo "$out"
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
  echo "error: python3 is not on PATH; the Python runtime server's tests need Python 3.11 or newer" \
    "(Debian/Ubuntu: apt-get install python3 python3-venv)" >&2
  exit 1
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: $(command -v python3) is Python $(python3 -c 'import platform; print(platform.python_version())' 2>/dev/null || echo '?');" \
    "the Python runtime server needs 3.11 or newer" >&2
  exit 1
fi
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "error: $(command -v python3) has no venv module with ensurepip, so it cannot create the Python" \
    "runtime server's virtual environment; on Debian/Ubuntu install the python3-venv package" \
    "(apt-get install python3-venv)" >&2
  exit 1
fi

mkdir -p "$cache_root"
# One build at a time (another test process may be building the same environment).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$out.lock"
  flock 9
  if usable "$out"; then
    echo "$out"
    exit 0
  fi
fi

echo "building a Python virtual environment (grpcio $grpcio, protobuf $protobuf) into $out" \
  "(seconds to a minute the first time)" >&2
# A sibling of $out, on the same file system: the rename below is atomic.
tmp=$(mktemp -d "$out.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv" >&2 || {
  echo "error: '$(command -v python3) -m venv' failed; on Debian/Ubuntu install the python3-venv package" >&2
  exit 1
}
"$tmp/venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
  --only-binary=:all: "grpcio==$grpcio" "protobuf==$protobuf" >&2 || {
  echo "error: installing grpcio $grpcio and protobuf $protobuf failed; check that the package index" \
    "(PyPI, or PIP_INDEX_URL / PIP_FIND_LINKS) is reachable and has wheels for this Python" >&2
  exit 1
}
# Scripts whose #! line or paths name the temporary directory.
rm -f "$tmp/venv/bin/"pip* "$tmp/venv/bin/"activate* "$tmp/venv/bin/"Activate.ps1
if ! usable "$tmp/venv"; then
  echo "error: the new environment's python cannot import grpc and google.protobuf" >&2
  exit 1
fi
# A broken environment left by an earlier build (e.g. its base Python was removed) is replaced.
if [[ -e "$out" ]]; then
  echo "replacing the unusable environment at $out" >&2
  mv "$out" "$tmp/old"
fi
mv -T "$tmp/venv" "$out"
if ! usable "$out"; then
  echo "error: the environment at $out does not work after it was moved into place" >&2
  exit 1
fi
echo "$out"
