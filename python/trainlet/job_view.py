"""How a coordinator JobStatus (proto/trainlet/v1/operator.proto) reads as Kubeflow's TrainJob.

Kubeflow's status is one of Created, Running, Complete, Failed; trainlet's phase is finer:

    Pending, Starting          -> Created   (not every rank has started)
    Running, Restarting        -> Running   (an attempt runs, or the gang is being restarted)
    Succeeded                  -> Complete
    Failed                     -> Failed
    Suspended                  -> Suspended

Steps are the job's nodes in node-rank order (``node-0``, ``node-1``, ...), each with the ranks
it runs; a step's status is its ranks' (Failed if one failed, Succeeded when all did, Running
while one runs, else Pending).
"""

from datetime import datetime, timezone

from trainlet import types as t

_PHASES = {
    0: "Pending",
    1: "Pending",
    2: "Starting",
    3: "Running",
    4: "Restarting",
    5: "Succeeded",
    6: "Failed",
    7: "Suspended",
}
_STATUS_OF_PHASE = {
    "Pending": t.TRAINJOB_CREATED,
    "Starting": t.TRAINJOB_CREATED,
    "Running": t.TRAINJOB_RUNNING,
    "Restarting": t.TRAINJOB_RUNNING,
    "Succeeded": t.TRAINJOB_COMPLETE,
    "Failed": t.TRAINJOB_FAILED,
    "Suspended": t.TRAINJOB_SUSPENDED,
}
_RANK_STATES = {
    0: "Unknown",
    1: "Pending",
    2: "Running",
    3: "Succeeded",
    4: "Failed",
    5: "StartFailed",
    6: "Lost",
    7: "Stopped",
}
_RANK_FAILED = {"Failed", "StartFailed", "Lost"}


def time_of_ms(unix_ms):
    """A UTC datetime for a Unix time in ms; None for 0 (unset)."""
    if not unix_ms:
        return None
    return datetime.fromtimestamp(unix_ms / 1000.0, tz=timezone.utc)


def phase_of(job):
    return _PHASES.get(job.job_phase, "Unknown")


def status_of(job):
    return _STATUS_OF_PHASE.get(phase_of(job), t.UNKNOWN)


def rank_of(r):
    return t.Rank(
        rank=r.rank,
        local_rank=r.local_rank,
        node=r.node,
        status=_RANK_STATES.get(r.rank_state, "Unknown"),
        pid=r.pid,
        exit_code=r.exit_code,
        signal=r.signal,
        message=r.message,
        attempt=r.attempt,
        devices=r.devices,
    )


def _step_status(ranks):
    states = {r.status for r in ranks}
    if states & _RANK_FAILED:
        return "Failed"
    if states and states <= {"Succeeded"}:
        return "Succeeded"
    if "Running" in states:
        return "Running"
    if states and states <= {"Stopped", "Succeeded"}:
        return "Stopped"
    return "Pending"


def node_index_of(job, rank):
    """The node rank that runs ``rank``: its node's place in the placement, else by count."""
    placement = list(job.placement)
    if rank.node in placement and placement.count(rank.node) == 1:
        return placement.index(rank.node)
    per_node = job.procs_per_node or 1
    return rank.rank // per_node


def steps_of(job):
    ranks = [rank_of(r) for r in job.ranks]
    by_node = {}
    for proto_rank, rank in zip(job.ranks, ranks):
        by_node.setdefault(node_index_of(job, proto_rank), []).append(rank)
    count = max([job.num_nodes] + [i + 1 for i in by_node])
    steps = []
    for i in range(count):
        node_ranks = sorted(by_node.get(i, []), key=lambda r: r.rank)
        node = job.placement[i] if i < len(job.placement) else ""
        devices = [d for r in node_ranks for d in r.devices.split(",") if d]
        steps.append(
            t.Step(
                name=f"{t.NODE}-{i}",
                status=_step_status(node_ranks) if node_ranks else "Pending",
                pod_name=node,
                device=devices[0].split(":")[0] if devices else "cpu",
                device_count=str(len(devices)) if devices else t.UNKNOWN,
                ranks=node_ranks,
            )
        )
    return steps


def trainer_status_of(job):
    if not job.HasField("trainer_status"):
        return None
    s = job.trainer_status
    return t.TrainerStatus(
        progress_percentage=s.progress_percentage if s.HasField("progress_percentage") else None,
        estimated_remaining_seconds=(
            s.estimated_remaining_seconds if s.HasField("estimated_remaining_seconds") else None
        ),
        metrics=[t.Metric(m.name, m.value) for m in s.metrics],
        last_updated_time=time_of_ms(s.last_updated_unix_ms),
        received_time=time_of_ms(s.received_unix_ms),
        attempt=s.attempt,
    )


def runtime_of(job):
    kind, _, name = job.runtime.partition("/")
    if not name:
        kind, name = "ClusterTrainingRuntime", job.runtime
    trainer = t.RuntimeTrainer(
        trainer_type=t.TrainerType.CUSTOM_TRAINER,
        framework=job.plugin or t.UNKNOWN,
        num_nodes=job.num_nodes or 1,
    )
    return t.Runtime(name=name, trainer=trainer, kind=kind or "ClusterTrainingRuntime")


def reason_of(job):
    """The job's reason with its message ("Unschedulable: needs 5 nodes ..."), or the reason."""
    return ": ".join(p for p in (job.reason, job.message) if p)


def train_job_of(job):
    """The TrainJob dataclass for a coordinator JobStatus."""
    return t.TrainJob(
        name=job.name,
        runtime=runtime_of(job),
        steps=steps_of(job),
        num_nodes=job.num_nodes,
        creation_timestamp=time_of_ms(job.created_unix_ms),
        status=status_of(job),
        phase=phase_of(job),
        reason=reason_of(job),
        attempt=job.attempt,
        num_proc_per_node=job.procs_per_node,
        ranks=[rank_of(r) for r in job.ranks],
        conditions=[
            t.Condition(c.type, c.status, c.reason, c.message, time_of_ms(c.unix_ms))
            for c in job.conditions
        ],
        trainer_status=trainer_status_of(job),
        command=tuple(job.command),
    )


def events_of(job):
    return [
        t.Event(
            involved_object_kind="TrainJob",
            involved_object_name=job.name,
            message=e.message,
            reason=e.reason,
            event_time=time_of_ms(e.unix_ms),
            type=e.type or "Normal",
        )
        for e in job.events
    ]


def failure_summary(job):
    """Why a Failed job failed, in one line: the Failed condition's reason and message, and the
    last attempt's cause (which names the failing rank and its exit) when not already said."""
    parts = []
    for c in job.conditions:
        if c.type == "Failed" and c.status == "True":
            parts.append(": ".join(p for p in (c.reason, c.message) if p))
    if not parts and job.reason:
        parts.append(reason_of(job))
    if job.attempts:
        last = job.attempts[-1]
        if last.cause and not any(last.cause in p for p in parts):
            parts.append(f"attempt {last.attempt}: {last.cause}")
    return "; ".join(p for p in parts if p)


def failed_ranks(job):
    """The current attempt's ranks that failed, lowest first."""
    return [rank_of(r) for r in job.ranks if _RANK_STATES.get(r.rank_state) in _RANK_FAILED]
