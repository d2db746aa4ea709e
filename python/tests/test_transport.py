"""The wire: one Envelope per frame, version 1, type matching the body, over CURVE."""

import os
import unittest

import zmq

from fake_coordinator import FakeCoordinator, response
from trainlet.config import load_client_config
from trainlet.errors import NotFoundError, PermissionDeniedError
from trainlet.transport import CoordinatorConnection, decode_response
from trainlet.v1 import envelope_pb2, operator_pb2


def nodes_request():
    r = operator_pb2.OperatorRequest()
    r.get_nodes.SetInParent()
    return r


class EnvelopeTest(unittest.TestCase):
    def wrap(self, version=1, mtype=envelope_pb2.MESSAGE_TYPE_OPERATOR_RESPONSE, body=True):
        env = envelope_pb2.Envelope()
        env.version = version
        env.type = mtype
        if body:
            env.operator_response.request_id = 7
        return env.SerializeToString()

    def test_valid_response_decodes(self):
        self.assertEqual(decode_response(self.wrap(), envelope_pb2).request_id, 7)

    def test_invalid_frames_are_dropped(self):
        self.assertIsNone(decode_response(b"\xff\xff garbage", envelope_pb2))
        self.assertIsNone(decode_response(b"", envelope_pb2))  # all defaults: no version
        self.assertIsNone(decode_response(self.wrap(version=2), envelope_pb2))
        self.assertIsNone(
            decode_response(self.wrap(mtype=envelope_pb2.MESSAGE_TYPE_HEARTBEAT), envelope_pb2)
        )
        self.assertIsNone(decode_response(self.wrap(body=False), envelope_pb2))
        self.assertIsNone(decode_response(b"\x08\x01" + b"\x00" * (9 << 20), envelope_pb2))


class ConnectionTest(unittest.TestCase):
    def test_request_goes_out_as_one_versioned_envelope(self):
        def handler(req):
            r = response()
            r.nodes.nodes.add().state = "Ready"
            return r

        with FakeCoordinator(handler) as fake:
            conn = CoordinatorConnection(load_client_config(fake.home))
            answer = conn.call(nodes_request(), timeout=10)
            conn.close()
        self.assertEqual(answer.nodes.nodes[0].state, "Ready")
        frames, env = fake.received[0]
        self.assertEqual(len(frames), 2)  # routing id + exactly one payload frame
        self.assertEqual(env.version, 1)
        self.assertEqual(env.type, envelope_pb2.MESSAGE_TYPE_OPERATOR_REQUEST)
        self.assertEqual(env.WhichOneof("body"), "operator_request")
        self.assertEqual(env.operator_request.request_id, 1)

    def test_garbage_and_stale_answers_are_skipped(self):
        stale = envelope_pb2.Envelope(version=1, type=envelope_pb2.MESSAGE_TYPE_OPERATOR_RESPONSE)
        stale.operator_response.request_id = 999
        stale.operator_response.error = "not for you"
        fake = FakeCoordinator(lambda req: response())
        fake.sent_raw = [b"garbage", b"", stale.SerializeToString()]
        with fake:
            conn = CoordinatorConnection(load_client_config(fake.home))
            answer = conn.call(nodes_request(), timeout=10)
            conn.close()
        self.assertEqual(answer.error, "")

    def test_error_carries_the_coordinators_message_and_code(self):
        def handler(req):
            return response(error="trainjob/x not found", error_code="NotFound")

        with FakeCoordinator(handler) as fake:
            conn = CoordinatorConnection(load_client_config(fake.home))
            with self.assertRaises(NotFoundError) as e:
                conn.call(nodes_request(), timeout=10)
            conn.close()
        self.assertEqual(str(e.exception), "trainjob/x not found")
        self.assertEqual(e.exception.code, "NotFound")
        self.assertIsInstance(e.exception, RuntimeError)

    def test_silent_coordinator_times_out(self):
        with FakeCoordinator(lambda req: None) as fake:
            conn = CoordinatorConnection(load_client_config(fake.home))
            with self.assertRaisesRegex(TimeoutError, "did not answer within 0.5 s"):
                conn.call(nodes_request(), timeout=0.5)
            conn.close()

    def test_key_not_in_the_allowlist_is_refused_at_once(self):
        with FakeCoordinator(lambda req: response(), allow_operator=False) as fake:
            conn = CoordinatorConnection(load_client_config(fake.home))
            with self.assertRaisesRegex(PermissionDeniedError, "refused this operator key"):
                conn.call(nodes_request(), timeout=10)
            conn.close()

    def test_wrong_server_key_is_refused_at_once(self):
        with FakeCoordinator(lambda req: response()) as fake:
            other, _ = zmq.curve_keypair()
            with open(os.path.join(fake.home, "keys", "coordinator.key.pub"), "w") as f:
                f.write(f'public-key = "{other.decode()}"\n')
            conn = CoordinatorConnection(load_client_config(fake.home))
            with self.assertRaisesRegex(PermissionDeniedError, "public key in TRAINLET_HOME"):
                conn.call(nodes_request(), timeout=10)
            conn.close()
        self.assertEqual(fake.received, [])


if __name__ == "__main__":
    unittest.main()
