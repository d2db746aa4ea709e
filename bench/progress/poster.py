#!/usr/bin/python3
"""One rank of bench/progress: posts Kubeflow's trainerStatus to its agent every INTERVAL seconds
for DURATION seconds, as a rank using Kubeflow's progress protocol does, then prints one line:
"posted N ok M codes {...}". The percentage it posts is read from PCT_FILE before each post, so
the benchmark can change it and time how long the change takes to show in `get trainjobs`.

usage: poster.py INTERVAL DURATION PCT_FILE
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


def main():
    interval, duration, pct_file = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    url = urllib.parse.urlsplit(os.environ["KUBEFLOW_TRAINER_SERVER_URL"])
    context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
        token = f.read().strip()
    rank = os.environ.get("TRAINLET_RANK", "0")
    codes = collections.Counter()
    end = time.monotonic() + duration
    step = 0
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            with open(pct_file) as f:
                pct = int(f.read().strip() or "0")
        except (OSError, ValueError):
            pct = 0
        body = json.dumps({"trainerStatus": {
            "progressPercentage": pct,
            "estimatedRemainingSeconds": int(end - started),
            "metrics": [{"name": "loss", "value": "%.4f" % (1.0 / (step + 1))},
                        {"name": "rank", "value": rank}]}})
        # The agent answers one request per connection, so each post is a new TLS connection.
        conn = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=5)
        try:
            conn.request("POST", url.path, body, {"Authorization": "Bearer " + token,
                                                  "Content-Type": "application/json"})
            codes[conn.getresponse().status] += 1
        except OSError as e:
            codes[type(e).__name__] += 1
        finally:
            conn.close()
        step += 1
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
    print("posted %d ok %d codes %s" % (sum(codes.values()), codes[200], dict(codes)), flush=True)


if __name__ == "__main__":
    main()
