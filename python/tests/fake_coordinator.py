"""A fake coordinator for the SDK's unit tests: a CURVE ROUTER speaking the operator protocol.

It binds ``tcp://127.0.0.1:*`` (a port from the kernel) with a fresh server key pair, writes a
TRAINLET_HOME (config.yaml and both keys, as ``trainletctl local up`` lays them out) into a
temp dir, and answers each OperatorRequest with ``handler(request) -> OperatorResponse`` (or
None: no answer) on its own thread. A ZAP handler admits only the allowed operator key, as the
real coordinator's does, so a refused key can be tested.
"""

import os
import tempfile
import threading

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

import trainlet  # noqa: F401 (sets up trainlet.v1)
from trainlet.v1 import envelope_pb2, operator_pb2


def write_key(path, public, secret=None):
    with open(path, "w") as f:
        f.write("# trainlet CURVE key pair\n")
        f.write(f'public-key = "{public.decode()}"\n')
        if secret is not None:
            f.write(f'secret-key = "{secret.decode()}"\n')


class _KeyAllowlist:
    def __init__(self, allowed):
        self.allowed = allowed

    def callback(self, domain, z85_key):
        return z85_key in self.allowed


class FakeCoordinator:
    """Start with ``start()``, stop with ``stop()`` (or use as a context manager)."""

    def __init__(self, handler, allow_operator=True, keys_from=None):
        """``keys_from``: another FakeCoordinator whose server and operator key pairs this one
        shares, as the coordinators of one HA cluster do."""
        self.handler = handler
        self.received = []  # (frames, envelope) of every message, in order
        self.ctx = zmq.Context()
        self.dir = tempfile.TemporaryDirectory(prefix="trainlet-sdk-test.")
        self.home = self.dir.name
        if keys_from is None:
            self.server_public, self.server_secret = zmq.curve_keypair()
            self.operator_public, self.operator_secret = zmq.curve_keypair()
        else:
            self.server_public, self.server_secret = keys_from.server_public, keys_from.server_secret
            self.operator_public = keys_from.operator_public
            self.operator_secret = keys_from.operator_secret
        keys = os.path.join(self.home, "keys")
        os.mkdir(keys)
        write_key(os.path.join(keys, "coordinator.key.pub"), self.server_public)
        write_key(os.path.join(keys, "operator.key"), self.operator_public, self.operator_secret)
        self.auth = ThreadAuthenticator(self.ctx)
        self.auth.start()
        allowed = {self.operator_public} if allow_operator else set()
        self.auth.configure_curve_callback(domain="operator", credentials_provider=_KeyAllowlist(allowed))
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.curve_server = True
        self.sock.curve_secretkey = self.server_secret
        self.sock.zap_domain = b"operator"
        self.sock.bind("tcp://127.0.0.1:*")
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.write_config(self.endpoint)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.sent_raw = []  # raw frames to send before the next answer (garbage tests)

    def write_config(self, coordinator):
        """Points this fake's TRAINLET_HOME at ``coordinator`` (one endpoint or a list)."""
        with open(os.path.join(self.home, "config.yaml"), "w") as f:
            f.write("# trainletctl client configuration\n")
            f.write(f"coordinator: {coordinator}\n")
            f.write("coordinator_key: keys/coordinator.key.pub\n")
            f.write("key: keys/operator.key\n")

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        self.sock.close(0)
        self.auth.stop()
        self.ctx.term()
        self.dir.cleanup()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _serve(self):
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(50):
                continue
            frames = self.sock.recv_multipart()
            env = envelope_pb2.Envelope()
            env.ParseFromString(frames[-1])
            self.received.append((frames, env))
            response = self.handler(env.operator_request)
            if response is None:
                continue
            for raw in self.sent_raw:
                self.sock.send_multipart([frames[0], raw])
            self.sent_raw = []
            response.request_id = env.operator_request.request_id
            out = envelope_pb2.Envelope()
            out.version = 1
            out.type = envelope_pb2.MESSAGE_TYPE_OPERATOR_RESPONSE
            out.operator_response.CopyFrom(response)
            self.sock.send_multipart([frames[0], out.SerializeToString()])


def response(**fields):
    """An OperatorResponse with ``fields`` set (error=..., error_code=...)."""
    r = operator_pb2.OperatorResponse()
    for k, v in fields.items():
        setattr(r, k, v)
    return r
