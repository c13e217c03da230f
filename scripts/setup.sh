#!/usr/bin/env bash
# Install what building and testing kvwitness needs, skipping what is there:
# the wasm32 target, wasm-bindgen-cli 0.2.130, Debian's Chromium and
# ChromeDriver, and the browser tests' npm packages. Python wheels (NVRTC,
# ptxas, securesystemslib) go into venvs made by the scripts that use them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi

# Chromium downloads while wasm-bindgen-cli compiles.
apt_pid=""
if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
  echo "setup: installing Debian chromium + chromium-driver"
  if [[ $(id -u) -eq 0 ]]; then sudo=""; else sudo="sudo"; fi
  { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null; } &
  apt_pid=$!
fi

if [[ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen 0.2.130" ]]; then
  echo "setup: installing wasm-bindgen-cli 0.2.130 (a few minutes, once)"
  cargo install wasm-bindgen-cli --version 0.2.130 --force
fi

if [[ -n $apt_pid ]] && ! wait "$apt_pid"; then
  echo "setup: installing chromium failed" >&2
  exit 1
fi
echo "setup: $(rustc --version); $(wasm-bindgen --version); $(/usr/bin/chromium --version 2>/dev/null)"
