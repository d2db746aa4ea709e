"""list_runtimes/get_runtime over the shipped runtimes, and where the protobuf modules are found."""

import os
import tempfile
import unittest
from unittest import mock

from trainlet import TrainerClient, _protos, runtimes
from trainlet.errors import NotFoundError

SOURCE_RUNTIMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "runtimes")


class RuntimesTest(unittest.TestCase):
    def setUp(self):
        patcher = mock.patch.dict(os.environ, {"TRAINLET_RUNTIMES_DIR": os.path.normpath(SOURCE_RUNTIMES)})
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_lists_the_shipped_runtimes_with_their_framework(self):
        by_name = {r.name: r for r in runtimes.list_runtimes()}
        self.assertIn("torch-distributed", by_name)
        self.assertEqual(by_name["torch-distributed"].trainer.framework, "torch")
        self.assertEqual(by_name["plain"].trainer.framework, "plain")
        self.assertEqual(by_name["mpi-distributed"].kind, "ClusterTrainingRuntime")
        self.assertEqual(runtimes.get_runtime("jax-distributed").trainer.framework, "jax")

    def test_unknown_runtime_says_how_to_use_an_applied_one(self):
        with self.assertRaisesRegex(NotFoundError, r"Runtime\(name='mine'\)"):
            runtimes.get_runtime("mine")

    def test_documents_other_than_runtimes_are_skipped(self):
        self.assertIsNone(runtimes.runtime_of_document({"kind": "TrainJob"}))
        self.assertIsNone(runtimes.runtime_of_document("text"))
        r = runtimes.runtime_of_document({"kind": "TrainingRuntime", "metadata": {"name": "x"},
                                          "spec": {"mlPolicy": {"numNodes": 3, "mpi": {}}}})
        self.assertEqual((r.name, r.kind, r.trainer.framework, r.trainer.num_nodes),
                         ("x", "TrainingRuntime", "mpi", 3))

    def test_the_client_answers_without_a_coordinator(self):
        client = TrainerClient.__new__(TrainerClient)  # list_runtimes sends nothing
        self.assertTrue(client.list_runtimes())


class ProtoLocationTest(unittest.TestCase):
    def test_env_dir_comes_first_and_missing_modules_are_explained(self):
        with tempfile.TemporaryDirectory() as d:
            with mock.patch.dict(os.environ, {"TRAINLET_PROTO_DIR": d}):
                self.assertEqual(_protos.candidate_roots()[0], d)
                self.assertNotEqual(_protos.find_proto_root(), d)  # nothing generated there
                self.assertIn(os.path.join(d, "trainlet", "v1"), _protos.missing_message())
                self.assertIn("trainlet_python_protos", _protos.missing_message())

    def test_the_loaded_modules_are_the_generated_ones(self):
        envelope_pb2, operator_pb2, progress_pb2 = _protos.load()
        self.assertTrue(envelope_pb2.__file__.endswith(os.path.join("trainlet", "v1", "envelope_pb2.py")))
        self.assertIn("trainer_status", operator_pb2.JobStatus.DESCRIPTOR.fields_by_name)


if __name__ == "__main__":
    unittest.main()
