"""A synchronous client of the coordinator's operator endpoint: trainletctl's CoordinatorClient
(cli/trainletctl/coordinator_client.cpp) in Python, speaking the same wire.

The wire (proto/trainlet/v1/envelope.proto, DESIGN.md "Wire and threads"): a ZeroMQ DEALER with
CURVE (the coordinator's public key as server key, the operator's key pair as client keys)
connected to the coordinator's operator ROUTER. Every message is exactly one frame holding one
``Envelope`` with ``version`` 1 and a ``type`` that matches the body that is set: requests are
MESSAGE_TYPE_OPERATOR_REQUEST with ``operator_request``, answers MESSAGE_TYPE_OPERATOR_RESPONSE
with ``operator_response``, matched to their request by ``request_id``. A frame that is too
large, malformed, of another version or with a mismatched type is dropped, as the daemons do.

Threads: one call at a time per connection (a lock serialises them), so a connection may be
shared by the threads of a notebook.

High availability: ``coordinator`` in TRAINLET_HOME/config.yaml may list several endpoints
("tcp://a:7071, tcp://b:7071"), as for trainletctl. A follower answers NotLeader and names the
leader; the connection moves there. An endpoint that takes no connection within
CONNECT_TIMEOUT_S is passed over for the rest of the call. A request goes to another coordinator
only when the one it went to refused it as a follower or never took it, so it is never run twice.
"""

import threading
import time

import zmq

from trainlet import _protos
from trainlet.config import load_client_config, read_key_pair
from trainlet.errors import (
    ConfigError,
    PermissionDeniedError,
    ProtocolError,
    TrainletError,
    from_code,
)

PROTOCOL_VERSION = 1
# The daemons' cap (common/envelope.h kMaxMessageBytes): a frame above it is not parsed.
MAX_MESSAGE_BYTES = 8 << 20
DEFAULT_TIMEOUT_S = 15.0
# As trainletctl (coordinator_client.h kConnectTimeout): how long one of several endpoints may
# take to accept a connection before the next is tried.
CONNECT_TIMEOUT_S = 1.5
# After every endpoint refused (an election runs), the next round starts after this.
ROUND_PAUSE_S = 0.2


def split_endpoint_list(text):
    """The endpoints of a config's ``coordinator`` value: split at commas, blanks trimmed, empty
    items dropped (common/zmq_sockets.h SplitEndpointList)."""
    return [e.strip() for e in text.split(",") if e.strip()]


class _NotSent(Exception):
    """The endpoint took no connection before the connect deadline: the request never left."""


class _FollowerRefusal(Exception):
    """A follower refused the request; ``leader`` is the endpoint it named ("" when none)."""

    def __init__(self, message, leader):
        super().__init__(message)
        self.leader = leader


def encode_request(request, envelope_pb2):
    """One Envelope holding ``request`` (an OperatorRequest), serialised."""
    env = envelope_pb2.Envelope()
    env.version = PROTOCOL_VERSION
    env.type = envelope_pb2.MESSAGE_TYPE_OPERATOR_REQUEST
    env.operator_request.CopyFrom(request)
    return env.SerializeToString()


def decode_response(frame, envelope_pb2):
    """The OperatorResponse in ``frame``, or None when the frame is not a valid one (dropped)."""
    if len(frame) > MAX_MESSAGE_BYTES:
        return None
    env = envelope_pb2.Envelope()
    try:
        env.ParseFromString(frame)
    except Exception:  # google.protobuf.message.DecodeError, or worse on garbage
        return None
    if env.version != PROTOCOL_VERSION:
        return None
    if env.WhichOneof("body") != "operator_response":
        return None
    if env.type != envelope_pb2.MESSAGE_TYPE_OPERATOR_RESPONSE:
        return None
    return env.operator_response


