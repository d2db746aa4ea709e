"""get_job_logs: one step's rank logs as lines, read through the coordinator's ``logs`` request
as ``trainletctl logs`` reads them (cli/trainletctl/commands.cpp CmdLogs).

A step is ``node-N`` (the ranks node rank N runs) or ``rank-R`` (one rank). The attempt is
pinned when the first chunk answers, so a restart while following does not mix two attempts'
offsets. Lines are yielded without their newline; when a step has several ranks each line is
prefixed ``[rank R] ``.
"""

import time

from trainlet import job_view
from trainlet import types as t
from trainlet.display import JobProgressDisplay
from trainlet.errors import NotFoundError, TrainletError

_CHUNK_BYTES = 256 << 10
_IDLE_SLEEP_S = 0.2
_START_POLL_S = 0.5


def parse_step(step):
    """("node", N) or ("rank", R); ValueError for anything else."""
    kind, _, index = str(step).rpartition("-")
    if kind in (t.NODE, "rank") and index.isdigit():
        return kind, int(index)
    raise ValueError(
        f"step {step!r}: trainlet's steps are node-0, node-1, ... (a node's ranks) or rank-N "
        "(one rank); it has no initializer steps"
    )


class _RankLog:
    """Where the reading of one rank's log is."""

    def __init__(self, rank):
        self.rank = rank
        self.offset = 0
        self.partial = ""
        self.done = False


class LogStream:
    """Reads the logs of one step of one job through a TrainerClient."""

    def __init__(self, client, name, step, follow, namespace="default"):
        self._client = client
        self._name = name
        self._namespace = namespace
        self._kind, self._index = parse_step(step)
        self._follow = bool(follow)
        self._attempt = 0

    def lines(self):
        display = JobProgressDisplay(self._name) if self._follow else None
        try:
            ranks = self._ranks_of_step(display)
            logs = [_RankLog(r) for r in ranks]
            prefix = len(logs) > 1
            last_status = 0.0
            while not all(log.done for log in logs):
                progressed = False
                for log in logs:
                    if log.done:
                        continue
                    text, more = self._read(log)
                    progressed = progressed or more
                    for line in text:
                        yield f"[rank {log.rank}] {line}" if prefix else line
                if display is not None and time.monotonic() - last_status > 1.0:
                    display.update(self._client.get_job(self._name, self._namespace))
                    last_status = time.monotonic()
                if not progressed:
                    time.sleep(_IDLE_SLEEP_S)
        finally:
            if display is not None:
                display.close()

    def _read(self, log):
        """Reads the next chunk; returns (complete lines, whether more may be there now)."""
        ops = self._client._ops
        req = ops.OperatorRequest()
        req.logs.job = self._name
        req.logs.namespace = self._namespace
        req.logs.rank = log.rank
        req.logs.offset = log.offset
        req.logs.max_bytes = _CHUNK_BYTES
        req.logs.attempt = self._attempt
        try:
            chunk = self._client._call(req).logs
        except NotFoundError:
            # The rank is placed but its agent has not started it yet, so it has no log: when
            # following, wait for it, unless the job has ended and the rank never started.
            if not self._follow:
                raise
            if not self._job_ended():
                return [], False
            try:
                # The rank may have started, run and ended since the read that found no log
                # (the status request can wait behind another thread's long poll on the same
                # connection), so it is read once more before it counts as never started.
                chunk = self._client._call(req).logs
            except NotFoundError:
                log.done = True
                return [], False
        if self._attempt == 0:
            self._attempt = chunk.attempt
        log.offset = chunk.next_offset
        log.partial += chunk.data.decode("utf-8", "replace")
        *complete, log.partial = log.partial.split("\n")
        finished = chunk.eof and (not self._follow or chunk.rank_done)
        if finished:
            log.done = True
            if log.partial:
                complete.append(log.partial)
                log.partial = ""
        return complete, bool(chunk.data) or not chunk.eof

    def _job_ended(self):
        phase = job_view.phase_of(self._client._job_status(self._name, self._namespace))
        return phase in ("Succeeded", "Failed")

    def _ranks_of_step(self, display):
        """The ranks of the step, once the job has them (with follow: waiting for them)."""
        while True:
            job = self._client._job_status(self._name, self._namespace)
            if job.attempt > 0 and len(job.ranks) > 0:
                break
            phase = job_view.phase_of(job)
            if not self._follow or phase in ("Succeeded", "Failed"):
                raise TrainletError(
                    f"trainjob/{self._name} has not started yet ({phase}"
                    + (f": {job_view.reason_of(job)}" if job.reason else "")
                    + ")",
                    "Unavailable",
                )
            if display is not None:
                display.update(job_view.train_job_of(job))
            time.sleep(_START_POLL_S)
        if self._kind == "rank":
            if not any(r.rank == self._index for r in job.ranks):
                raise ValueError(
                    f"step rank-{self._index}: trainjob/{self._name} has ranks 0-{len(job.ranks) - 1}"
                )
            return [self._index]
        ranks = sorted(r.rank for r in job.ranks if job_view.node_index_of(job, r) == self._index)
        if not ranks:
            raise ValueError(
                f"step node-{self._index}: trainjob/{self._name} has steps node-0 to "
                f"node-{max(job.num_nodes, 1) - 1}"
            )
        return ranks
