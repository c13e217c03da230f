# Shared by the interop scripts: start a server in the background on
# 127.0.0.1 and wait until GET URL answers; with PID, stop waiting as soon
# as that process has exited.
#   wait_http URL SECONDS [PID]
wait_http() {
  local url=$1 seconds=$2 pid=${3:-} i
  for ((i = 0; i < seconds * 10; i++)); do
    if curl -fsS -o /dev/null -H "Authorization: Bearer ${KVW_WAIT_KEY:-x}" "$url" 2>/dev/null; then
      return 0
    fi
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
      echo "the server (pid $pid) exited before $url answered" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "no answer from $url after $seconds s" >&2
  return 1
}

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# A cached venv at VENV holding what CHECK (Python code that exits 0 when
# the right package is installed) looks for; pip installs SPEC... otherwise.
#   ensure_venv VENV CHECK SPEC...
ensure_venv() {
  local venv=$1 check=$2
  shift 2
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  "$venv/bin/python" -c "$check" 2>/dev/null || "$venv/bin/pip" install --quiet "$@"
}
