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
(http.client and ssl), so the function works in any rank's Python. Each process keeps one
HTTPS connection to its agent open between calls.
"""

import http.client
import json
import os
import ssl
import threading
import urllib.parse
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
    endpoint refuses the update (with its status code and answer), and OSError when it cannot be
    reached (ssl.SSLError, an OSError, for a certificate its CA did not sign).
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
    status, reason, detail = _post(
        _status_url(url), ca, _token(token), json.dumps(body).encode(), timeout
    )
    if not 200 <= status < 300:
        raise RuntimeError(
            f"the progress endpoint refused the update: HTTP {status} {reason}"
            + (f": {detail}" if detail else "")
        )
    return status


class _Connection(http.client.HTTPSConnection):
    """An HTTPS connection that offers the TLS session of its last connection when it reconnects,
    so a reconnect (the agent closed an idle connection) resumes instead of a full handshake; and
    that sends a request's head and body in one write."""

    def __init__(self, host, port, context, timeout):
        super().__init__(host, port, context=context, timeout=timeout)
        self._session = None
        self._body = None  # the body to send with the head (_send_output)

    def _send_output(self, message_body=None, encode_chunked=False):
        # http.client writes the head, then the body: two TLS records and two TCP segments per
        # post, each one the agent reads and decrypts (bench/progress: ~20% of its CPU per post).
        # A bytes body goes with the head instead, in one record.
        if isinstance(message_body, bytes) and not encode_chunked:
            self._body = message_body
            try:
                return super()._send_output(None, False)  # the head, through send() below
            finally:
                self._body = None
        return super()._send_output(message_body, encode_chunked)

    def send(self, data):
        if self._body is not None:
            data, self._body = bytes(data) + self._body, None
        return super().send(data)

    def connect(self):
        http.client.HTTPConnection.connect(self)  # TCP only; TLS below, with the session
        self.sock = self._context.wrap_socket(
            self.sock, server_hostname=self.host, session=self._session
        )

    def remember_session(self):
        if self.sock is not None and self.sock.session is not None:
            self._session = self.sock.session


# One persistent connection per process (and endpoint): a rank posting every few seconds reuses
# it, so the agent does one TLS handshake per rank, not one per post. The lock makes concurrent
# calls from a rank's threads take turns on it; a forked child opens its own (the pid in the key).
_lock = threading.Lock()
_connections = {}  # (pid, host, port, ca) -> _Connection


def _post(url, ca, token, data, timeout):
    """POSTs data to url on this process's kept-alive connection; (status, reason, detail)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "https":
        raise ValueError(f"{URL_ENV} must be an https URL, got {url}")
    key = (os.getpid(), parsed.hostname, parsed.port or 443, ca)
    headers = {
        "Content-Type": "application/json",
        "Authorization": "Bearer " + token,
    }
    with _lock:
        conn = _connections.get(key)
        if conn is None:
            context = ssl.create_default_context(cafile=ca)
            conn = _connections[key] = _Connection(parsed.hostname, key[2], context, timeout)
        conn.timeout = timeout
        reused = conn.sock is not None
        try:
            return _exchange(conn, parsed.path, data, headers)
        except (http.client.HTTPException, OSError) as e:
            conn.close()
            failure = e
        # A kept-alive connection the agent closed between posts (idle timeout, restart) fails
        # on send (EPIPE, ssl.SSLEOFError) or on reading the answer: once more, on a new one.
        # Not after a timeout: that would double the wait.
        if reused and not isinstance(failure, TimeoutError):
            try:
                return _exchange(conn, parsed.path, data, headers)
            except (http.client.HTTPException, OSError) as e:
                conn.close()
                failure = e
    if isinstance(failure, OSError):
        raise failure
    raise OSError(f"progress endpoint {parsed.netloc}: {failure}") from failure


def _exchange(conn, path, data, headers):
    conn.request("POST", path, data, headers)
    response = conn.getresponse()
    answer = response.read()  # all of it, or the connection cannot be reused
    conn.remember_session()
    if response.will_close:
        conn.close()
    detail = "" if 200 <= response.status < 300 else answer[:4096].decode("utf-8", "replace")
    return response.status, response.reason, detail.strip()