class CoordinatorConnection:
    """One CURVE DEALER to the coordinator's operator endpoint, for ``call``.

    Owns its ZeroMQ socket and monitor; ``close`` (or garbage collection) releases them.
    """

    def __init__(self, config, context=None):
        self._pb = _protos.load()
        self.endpoints = split_endpoint_list(config.coordinator)
        if not self.endpoints:
            raise ConfigError("coordinator: no endpoint given")
        server = read_key_pair(config.coordinator_key_file)
        mine = read_key_pair(config.key_file)
        if not mine.secret_z85:
            raise ConfigError(f"{config.key_file}: holds no secret-key")
        self._server = server
        self._mine = mine
        self._ctx = context or zmq.Context.instance()
        self._lock = threading.Lock()
        self._next_id = 1
        self._sock = None
        self._open(self.endpoints[0])

    def _open(self, endpoint):
        """A new socket and monitor connected to ``endpoint`` (the old ones closed): a send
        right after a disconnect could still leave on the old connection and be lost."""
        self.close()
        self.endpoint = endpoint
        self._connected = False
        server, mine = self._server, self._mine
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        # As trainletctl: nothing is queued blind while the connection is not up.
        sock.setsockopt(zmq.IMMEDIATE, 1)
        sock.setsockopt(zmq.RECONNECT_IVL, 100)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        sock.curve_serverkey = server.public_z85.encode()
        sock.curve_publickey = mine.public_z85.encode()
        sock.curve_secretkey = mine.secret_z85.encode()
        # The monitor tells a refused key apart from a coordinator that is not there.
        self._monitor = sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | zmq.EVENT_DISCONNECTED
        )
        try:
            sock.connect(self.endpoint)
        except zmq.ZMQError as e:
            sock.close(0)
            raise ConfigError(f"cannot connect to {self.endpoint}: {e}") from e
        self._sock = sock

    @classmethod
    def from_home(cls, home=None):
        return cls(load_client_config(home))

    @property
    def protos(self):
        """(envelope_pb2, operator_pb2, progress_pb2)."""
        return self._pb

    def close(self):
        if getattr(self, "_sock", None) is not None:
            try:
                self._sock.disable_monitor()
            except zmq.ZMQError:
                pass
            self._monitor.close(0)
            self._sock.close(0)
            self._sock = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def call(self, request, timeout=DEFAULT_TIMEOUT_S):
        """Sends ``request`` (an OperatorRequest; its request_id is set here) and returns the
        OperatorResponse. Raises TimeoutError when no answer comes within ``timeout`` seconds,
        PermissionDeniedError when the handshake is refused, and the TrainletError for the
        response's error_code when the coordinator answers with an error."""
        with self._lock:
            if self._sock is None:
                raise ProtocolError("the connection to the coordinator is closed")
            request_id = self._next_id
            self._next_id += 1
            request.request_id = request_id
            frame = encode_request(request, self._pb[0])
            deadline = time.monotonic() + timeout
            if len(self.endpoints) < 2:
                return self._call_one(request_id, frame, timeout, deadline)
            return self._call_any(request_id, frame, timeout, deadline)

    def _call_one(self, request_id, frame, timeout, deadline):
        """One coordinator: wait for it, as ever; one hop to the leader a follower names."""
        try:
            return self._exchange(request_id, frame, timeout, deadline, deadline)
        except _FollowerRefusal as refusal:
            if not refusal.leader:
                raise TrainletError(str(refusal), "NotLeader") from None
            self._open(refusal.leader)
        try:
            return self._exchange(request_id, frame, timeout, deadline, deadline)
        except _FollowerRefusal as refusal:
            raise TrainletError(str(refusal), "NotLeader") from None

    def _call_any(self, request_id, frame, timeout, deadline):
        """Several coordinators: find the leader (see the module's docstring)."""
        unreachable = set()  # took no connection during this call
        last = None
        nxt = 1
        tried_in_round = 0
        while time.monotonic() < deadline:
            connect_by = min(deadline, time.monotonic() + CONNECT_TIMEOUT_S)
            leader = ""
            refused = False
            try:
                return self._exchange(request_id, frame, timeout, deadline, connect_by)
            except _NotSent as e:
                unreachable.add(self.endpoint)
                last = last or str(e)
            except _FollowerRefusal as e:
                refused, leader, last = True, e.leader, str(e)
            if leader and leader != self.endpoint and leader not in unreachable:
                self._open(leader)
                continue
            to = ""
            for _ in range(len(self.endpoints)):
                candidate = self.endpoints[nxt % len(self.endpoints)]
                nxt += 1
                if candidate != self.endpoint and candidate not in unreachable:
                    to = candidate
                    break
            tried_in_round += 1
            if not to or tried_in_round >= len(self.endpoints):
                tried_in_round = 0
                time.sleep(ROUND_PAUSE_S)
                if not to and not refused:  # nothing answers: try them all again
                    unreachable.clear()
                    to = self.endpoints[nxt % len(self.endpoints)]
                    nxt += 1
                to = to or self.endpoint
            self._open(to)
        raise TimeoutError(
            f"no coordinator of {', '.join(self.endpoints)} answered as leader within "
            f"{timeout:g} s" + (f" (last: {last})" if last else "")
        )

    def _exchange(self, request_id, frame, timeout, deadline, connect_by):
        sent = False
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        while True:
            now = time.monotonic()
            if not sent and connect_by < deadline and now >= connect_by:
                raise _NotSent(f"{self.endpoint} took no connection within {CONNECT_TIMEOUT_S:g} s")
            if now >= deadline:
                raise TimeoutError(
                    f"the coordinator at {self.endpoint} did not answer within {timeout:g} s "
                    "(is it running? the SDK reads its address from TRAINLET_HOME/config.yaml)"
                )
            if not sent:
                try:
                    self._sock.send(frame, zmq.DONTWAIT)
                    sent = True
                except zmq.Again:
                    pass  # not connected yet (ZMQ_IMMEDIATE): retry soon
            wait = deadline - now if sent else (0.001 if self._connected else 0.02)
            events = dict(poller.poll(max(1, int(min(wait, deadline - now) * 1000))))
            if self._monitor in events:
                self._on_monitor_event()
            if self._sock in events:
                answer = self._read_answer(request_id)
                if answer is not None:
                    return answer

    def _on_monitor_event(self):
        from zmq.utils.monitor import recv_monitor_message

        while True:
            try:
                event = recv_monitor_message(self._monitor, zmq.DONTWAIT)
            except zmq.Again:
                return
            kind = event["event"]
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._connected = True
            elif kind == zmq.EVENT_DISCONNECTED:
                self._connected = False
            elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                raise PermissionDeniedError(
                    f"the coordinator at {self.endpoint} refused this operator key: it is not "
                    "in the coordinator's operator allowlist (see README: enrolling an operator)",
                    "PermissionDenied",
                )
            elif kind in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
                raise PermissionDeniedError(
                    f"CURVE handshake with {self.endpoint} failed: the coordinator's public key "
                    "in TRAINLET_HOME does not match the server",
                    "PermissionDenied",
                )

    def _read_answer(self, request_id):
        """The answer to ``request_id`` if it is what waits on the socket; None for anything
        else (a late answer to an earlier call, a dropped message)."""
        while True:
            try:
                frames = self._sock.recv_multipart(zmq.DONTWAIT, copy=True)
            except zmq.Again:
                return None
            if len(frames) != 1:
                continue
            response = decode_response(frames[0], self._pb[0])
            if response is None or response.request_id != request_id:
                continue
            if response.error_code == "NotLeader":
                raise _FollowerRefusal(response.error, response.leader)
            if response.error:
                raise from_code(response.error, response.error_code)
            return response
