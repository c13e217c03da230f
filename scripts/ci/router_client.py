"""A bounded client for the router checks of scripts/ci/router-pd.sh.

    router_client.py run URL SECONDS [KILL_AFTER PID]

Two tenants send ordinary completions in a closed loop for SECONDS; with
KILL_AFTER and PID, the process PID (a worker behind the router) is killed
that many seconds in. Prints one JSON line: the statuses seen before and
after the kill, the first answer of each status, and the longest request.
Every request has a 30 s timeout, so the run ends however the server
behaves. Standard library only.
"""

import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

TIMEOUT = 30


def post(url, key, prompt):
    body = json.dumps({"model": "kvw-echo", "prompt": prompt, "max_tokens": 8}).encode()
    req = urllib.request.Request(
        url + "/v1/completions",
        data=body,
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
    )
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            status, text = r.status, r.read(4096).decode(errors="replace")
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read(4096).decode(errors="replace")
    except Exception as e:  # connection refused, reset, timeout
        status, text = 0, f"{type(e).__name__}: {e}"
    return status, text, time.monotonic() - t0


def main():
    url, seconds = sys.argv[2], float(sys.argv[3])
    kill_after = float(sys.argv[4]) if len(sys.argv) > 4 else None
    pid = int(sys.argv[5]) if len(sys.argv) > 5 else None
    start = time.monotonic()
    killed_at = [None]
    seen = {"before": {}, "after": {}}
    first = {}
    longest = [0.0]
    lock = threading.Lock()

    def tenant(key):
        prompt = "^" + ("CANARY-" + key + " ") * 20
        while time.monotonic() - start < seconds:
            status, text, took = post(url, key, prompt)
            with lock:
                phase = "after" if killed_at[0] is not None else "before"
                seen[phase][str(status)] = seen[phase].get(str(status), 0) + 1
                first.setdefault(f"{phase} {status}", text[:300])
                longest[0] = max(longest[0], took)

    threads = [threading.Thread(target=tenant, args=(k,)) for k in ("tenant-a", "tenant-b")]
    for t in threads:
        t.start()
    if kill_after is not None and pid is not None:
        time.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
        with lock:
            killed_at[0] = time.monotonic() - start
    for t in threads:
        t.join()
    print(json.dumps({
        "seconds": round(time.monotonic() - start, 2),
        "killed_at_s": killed_at[0] and round(killed_at[0], 2),
        "statuses": seen,
        "first_answers": first,
        "longest_request_s": round(longest[0], 2),
    }))


if __name__ == "__main__":
    main()
