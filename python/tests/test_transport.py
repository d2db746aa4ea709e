"""The wire: one Envelope per frame, version 1, type matching the body, over CURVE."""

import os
import socket
import time
import unittest

import zmq

from fake_coordinator import FakeCoordinator, response
from trainlet.config import load_client_config
from trainlet.errors import ConfigError, NotFoundError, PermissionDeniedError, TrainletError
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


class EndpointListTest(unittest.TestCase):
    """coordinator: a list of endpoints (HA): the leader is found, followers and dead ones are
    passed over, and a request is never sent twice to coordinators that may both run it."""

    @staticmethod
    def follower(leader_endpoint):
        return lambda req: response(
            error="this coordinator is not the leader", error_code="NotLeader", leader=leader_endpoint
        )

    @staticmethod
    def leader(req):
        r = response()
        r.nodes.nodes.add().state = "Ready"
        return r

    def test_follower_sends_the_client_to_the_leader_it_names(self):
        with FakeCoordinator(self.leader) as lead:
            with FakeCoordinator(self.follower(lead.endpoint), keys_from=lead) as follow:
                follow.write_config(f"{follow.endpoint}, {lead.endpoint}")
                conn = CoordinatorConnection(load_client_config(follow.home))
                answer = conn.call(nodes_request(), timeout=10)
                self.assertEqual(conn.endpoint, lead.endpoint)
                conn.call(nodes_request(), timeout=10)  # stays with the leader
                conn.close()
                self.assertEqual(len(follow.received), 1)
        self.assertEqual(answer.nodes.nodes[0].state, "Ready")
        self.assertEqual(len(lead.received), 2)

    def test_single_endpoint_follower_hops_once_to_the_leader(self):
        with FakeCoordinator(self.leader) as lead:
            with FakeCoordinator(self.follower(lead.endpoint), keys_from=lead) as follow:
                conn = CoordinatorConnection(load_client_config(follow.home))
                answer = conn.call(nodes_request(), timeout=10)
                conn.close()
        self.assertEqual(answer.nodes.nodes[0].state, "Ready")

    def test_follower_that_knows_no_leader_is_a_not_leader_error(self):
        with FakeCoordinator(self.follower("")) as follow:
            conn = CoordinatorConnection(load_client_config(follow.home))
            with self.assertRaises(TrainletError) as caught:
                conn.call(nodes_request(), timeout=5)
            conn.close()
        self.assertEqual(caught.exception.code, "NotLeader")

    def test_dead_endpoint_is_passed_over(self):
        # A port nothing listens on: bound, then closed, so the kernel refuses connections.
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        dead = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
        probe.close()
        with FakeCoordinator(self.leader) as lead:
            lead.write_config(f"{dead},{lead.endpoint}")
            conn = CoordinatorConnection(load_client_config(lead.home))
            started = time.monotonic()
            answer = conn.call(nodes_request(), timeout=10)
            took = time.monotonic() - started
            conn.close()
        self.assertEqual(answer.nodes.nodes[0].state, "Ready")
        self.assertLess(took, 5)

    def test_no_leader_anywhere_times_out_naming_every_endpoint(self):
        with FakeCoordinator(self.follower("")) as a:
            with FakeCoordinator(self.follower(""), keys_from=a) as b:
                a.write_config(f"{a.endpoint}, {b.endpoint}")
                conn = CoordinatorConnection(load_client_config(a.home))
                with self.assertRaises(TimeoutError) as caught:
                    conn.call(nodes_request(), timeout=2)
                conn.close()
        self.assertIn(a.endpoint, str(caught.exception))
        self.assertIn(b.endpoint, str(caught.exception))
        self.assertIn("not the leader", str(caught.exception))

    def test_empty_list_is_a_config_error(self):
        with FakeCoordinator(self.leader) as lead:
            lead.write_config(" , ")
            with self.assertRaises(ConfigError):
                CoordinatorConnection(load_client_config(lead.home))
