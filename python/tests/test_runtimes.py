"""list_runtimes/get_runtime through the coordinator, and where the protobuf modules are found."""

import os
import tempfile
import unittest
from unittest import mock

from fake_coordinator import FakeCoordinator, response
from trainlet import TrainerClient, _protos
from trainlet.errors import NotFoundError


class RuntimesTest(unittest.TestCase):
    """list_runtimes/get_runtime ask the coordinator (GetRuntimesRequest) and show its answer."""

    @staticmethod
    def coordinator(req):
        get = req.get_runtimes
        if get.name == "nowhere":
            return response(
                error='runtime "nowhere" not found: no ClusterTrainingRuntime, nor '
                "TrainingRuntime in namespace default, has that name",
                error_code="NotFound",
            )
        r = response()
        torch = r.runtimes.runtimes.add()
        torch.kind, torch.name, torch.framework, torch.plugin = (
            "ClusterTrainingRuntime", "torch-distributed", "torch", "torch")
        torch.num_nodes = 1
        torch.command.extend(["torchrun", "train.py"])
        if not get.name:
            mine = r.runtimes.runtimes.add()
            mine.kind, mine.name, mine.namespace, mine.framework = (
                "TrainingRuntime", "mine", get.namespace or "team-x", "mpi")
            mine.num_nodes = 3
        return r

    def client(self, fake):
        return TrainerClient(home=fake.home)

    def test_lists_cluster_and_namespaced_runtimes(self):
        with FakeCoordinator(self.coordinator) as fake:
            client = self.client(fake)
            listed = client.list_runtimes(namespace="team-a")
            client.list_runtimes(namespace=None)
            client.close()
            requests = [env.operator_request.get_runtimes for _, env in fake.received]
        self.assertEqual([r.name for r in listed], ["torch-distributed", "mine"])
        self.assertEqual(listed[0].trainer.framework, "torch")
        self.assertEqual(listed[0].trainer.command, ("torchrun", "train.py"))
        self.assertEqual((listed[1].kind, listed[1].namespace, listed[1].trainer.num_nodes),
                         ("TrainingRuntime", "team-a", 3))
        self.assertEqual((requests[0].namespace, requests[0].all_namespaces), ("team-a", False))
        self.assertTrue(requests[1].all_namespaces)

    def test_get_runtime_by_name(self):
        with FakeCoordinator(self.coordinator) as fake:
            client = self.client(fake)
            r = client.get_runtime("torch-distributed")
            client.close()
            asked = fake.received[0][1].operator_request.get_runtimes
        self.assertEqual((r.name, r.kind, r.trainer.framework),
                         ("torch-distributed", "ClusterTrainingRuntime", "torch"))
        self.assertEqual((asked.name, asked.namespace), ("torch-distributed", "default"))

    def test_unknown_runtime_carries_the_coordinators_message(self):
        with FakeCoordinator(self.coordinator) as fake:
            client = self.client(fake)
            with self.assertRaisesRegex(NotFoundError, r'runtime "nowhere" not found'):
                client.get_runtime("nowhere")
            client.close()


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
