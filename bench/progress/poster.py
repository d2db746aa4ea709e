#!/usr/bin/python3
"""One rank of bench/progress: posts Kubeflow's trainerStatus to its agent every INTERVAL seconds
for DURATION seconds, as a rank using Kubeflow's progress protocol does, then prints one line:
"posted N ok M codes {...}". The percentage it posts is read from PCT_FILE before each post, so
the benchmark can change it and time how long the change takes to show in `get trainjobs`.

CLIENT is how it posts:
  sdk    trainlet.update_trainjob_status (python/trainlet), which keeps one HTTPS connection open
         per process: one TLS handshake per rank;
  fresh  Python's http.client with a new connection per post, as curl in a loop or a naive
         client does: one full TLS handshake per post.

usage: poster.py INTERVAL DURATION PCT_FILE [sdk|fresh]
Reads KUBEFLOW_TRAINER_SERVER_URL, KUBEFLOW_TRAINER_SERVER_CA_CERT (a file) and
KUBEFLOW_TRAINER_SERVER_TOKEN (a file holding the token), as the agent gives every rank."""
import collections
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse


def post_fresh(url, context, token, body, codes):
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=5)
    try:
        conn.request("POST", url.path, body, {"Authorization": "Bearer " + token,
                                              "Content-Type": "application/json"})
        codes[conn.getresponse().status] += 1
    except OSError as e:
        codes[type(e).__name__] += 1
    finally:
        conn.close()


def post_sdk(status, codes):
    import trainlet.progress
    try:
        codes[trainlet.progress.update_trainjob_status(**status)] += 1
    except (OSError, RuntimeError) as e:
        codes[type(e).__name__] += 1


def main():
    interval, duration, pct_file = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    client = sys.argv[4] if len(sys.argv) > 4 else "fresh"
    if client == "sdk":  # the source tree's SDK; only its standard-library progress helper
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "python"))
    url = urllib.parse.urlsplit(os.environ["KUBEFLOW_TRAINER_SERVER_URL"])
    context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
        token = f.read().strip()
    rank = os.environ.get("TRAINLET_RANK", "0")
    codes = collections.Counter()
    begin = time.monotonic()
    end = begin + duration
    step = 0
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            with open(pct_file) as f:
                pct = int(f.read().strip() or "0")
        except (OSError, ValueError):
            pct = 0
        status = {"progress_percentage": pct, "estimated_remaining_seconds": int(end - started),
                  "metrics": [("loss", "%.4f" % (1.0 / (step + 1))), ("rank", rank)]}
        if client == "sdk":
            post_sdk(status, codes)
        else:
            body = json.dumps({"trainerStatus": {
                "progressPercentage": pct,
                "estimatedRemainingSeconds": status["estimated_remaining_seconds"],
                "metrics": [{"name": n, "value": v} for n, v in status["metrics"]]}})
            post_fresh(url, context, token, body, codes)
        step += 1
        # Post k is due at begin + k * interval, not interval after post k-1 began: the rate is
        # the asked one on average, however late a wake-up was, unless the host cannot keep up.
        time.sleep(max(0.0, begin + step * interval - time.monotonic()))
    print("posted %d ok %d codes %s" % (sum(codes.values()), codes[200], dict(codes)), flush=True)


if __name__ == "__main__":
    main()
