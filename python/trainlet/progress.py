"""update_trainjob_status: training progress from inside a rank, Kubeflow's protocol.

Every rank gets (from its agent, as Kubeflow's TrainJobStatus plugin gives every pod):

- ``KUBEFLOW_TRAINER_SERVER_URL``: the status endpoint, HTTPS, e.g.
  ``https://10.0.0.7:9465/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/NAME/status``.
  A URL without a ``/trainjobs/`` path is taken as the server's base and the path is added
  (namespace ``$TRAINLET_NAMESPACE`` or ``default``, name ``$TRAINLET_JOB``).
- ``KUBEFLOW_TRAINER_SERVER_CA_CERT``: the path of the CA certificate that signed the server's.
- ``KUBEFLOW_TRAINER_SERVER_TOKEN``: the bearer token (or the path of a file holding it).

The body is ``{"trainerStatus": {"progressPercentage", "estimatedRemainingSeconds",
"metrics": [{"name", "value"}], "lastUpdatedTime"}}``. Only the standard library is used
(urllib and ssl), so the function works in any rank's Python.
"""

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MAX_METRICS = 256  # Kubeflow's limit


def _status_url(url):
    parsed = urllib.parse.urlsplit(url)
    if "/trainjobs/" in parsed.path:
        return url
    job = os.environ.get("TRAINLET_JOB", "")
    if not job:
        raise RuntimeError(
            f"{URL_ENV}={url} names no trainjob and TRAINLET_JOB is not set: "
            "update_trainjob_status must run inside a rank"
        )
    ns = os.environ.get("TRAINLET_NAMESPACE", "default")
    path = (
        parsed.path.rstrip("/")
        + f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{job}/status"
    )
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


def _token(value):
    if value.startswith("/") and os.path.isfile(value):
        with open(value, encoding="utf-8") as f:
            return f.read().strip()
    return value.strip()


def _metrics_list(metrics):
    if metrics is None:
        return None
    items = metrics.items() if isinstance(metrics, dict) else metrics
    out = []
    for item in items:
        if isinstance(item, dict):
            name, value = item.get("name"), item.get("value")
        else:
            name, value = item
        if not name:
            raise ValueError(f"metrics: every metric needs a name, got {item!r}")
        out.append({"name": str(name), "value": str(value)})
    if len(out) > MAX_METRICS:
        raise ValueError(f"metrics: at most {MAX_METRICS} metrics, got {len(out)}")
    return out


def trainer_status_body(
    progress_percentage=None, estimated_remaining_seconds=None, metrics=None, now=None
):
    """The request body (a dict), validated as the endpoint validates it."""
    status = {}
    if progress_percentage is not None:
        p = int(progress_percentage)
        if not 0 <= p <= 100:
            raise ValueError(f"progress_percentage must be 0-100, got {progress_percentage}")
        status["progressPercentage"] = p
    if estimated_remaining_seconds is not None:
        s = int(estimated_remaining_seconds)
        if s < 0:
            raise ValueError(
                f"estimated_remaining_seconds must be >= 0, got {estimated_remaining_seconds}"
            )
        status["estimatedRemainingSeconds"] = s
    m = _metrics_list(metrics)
    if m is not None:
        status["metrics"] = m
    now = now or datetime.now(timezone.utc)
    status["lastUpdatedTime"] = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"trainerStatus": status}


def update_trainjob_status(
    progress_percentage=None, estimated_remaining_seconds=None, metrics=None, timeout=10.0
):
    """Reports this job's training progress to the rank's agent.

    ``metrics`` is a dict (name -> value) or a list of {"name", "value"} dicts or pairs; values
    are sent as strings, as Kubeflow keeps them. Returns the HTTP status (200..299). Raises
    ValueError for a bad argument, RuntimeError when the environment lacks the endpoint or the
    endpoint refuses the update (with its status code and answer), and OSError (URLError) when
    it cannot be reached.
    """
    url = os.environ.get(URL_ENV, "")
    ca = os.environ.get(CA_ENV, "")
    token = os.environ.get(TOKEN_ENV, "")
    missing = [n for n, v in ((URL_ENV, url), (CA_ENV, ca), (TOKEN_ENV, token)) if not v]
    if missing:
        raise RuntimeError(
            "update_trainjob_status runs inside a rank of a trainlet (or Kubeflow) job: "
            + ", ".join(missing)
            + " not set"
        )
    body = trainer_status_body(progress_percentage, estimated_remaining_seconds, metrics)
    context = ssl.create_default_context(cafile=ca)
    request = urllib.request.Request(
        _status_url(url),
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": "Bearer " + _token(token),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return response.status
    except urllib.error.HTTPError as e:
        detail = e.read(4096).decode("utf-8", "replace").strip()
        raise RuntimeError(
            f"the progress endpoint refused the update: HTTP {e.code} {e.reason}"
            + (f": {detail}" if detail else "")
        ) from e
