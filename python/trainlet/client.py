"""TrainerClient: Kubeflow's ``kubeflow.trainer.TrainerClient`` over trainlet's operator API.

Each method is one or a few operator requests (proto/trainlet/v1/operator.proto) through a
CoordinatorConnection (transport.py). Errors: ValueError for bad arguments (nothing sent),
TimeoutError when the coordinator does not answer or a wait runs out, RuntimeError
(TrainletError) carrying the coordinator's message otherwise.
"""

import time

from trainlet import job_view, runtimes, trainjob_spec
from trainlet import types as t
from trainlet.display import JobProgressDisplay
from trainlet.errors import NotFoundError, TrainletError
from trainlet.log_stream import LogStream
from trainlet.transport import DEFAULT_TIMEOUT_S, CoordinatorConnection

# The coordinator holds one wait for at most an hour (operator_service.cpp).
_MAX_WAIT_MS = 3600 * 1000
# A TrainJob without metadata.namespace is in this one, as on Kubernetes.
DEFAULT_NAMESPACE = "default"


class TrainerClient:
    """A client of one trainlet cluster: the one TRAINLET_HOME (or ``home``) names.

    ``request_timeout`` bounds each request that is not a wait (seconds).
    """

    def __init__(self, home=None, request_timeout=DEFAULT_TIMEOUT_S, connection=None):
        self._conn = connection or CoordinatorConnection.from_home(home)
        self._ops = self._conn.protos[1]
        self.request_timeout = request_timeout

    def close(self):
        self._conn.close()

    # Runtimes: the coordinator's, shipped and applied (runtimes.py).

    def list_runtimes(self, namespace=DEFAULT_NAMESPACE):
        """Every ClusterTrainingRuntime, then the TrainingRuntimes of ``namespace`` (None: of
        every namespace), as list[Runtime]."""
        req = runtimes.runtimes_request(self._ops, namespace=namespace)
        answer = self._call(req).runtimes
        return [runtimes.runtime_of_info(r) for r in answer.runtimes]

    def get_runtime(self, name, namespace=DEFAULT_NAMESPACE):
        """The ClusterTrainingRuntime ``name``, else the TrainingRuntime ``name`` of
        ``namespace``; NotFoundError (a RuntimeError) naming where it looked when neither
        exists."""
        req = runtimes.runtimes_request(self._ops, name=name, namespace=namespace)
        answer = self._call(req).runtimes
        return runtimes.runtime_of_info(answer.runtimes[0])

    # Jobs.

    def train(self, runtime=None, initializer=None, trainer=None, options=None):
        """Creates a TrainJob and returns its name. ``runtime`` is a Runtime or a name
        (default torch-distributed); ``trainer`` a CustomTrainer or CommandTrainer; ``options``
        a list from trainlet.options (Name, Labels, Annotations, TrainerEnv, ...)."""
        job = trainjob_spec.build_trainjob(runtime, trainer, initializer, options)
        name = job["metadata"]["name"]
        req = self._ops.OperatorRequest()
        req.apply.yaml = trainjob_spec.to_apply_text(job)
        req.apply.source_name = f"TrainerClient.train (trainjob/{name})"
        result = self._call(req).apply
        if not any(c.lower() == f"trainjob/{name}" for c in result.created):
            said = ", ".join(list(result.unchanged) + list(result.configured)) or "nothing"
            raise TrainletError(f"trainjob/{name} was not created (the coordinator said: {said})")
        return name

    def list_jobs(self, runtime=None, namespace=DEFAULT_NAMESPACE):
        """Every TrainJob of ``namespace`` (None: of every namespace), oldest first; with
        ``runtime``, only those on it."""
        jobs, token = [], ""
        while True:  # in pages, as trainletctl get trainjobs: one answer may not hold them all
            req = self._ops.OperatorRequest()
            req.get_jobs.name = ""
            req.get_jobs.limit = 500
            req.get_jobs.continue_token = token
            if namespace is None:
                req.get_jobs.all_namespaces = True
            else:
                req.get_jobs.namespace = namespace
            page = self._call(req).jobs
            jobs += [job_view.train_job_of(j) for j in page.jobs]
            token = page.continue_token
            if not token:
                break
        if runtime is not None:
            want = runtime if isinstance(runtime, str) else runtime.name
            jobs = [j for j in jobs if j.runtime.name == want]
        return jobs

    def get_job(self, name, namespace=DEFAULT_NAMESPACE):
        """The TrainJob ``name`` of ``namespace``: status, steps, ranks and progress
        (trainer_status)."""
        return job_view.train_job_of(self._job_status(name, namespace))

    def get_job_events(self, name, namespace=DEFAULT_NAMESPACE):
        """The job's events, oldest first, as list[Event]."""
        return job_view.events_of(self._job_status(name, namespace))

    def delete_job(self, name, namespace=DEFAULT_NAMESPACE):
        """Deletes the job: every rank is stopped, then the job is removed."""
        req = self._ops.OperatorRequest()
        req.delete_job.name = name
        req.delete_job.namespace = namespace
        self._call(req)

    def get_job_logs(self, name, step=t.NODE + "-0", follow=False, namespace=DEFAULT_NAMESPACE):
        """The log lines of one step (``node-N``: the ranks on node rank N, each line prefixed
        ``[rank R]`` when the node runs several; or ``rank-R``: one rank), as an iterator of
        str. With ``follow``, waits for the job to start and yields lines until the step's
        ranks exit."""
        return LogStream(self, name, step, follow, namespace).lines()

    def wait_for_job_status(
        self,
        name,
        status={t.TRAINJOB_COMPLETE},  # noqa: B006 (Kubeflow's signature; never mutated)
        timeout=600,
        polling_interval=2,
        callbacks=None,
        namespace=DEFAULT_NAMESPACE,
    ):
        """Waits until the job's status is one of ``status`` and returns the TrainJob.

        Raises ValueError for an unknown status, RuntimeError when the job Failed and Failed is
        not awaited (with the job's Failed reason, the failing rank's exit and the end of its
        log), and TimeoutError after ``timeout`` seconds. ``callbacks`` are called with the
        TrainJob after each poll. Shows a progress bar in Jupyter (display.py).
        """
        wanted = set(status)
        unknown = wanted - t.TRAINJOB_STATUSES
        if unknown:
            raise ValueError(
                f"status: {sorted(unknown)} not among {sorted(t.TRAINJOB_STATUSES)}"
            )
        if polling_interval <= 0 or timeout <= 0:
            raise ValueError("timeout and polling_interval must be positive")
        deadline = time.monotonic() + timeout
        display = JobProgressDisplay(name)
        try:
            return self._wait_loop(
                name, wanted, deadline, polling_interval, callbacks, display, namespace
            )
        finally:
            display.close()

    # Internals.

    def _wait_loop(
        self, name, wanted, deadline, polling_interval, callbacks, display, namespace
    ):
        condition = _wake_condition(wanted)
        while True:
            left = deadline - time.monotonic()
            proto_job = self._wait_once(
                name, condition, min(polling_interval, max(left, 0.001)), namespace
            )
            job = job_view.train_job_of(proto_job)
            display.update(job)
            for callback in callbacks or []:
                callback(job)
            if job.status in wanted:
                return job
            if job.status == t.TRAINJOB_FAILED:
                raise TrainletError(self._failure_message(proto_job, namespace))
            if job.status == t.TRAINJOB_COMPLETE:
                raise TrainletError(
                    f"TrainJob {name} is Complete, so it will never be {' or '.join(sorted(wanted))}"
                )
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"Timeout waiting for TrainJob {name} to reach status "
                    f"{' or '.join(sorted(wanted))}: it is {job.status} (phase {job.phase}"
                    + (f": {job.reason}" if job.reason else "")
                    + ")"
                )

    def _wait_once(self, name, condition, seconds, namespace=DEFAULT_NAMESPACE):
        """The job after a long poll of at most ``seconds``: the coordinator answers at once
        when ``condition`` holds or can no longer hold (operator_service.cpp CheckWait)."""
        req = self._ops.OperatorRequest()
        req.wait_job.name = name
        req.wait_job.namespace = namespace
        req.wait_job.condition = condition
        req.wait_job.timeout_ms = max(1, min(_MAX_WAIT_MS, int(seconds * 1000)))
        result = self._call(req, timeout=seconds + self.request_timeout).wait_job
        if not result.HasField("job"):
            raise NotFoundError(result.message or f"trainjob/{name} not found", "NotFound")
        return result.job

    def _failure_message(self, job, namespace=DEFAULT_NAMESPACE):
        message = f"TrainJob {job.name} is Failed"
        summary = job_view.failure_summary(job)
        if summary:
            message += f": {summary}"
        failed = job_view.failed_ranks(job)
        if failed:
            r = failed[0]
            if f"rank {r.rank} " not in summary:
                how = f"signal {r.signal}" if r.signal else f"exit code {r.exit_code}"
                message += f". Rank {r.rank} on {r.node} ended with {how}"
            tail = self._log_tail(job.name, r.rank, namespace=namespace)
            if tail:
                message += f"\nrank {r.rank}'s log ends:\n{tail}"
        return message

    def _log_tail(
        self, name, rank, max_bytes=2048, max_lines=8, max_reads=64, namespace=DEFAULT_NAMESPACE
    ):
        """The last lines of a rank's log of the current attempt; "" when it cannot be read.
        Reads the log through (at most ``max_reads`` chunks) and keeps its end."""
        tail = b""
        offset = 0
        try:
            for _ in range(max_reads):
                req = self._ops.OperatorRequest()
                req.logs.job = name
                req.logs.namespace = namespace
                req.logs.rank = rank
                req.logs.offset = offset
                req.logs.max_bytes = 1 << 20
                chunk = self._call(req).logs
                tail = (tail + chunk.data)[-max_bytes:]
                offset = chunk.next_offset
                if chunk.eof or not chunk.data:
                    break
        except (TrainletError, TimeoutError):
            return ""
        lines = tail.decode("utf-8", "replace").rstrip("\n").split("\n")
        return "\n".join(lines[-max_lines:])

    def _job_status(self, name, namespace=DEFAULT_NAMESPACE):
        if not name:
            raise ValueError("name: give the TrainJob's name")
        req = self._ops.OperatorRequest()
        req.get_jobs.name = name
        req.get_jobs.namespace = namespace
        jobs = self._call(req).jobs.jobs
        if not jobs:
            raise NotFoundError(f"trainjob/{name} not found", "NotFound")
        return jobs[0]

    def _call(self, request, timeout=None):
        return self._conn.call(request, timeout=timeout or self.request_timeout)


def _wake_condition(wanted):
    """The coordinator condition a wait long-polls on: the first awaited one it knows."""
    for status, condition in (
        (t.TRAINJOB_COMPLETE, "Complete"),
        (t.TRAINJOB_FAILED, "Failed"),
        (t.TRAINJOB_SUSPENDED, "Suspended"),
        (t.TRAINJOB_RUNNING, "Running"),
    ):
        if status in wanted:
            return condition
    return "Complete"  # Created: answered at the poll interval, or at once when it ends
