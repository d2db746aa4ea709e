"""update_trainjob_status against a local HTTPS server with a self-signed certificate made here
with the openssl CLI (standing in for the agent's progress endpoint)."""

import http.client
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import unittest
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer
from unittest import mock

from trainlet import progress, update_trainjob_status
from trainlet.progress import trainer_status_body

TOKEN = "s3cret-token"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.posts.append((self.path, dict(self.headers), body))
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b"bad token")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@unittest.skipIf(shutil.which("openssl") is None, "needs the openssl CLI")
class UpdateTrainjobStatusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.cert = os.path.join(cls.dir.name, "cert.pem")
        key = os.path.join(cls.dir.name, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", key, "-out", cls.cert, "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1"],
            check=True, capture_output=True, timeout=60)
        cls.server = HTTPServer(("127.0.0.1", 0), _Handler)
        cls.server.posts = []
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cls.cert, key)
        cls.server.socket = ctx.wrap_socket(cls.server.socket, server_side=True)
        cls.thread = threading.Thread(target=cls.server.serve_forever, daemon=True)
        cls.thread.start()
        cls.base = f"https://127.0.0.1:{cls.server.server_address[1]}"
        cls.path = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/myjob/status"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()
        cls.dir.cleanup()

    def setUp(self):
        self.server.posts.clear()

    def env(self, url=None, token=TOKEN, ca=None):
        return mock.patch.dict(os.environ, {
            "KUBEFLOW_TRAINER_SERVER_URL": url or self.base + self.path,
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": ca or self.cert,
            "KUBEFLOW_TRAINER_SERVER_TOKEN": token,
            "TRAINLET_JOB": "myjob",
        })

    def test_posts_kubeflows_body_with_the_bearer_token(self):
        with self.env():
            code = update_trainjob_status(progress_percentage=42, estimated_remaining_seconds=120,
                                          metrics={"loss": 0.5, "epoch": 3})
        self.assertEqual(code, 200)
        path, headers, body = self.server.posts[0]
        self.assertEqual(path, self.path)
        self.assertEqual(headers["Authorization"], "Bearer " + TOKEN)
        self.assertEqual(headers["Content-Type"], "application/json")
        status = json.loads(body)["trainerStatus"]
        self.assertEqual(status["progressPercentage"], 42)
        self.assertEqual(status["estimatedRemainingSeconds"], 120)
        self.assertEqual(status["metrics"], [{"name": "loss", "value": "0.5"}, {"name": "epoch", "value": "3"}])
        self.assertRegex(status["lastUpdatedTime"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

    def test_a_base_url_gets_the_status_path_of_this_job(self):
        with self.env(url=self.base):
            update_trainjob_status(progress_percentage=1)
        self.assertEqual(self.server.posts[0][0], self.path)

    def test_token_from_a_file(self):
        token_file = os.path.join(self.dir.name, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        with self.env(token=token_file):
            self.assertEqual(update_trainjob_status(progress_percentage=5), 200)

    def test_refusal_raises_with_the_status_and_the_answer(self):
        with self.env(token="wrong"):
            with self.assertRaisesRegex(RuntimeError, "HTTP 401.*bad token"):
                update_trainjob_status(progress_percentage=5)

    def test_a_server_the_ca_did_not_sign_is_refused(self):
        other = os.path.join(self.dir.name, "other.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", os.path.join(self.dir.name, "other.key"), "-out", other,
             "-subj", "/CN=127.0.0.1"], check=True, capture_output=True, timeout=60)
        with self.env(ca=other):
            with self.assertRaises(OSError):  # URLError wrapping the certificate failure
                update_trainjob_status(progress_percentage=5)
        self.assertEqual(self.server.posts, [])

    def test_outside_a_rank_says_what_is_missing(self):
        with mock.patch.dict(os.environ, {"KUBEFLOW_TRAINER_SERVER_URL": ""}):
            with self.assertRaisesRegex(RuntimeError, "KUBEFLOW_TRAINER_SERVER_URL"):
                update_trainjob_status(progress_percentage=5)


class _KeepAliveHandler(_Handler):
    protocol_version = "HTTP/1.1"  # keeps the connection unless told otherwise
    timeout = 10  # a kept connection left open cannot hold the server forever

    def do_POST(self):
        self.server.peers.append(self.client_address[1])
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.posts.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
        if self.server.drop_after_answer:
            # As the agent's idle timeout does: close without "Connection: close".
            self.close_connection = True


@unittest.skipIf(shutil.which("openssl") is None, "needs the openssl CLI")
class KeptConnectionTest(unittest.TestCase):
    """update_trainjob_status keeps one connection per process, and recovers when the server
    closed it between calls."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.cert = os.path.join(self.dir.name, "cert.pem")
        key = os.path.join(self.dir.name, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-days", "1", "-keyout", key, "-out", self.cert, "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1"],
            check=True, capture_output=True, timeout=60)
        self.server = HTTPServer(("127.0.0.1", 0), _KeepAliveHandler)
        self.server.posts, self.server.peers, self.server.drop_after_answer = [], [], False
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, key)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        path = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/myjob/status"
        self.env = mock.patch.dict(os.environ, {
            "KUBEFLOW_TRAINER_SERVER_URL": f"https://127.0.0.1:{self.server.server_address[1]}{path}",
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": self.cert,
            "KUBEFLOW_TRAINER_SERVER_TOKEN": TOKEN,
        })
        self.env.start()

    def tearDown(self):
        self.env.stop()
        with progress._lock:  # the kept connection would hold the one-threaded server
            for conn in progress._connections.values():
                conn.close()
            progress._connections.clear()
        self.server.shutdown()
        self.server.server_close()
        self.dir.cleanup()

    def test_calls_share_one_connection(self):
        for p in (1, 2, 3):
            self.assertEqual(update_trainjob_status(progress_percentage=p), 200)
        self.assertEqual(len(self.server.posts), 3)
        self.assertEqual(len(set(self.server.peers)), 1, self.server.peers)

    def test_head_and_body_go_in_one_write(self):
        sent = []
        real_send = http.client.HTTPConnection.send

        def send(conn, data):
            sent.append(bytes(data))
            return real_send(conn, data)

        with mock.patch.object(http.client.HTTPConnection, "send", send):
            self.assertEqual(update_trainjob_status(progress_percentage=7), 200)
        self.assertEqual(len(sent), 1, sent)
        self.assertTrue(sent[0].startswith(b"POST ") and sent[0].endswith(b"}}"), sent[0])
        self.assertEqual(len(self.server.posts), 1)
        self.assertEqual(json.loads(self.server.posts[0][2])["trainerStatus"]["progressPercentage"],
                         7)

    def test_a_connection_the_server_closed_is_replaced(self):
        self.server.drop_after_answer = True
        for p in (1, 2, 3):
            self.assertEqual(update_trainjob_status(progress_percentage=p), 200)
        self.assertEqual(len(self.server.posts), 3, "each post once, none lost or doubled")
        self.assertEqual(len(set(self.server.peers)), 3, self.server.peers)


class BodyTest(unittest.TestCase):
    def test_limits(self):
        now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        self.assertEqual(trainer_status_body(100, 0, [("a", 1)], now=now), {"trainerStatus": {
            "progressPercentage": 100, "estimatedRemainingSeconds": 0,
            "metrics": [{"name": "a", "value": "1"}], "lastUpdatedTime": "2026-01-02T03:04:05Z"}})
        self.assertEqual(trainer_status_body(now=now), {"trainerStatus": {"lastUpdatedTime": "2026-01-02T03:04:05Z"}})
        with self.assertRaisesRegex(ValueError, "0-100"):
            trainer_status_body(101)
        with self.assertRaisesRegex(ValueError, ">= 0"):
            trainer_status_body(estimated_remaining_seconds=-1)
        with self.assertRaisesRegex(ValueError, "at most 256"):
            trainer_status_body(metrics={f"m{i}": i for i in range(257)})
        with self.assertRaisesRegex(ValueError, "needs a name"):
            trainer_status_body(metrics=[{"value": 1}])


if __name__ == "__main__":
    unittest.main()
