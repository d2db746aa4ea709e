"""The SDK end to end on a local cluster (`trainletctl local up`: a coordinator and 2 agents on
this machine): a Python function doing a real gloo all_reduce with Debian's torch on 2 nodes x 2
ranks, its logs (one step, and followed), list_jobs, get_job, delete_job; and a function that
raises, so that wait_for_job_status raises with the rank's exit.

Needs TRAINLET_BIN (the build's bin/, set by ctest) and Debian's python3-torch; skipped without.
Everything lives in a temp dir; `local down` stops exactly the processes `local up` started.
"""

import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

from trainlet import Annotations, CustomTrainer, Name, TrainerClient
from trainlet.errors import NotFoundError

BIN = os.environ.get("TRAINLET_BIN", "")
CTL = os.path.join(BIN, "trainletctl")


def torch_available():
    r = subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"], capture_output=True)
    return r.returncode == 0


def allreduce_fn(scale):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1) * scale])
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()}/{dist.get_world_size()} all_reduce sum {t.item():g}", flush=True)
    dist.destroy_process_group()


def failing_fn():
    import os
    import time

    if os.environ["RANK"] == "1":
        raise ValueError("deliberate failure on rank 1")
    time.sleep(60)


@unittest.skipUnless(BIN and os.path.exists(CTL), "needs TRAINLET_BIN with trainletctl (ctest sets it)")
@unittest.skipUnless(torch_available(), "needs Debian's python3-torch for /usr/bin/python3")
class LocalClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="trainlet-sdk-e2e.")
        cls.home = os.path.join(cls.work, "cluster")
        subprocess.run(
            [CTL, "local", "up", "--agents", "2", "--slots", "4", "--dir", cls.home,
             "--heartbeat-ms", "200", "--lost-timeout-ms", "2000"],
            check=True, capture_output=True, timeout=60)
        cls.client = TrainerClient(home=cls.home)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        subprocess.run([CTL, "local", "down", "--dir", cls.home, "--timeout", "10"],
                       capture_output=True, timeout=60)
        shutil.rmtree(cls.work, ignore_errors=True)

    def delete_and_wait_gone(self, name):
        self.client.delete_job(name)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                self.client.get_job(name)
            except NotFoundError:
                return
            time.sleep(0.2)
        self.fail(f"{name} still there 20 s after delete_job")

    def test_gloo_all_reduce_on_2_nodes_x_2_ranks(self):
        start = time.monotonic()
        name = self.client.train(
            trainer=CustomTrainer(func=allreduce_fn, func_args={"scale": 1}, num_nodes=2,
                                  num_proc_per_node=2, env={"GLOO_SOCKET_IFNAME": "lo"}),
            options=[Name("sdk-allreduce")])
        self.assertEqual(name, "sdk-allreduce")
        # Follow node-0 from before the job starts until its ranks exit, beside the wait.
        followed = []
        follower = threading.Thread(
            target=lambda: followed.extend(self.client.get_job_logs(name, step="node-0", follow=True)))
        follower.start()
        job = self.client.wait_for_job_status(name, timeout=60, polling_interval=1)
        follower.join(30)
        self.assertFalse(follower.is_alive(), "get_job_logs(follow=True) did not end with the ranks")
        self.assertEqual(job.status, "Complete")
        self.assertEqual(sorted(followed), ["[rank 0] rank 0/4 all_reduce sum 10",
                                            "[rank 1] rank 1/4 all_reduce sum 10"])
        node1 = list(self.client.get_job_logs(name, step="node-1"))
        self.assertEqual(sorted(node1), ["[rank 2] rank 2/4 all_reduce sum 10",
                                         "[rank 3] rank 3/4 all_reduce sum 10"])
        self.assertEqual(list(self.client.get_job_logs(name, step="rank-3")),
                         ["rank 3/4 all_reduce sum 10"])
        job = self.client.get_job(name)
        self.assertEqual((job.num_nodes, job.num_proc_per_node, job.runtime.name), (2, 2, "torch-distributed"))
        self.assertEqual([[r.rank for r in s.ranks] for s in job.steps], [[0, 1], [2, 3]])
        self.assertEqual({s.status for s in job.steps}, {"Succeeded"})
        self.assertEqual(len({s.pod_name for s in job.steps}), 2)  # two different nodes
        self.assertIn(name, [j.name for j in self.client.list_jobs()])
        self.assertTrue(any(e.reason for e in self.client.get_job_events(name)))
        self.delete_and_wait_gone(name)
        self.assertNotIn(name, [j.name for j in self.client.list_jobs()])
        print(f"gloo all_reduce 2x2 through the SDK: {time.monotonic() - start:.1f} s")

    def test_a_raising_function_fails_the_wait_with_the_ranks_exit(self):
        name = self.client.train(
            trainer=CustomTrainer(func=failing_fn, num_nodes=2, num_proc_per_node=1),
            options=[Name("sdk-failing"), Annotations({"trainlet.io/max-restarts": "0"})])
        with self.assertRaises(RuntimeError) as e:
            self.client.wait_for_job_status(name, timeout=60, polling_interval=1)
        message = str(e.exception)
        self.assertIn("TrainJob sdk-failing is Failed", message)
        self.assertRegex(message, r"rank 1 on node-\d exited with code 1")
        self.assertIn("ValueError: deliberate failure on rank 1", message)
        self.assertEqual(self.client.get_job(name).status, "Failed")
        self.delete_and_wait_gone(name)


if __name__ == "__main__":
    unittest.main()
