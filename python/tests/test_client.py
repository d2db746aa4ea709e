"""TrainerClient against a fake coordinator: what it sends, and how it reads the answers."""

import json
import threading
import unittest

from fake_coordinator import FakeCoordinator, response
from trainlet import CustomTrainer, Name, TrainerClient, TrainJob
from trainlet.errors import NotFoundError, TrainletError
from trainlet.v1 import operator_pb2

PHASE = operator_pb2.JobPhase
RANK = operator_pb2.RankState


def train_fn():
    print("hello")


def two_by_two(name="job", phase=PHASE.Value("JOB_PHASE_RUNNING")):
    """A 2-node x 2-rank job placed on node-b then node-a (node rank order != name order)."""
    j = operator_pb2.JobStatus(name=name, job_phase=phase, attempt=1, num_nodes=2, procs_per_node=2)
    j.runtime = "ClusterTrainingRuntime/torch-distributed"
    j.plugin = "torch"
    j.created_unix_ms = 1_700_000_000_000
    j.placement.extend(["node-b", "node-a"])
    for r in range(4):
        j.ranks.add(rank=r, local_rank=r % 2, node=["node-b", "node-a"][r // 2],
                    rank_state=RANK.Value("RANK_STATE_RUNNING"), attempt=1, pid=100 + r)
    return j


class FakeJobs:
    """The coordinator's job side, as far as the client sees it."""

    def __init__(self):
        self.jobs = {}
        self.applied = []
        self.deleted = []
        self.namespaces = []  # (request kind, namespace) of each request naming a job
        self.waits = []
        self.logs = {}  # rank -> bytes
        self.done = set()  # ranks whose log is complete
        self.missing_logs = 0  # log requests answered NotFound
        self.lock = threading.Lock()

    def __call__(self, req):
        with self.lock:
            kind = req.WhichOneof("body")
            body = getattr(req, kind)
            if kind in ("get_jobs", "delete_job", "wait_job", "logs"):
                self.namespaces.append((kind, body.namespace))
            return getattr(self, "on_" + kind)(body)

    def on_apply(self, a):
        doc = json.loads(a.yaml)  # JSON is what the client sends (YAML's subset)
        self.applied.append(doc)
        r = response()
        r.apply.created.append("TrainJob/" + doc["metadata"]["name"])
        return r

    def on_get_jobs(self, g):
        r = response()
        if g.name and g.name not in self.jobs:
            return response(error=f"trainjob/{g.name} not found", error_code="NotFound")
        for name, j in self.jobs.items():
            if not g.name or g.name == name:
                r.jobs.jobs.add().CopyFrom(j)
        return r

    def on_wait_job(self, w):
        self.waits.append((w.condition, w.timeout_ms))
        r = response()
        if w.name in self.jobs:
            r.wait_job.job.CopyFrom(self.jobs[w.name])
        else:
            r.wait_job.message = f"trainjob/{w.name} not found"
        return r

    def on_delete_job(self, d):
        self.deleted.append(d.name)
        r = response()
        r.delete_job.name = d.name
        return r

    def on_logs(self, l):
        if l.rank not in self.logs:  # placed, not started yet: its agent has no log for it
            self.missing_logs += 1
            return response(error=f"no log for rank {l.rank} of job attempt 1 on node node-1",
                            error_code="NotFound")
        data = self.logs.get(l.rank, b"")
        r = response()
        chunk = data[l.offset:l.offset + 5]  # small chunks: lines span reads
        r.logs.data = chunk
        r.logs.next_offset = l.offset + len(chunk)
        r.logs.eof = r.logs.next_offset >= len(data)
        r.logs.rank_done = l.rank in self.done
        r.logs.attempt = 1
        return r


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.jobs = FakeJobs()
        self.fake = FakeCoordinator(self.jobs).start()
        self.client = TrainerClient(home=self.fake.home, request_timeout=10)

    def tearDown(self):
        self.client.close()
        self.fake.stop()

    def test_train_applies_the_manifest_and_returns_the_name(self):
        name = self.client.train(trainer=CustomTrainer(func=train_fn, num_nodes=2), options=[Name("abc")])
        self.assertEqual(name, "abc")
        doc = self.jobs.applied[0]
        self.assertEqual(doc["spec"]["runtimeRef"]["name"], "torch-distributed")
        self.assertIn("def train_fn():", doc["spec"]["trainer"]["command"][2])

    def test_get_job_reads_status_steps_ranks_and_progress(self):
        j = two_by_two()
        j.ranks[2].rank_state = RANK.Value("RANK_STATE_FAILED")
        j.ranks[2].exit_code = 3
        j.trainer_status.progress_percentage = 40
        j.trainer_status.estimated_remaining_seconds = 90
        j.trainer_status.metrics.add(name="loss", value="0.25")
        j.trainer_status.last_updated_unix_ms = 1_700_000_001_000
        self.jobs.jobs["job"] = j
        job = self.client.get_job("job")
        self.assertIsInstance(job, TrainJob)
        self.assertEqual((job.status, job.phase, job.num_nodes), ("Running", "Running", 2))
        self.assertEqual(job.runtime.name, "torch-distributed")
        self.assertEqual(job.runtime.trainer.framework, "torch")
        self.assertEqual([s.name for s in job.steps], ["node-0", "node-1"])
        self.assertEqual([s.pod_name for s in job.steps], ["node-b", "node-a"])
        self.assertEqual([[r.rank for r in s.ranks] for s in job.steps], [[0, 1], [2, 3]])
        self.assertEqual([s.status for s in job.steps], ["Running", "Failed"])
        self.assertEqual(job.ranks[2].exit_code, 3)
        self.assertEqual(job.trainer_status.progress_percentage, 40)
        self.assertEqual(job.trainer_status.estimated_remaining_seconds, 90)
        self.assertEqual(job.trainer_status.metrics[0].value, "0.25")
        self.assertEqual(job.creation_timestamp.year, 2023)
        del j.trainer_status.metrics[:]
        j.ClearField("trainer_status")
        self.assertIsNone(self.client.get_job("job").trainer_status)

    def test_statuses_follow_kubeflows_names(self):
        for phase, status in [("PENDING", "Created"), ("STARTING", "Created"), ("RUNNING", "Running"),
                              ("RESTARTING", "Running"), ("SUCCEEDED", "Complete"),
                              ("FAILED", "Failed"), ("SUSPENDED", "Suspended")]:
            self.jobs.jobs[phase] = two_by_two(phase, PHASE.Value("JOB_PHASE_" + phase))
        got = {j.name: j.status for j in self.client.list_jobs()}
        self.assertEqual(got["PENDING"], "Created")
        for phase, status in got.items():
            self.assertEqual(self.client.get_job(phase).status, status)
        self.assertEqual(got["SUCCEEDED"], "Complete")
        self.assertEqual(got["RESTARTING"], "Running")
        self.assertEqual(len(self.client.list_jobs(runtime="torch-distributed")), 7)
        self.assertEqual(self.client.list_jobs(runtime="plain"), [])

    def test_unknown_job_is_not_found_with_the_coordinators_message(self):
        with self.assertRaisesRegex(NotFoundError, "trainjob/nope not found"):
            self.client.get_job("nope")
        with self.assertRaises(RuntimeError):
            self.client.wait_for_job_status("nope", timeout=5)

    def test_wait_returns_when_complete_and_calls_callbacks(self):
        self.jobs.jobs["job"] = two_by_two(phase=PHASE.Value("JOB_PHASE_SUCCEEDED"))
        seen = []
        job = self.client.wait_for_job_status("job", timeout=5, polling_interval=1, callbacks=[seen.append])
        self.assertEqual(job.status, "Complete")
        self.assertEqual([j.status for j in seen], ["Complete"])
        self.assertEqual(self.jobs.waits[0], ("Complete", 1000))

    def test_wait_for_a_failed_job_raises_with_reason_rank_exit_and_log(self):
        j = two_by_two(phase=PHASE.Value("JOB_PHASE_FAILED"))
        j.conditions.add(type="Failed", status="True", reason="RestartLimitExceeded",
                         message="attempt 1 failed: rank 3 exited with code 1")
        j.attempts.add(attempt=1, cause="rank 3 exited with code 1")
        j.ranks[3].rank_state = RANK.Value("RANK_STATE_FAILED")
        j.ranks[3].exit_code = 1
        self.jobs.jobs["job"] = j
        self.jobs.logs[3] = b"Traceback (most recent call last):\nValueError: boom\n"
        with self.assertRaises(RuntimeError) as e:
            self.client.wait_for_job_status("job", timeout=5)
        msg = str(e.exception)
        self.assertIn("TrainJob job is Failed: RestartLimitExceeded: attempt 1 failed: rank 3 exited with code 1", msg)
        self.assertIn("rank 3's log ends:", msg)
        self.assertIn("ValueError: boom", msg)
        self.assertEqual(msg.count("rank 3 exited with code 1"), 1)
        # Waiting for Failed itself is fine.
        self.assertEqual(self.client.wait_for_job_status("job", status={"Failed"}).status, "Failed")

    def test_failure_without_a_cause_names_the_failed_rank(self):
        j = two_by_two(phase=PHASE.Value("JOB_PHASE_FAILED"))
        j.conditions.add(type="Failed", status="True", reason="DeadlineExceeded")
        j.ranks[1].rank_state = RANK.Value("RANK_STATE_FAILED")
        j.ranks[1].signal = 9
        self.jobs.jobs["job"] = j
        with self.assertRaisesRegex(RuntimeError, "Failed: DeadlineExceeded. Rank 1 on node-b ended with signal 9"):
            self.client.wait_for_job_status("job", timeout=5)

    def test_wait_times_out(self):
        self.jobs.jobs["job"] = two_by_two()
        with self.assertRaisesRegex(TimeoutError, "Timeout waiting for TrainJob job to reach status Complete: it is Running"):
            self.client.wait_for_job_status("job", timeout=0.3, polling_interval=0.1)

    def test_wait_refuses_unknown_statuses(self):
        with self.assertRaisesRegex(ValueError, "Finished"):
            self.client.wait_for_job_status("job", status={"Finished"})

    def test_logs_of_a_step_with_two_ranks_are_prefixed(self):
        self.jobs.jobs["job"] = two_by_two()
        self.jobs.logs[2] = b"line one of rank 2\nsecond line\n"
        self.jobs.logs[3] = b"rank 3 says hi\nno newline at the end"
        lines = list(self.client.get_job_logs("job", step="node-1"))
        self.assertEqual(sorted(lines), sorted([
            "[rank 2] line one of rank 2", "[rank 2] second line",
            "[rank 3] rank 3 says hi", "[rank 3] no newline at the end"]))
        self.assertEqual(list(self.client.get_job_logs("job", step="rank-3"))[0], "rank 3 says hi")
        with self.assertRaisesRegex(ValueError, "node-0, node-1"):
            list(self.client.get_job_logs("job", step="dataset-initializer"))
        with self.assertRaisesRegex(ValueError, "node-0 to node-1"):
            list(self.client.get_job_logs("job", step="node-5"))

    def test_follow_reads_until_the_ranks_are_done(self):
        self.jobs.jobs["job"] = two_by_two()
        self.jobs.logs[0] = b"first\n"
        self.jobs.logs[1] = b""
        it = self.client.get_job_logs("job", step="node-0", follow=True)
        self.assertEqual(next(it), "[rank 0] first")

        def later():
            with self.jobs.lock:
                self.jobs.logs[0] += b"second\n"
                self.jobs.logs[1] = b"from one\n"
                self.jobs.done.update({0, 1})

        threading.Timer(0.5, later).start()
        rest = list(it)
        self.assertEqual(sorted(rest), ["[rank 0] second", "[rank 1] from one"])

    def test_follow_waits_for_a_placed_rank_that_has_no_log_yet(self):
        self.jobs.jobs["job"] = two_by_two()
        self.jobs.logs[0] = b"first\n"  # rank 1 is placed but has not started: no log yet
        it = self.client.get_job_logs("job", step="node-0", follow=True)
        self.assertEqual(next(it), "[rank 0] first")

        def later():
            with self.jobs.lock:
                self.jobs.logs[1] = b"started late\n"
                self.jobs.done.update({0, 1})

        threading.Timer(0.5, later).start()
        self.assertEqual(list(it), ["[rank 1] started late"])
        # Without follow, the missing log is the coordinator's answer.
        self.jobs.logs.pop(1)
        with self.assertRaisesRegex(TrainletError, "no log for rank 1"):
            list(self.client.get_job_logs("job", step="rank-1"))

    def test_follow_reads_a_rank_that_ran_and_ended_between_two_requests(self):
        # The read finds no log for rank 1; by the status request that follows (which, in the
        # SDK, can wait behind a long poll on the same connection) rank 1 has run and the job is
        # Succeeded. Its log is read, not taken for that of a rank that never started.
        self.jobs.jobs["job"] = two_by_two()
        self.jobs.logs[0] = b"first\n"
        self.jobs.done.add(0)
        on_get_jobs = self.jobs.on_get_jobs

        def ended_meanwhile(g):
            if self.jobs.missing_logs > 0 and 1 not in self.jobs.logs:
                self.jobs.logs[1] = b"ran quickly\n"
                self.jobs.done.add(1)
                self.jobs.jobs["job"].job_phase = PHASE.Value("JOB_PHASE_SUCCEEDED")
            return on_get_jobs(g)

        self.jobs.on_get_jobs = ended_meanwhile
        lines = list(self.client.get_job_logs("job", step="node-0", follow=True))
        self.assertEqual(self.jobs.missing_logs, 1)
        self.assertEqual(sorted(lines), ["[rank 0] first", "[rank 1] ran quickly"])

    def test_follow_ends_for_a_rank_that_never_started(self):
        j = two_by_two(phase=PHASE.Value("JOB_PHASE_FAILED"))
        self.jobs.jobs["job"] = j
        self.jobs.logs[0] = b"only rank 0 ran\n"
        self.jobs.done.add(0)
        lines = list(self.client.get_job_logs("job", step="node-0", follow=True))
        self.assertEqual(lines, ["[rank 0] only rank 0 ran"])
        self.assertEqual(self.jobs.missing_logs, 2)  # the read, and the one after the status

    def test_logs_before_the_job_started(self):
        j = two_by_two(phase=PHASE.Value("JOB_PHASE_PENDING"))
        j.attempt = 0
        del j.ranks[:]
        j.reason = "waiting for 2 nodes"
        self.jobs.jobs["job"] = j
        with self.assertRaisesRegex(TrainletError, "has not started yet .Pending: waiting for 2 nodes"):
            list(self.client.get_job_logs("job"))

    def test_events_and_delete(self):
        j = two_by_two()
        j.events.add(unix_ms=1_700_000_000_000, type="Warning", reason="RankFailed", message="rank 1 exited")
        self.jobs.jobs["job"] = j
        events = self.client.get_job_events("job")
        self.assertEqual((events[0].involved_object_kind, events[0].involved_object_name), ("TrainJob", "job"))
        self.assertEqual((events[0].reason, events[0].message, events[0].type), ("RankFailed", "rank 1 exited", "Warning"))
        self.client.delete_job("job")
        self.assertEqual(self.jobs.deleted, ["job"])

    def test_requests_name_the_namespace_default_unless_given(self):
        self.jobs.jobs["job"] = two_by_two()
        self.client.get_job("job")
        self.client.delete_job("job", namespace="team-a")
        self.client.wait_for_job_status("job", status={"Running"}, timeout=5, namespace="team-b")
        self.assertEqual(
            self.jobs.namespaces,
            [("get_jobs", "default"), ("delete_job", "team-a"), ("wait_job", "team-b")],
        )
        del self.jobs.namespaces[:]
        self.client.list_jobs(namespace=None)
        self.assertEqual(self.jobs.namespaces, [("get_jobs", "")])


if __name__ == "__main__":
    unittest.main()
