"""The SDK's data types, named and shaped as Kubeflow's ``kubeflow.trainer.types``.

A notebook written for Kubeflow uses the same classes and fields; trainlet adds a few fields at
the end of some (marked "trainlet:"), always with defaults, so Kubeflow's positional and
keyword construction keeps working.
"""

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Callable, Optional, Union

UNKNOWN = "Unknown"

# TrainJob statuses, as Kubeflow's constants name them (plus Suspended, a trainlet phase).
TRAINJOB_CREATED = "Created"
TRAINJOB_RUNNING = "Running"
TRAINJOB_COMPLETE = "Complete"
TRAINJOB_FAILED = "Failed"
TRAINJOB_SUSPENDED = "Suspended"
TRAINJOB_STATUSES = frozenset(
    {TRAINJOB_CREATED, TRAINJOB_RUNNING, TRAINJOB_COMPLETE, TRAINJOB_FAILED, TRAINJOB_SUSPENDED}
)

DEFAULT_RUNTIME = "torch-distributed"  # Kubeflow's default runtime for train()
NODE = "node"  # steps are "node-0", "node-1", ... as Kubeflow names them


@dataclass
class CustomTrainer:
    """A self-contained Python function run on every rank.

    The function's source (``inspect.getsource``, dedented) is shipped in the TrainJob's
    command and run as ``python3 -c`` on every rank with the runtime's env contract (on
    torch-distributed: RANK, WORLD_SIZE, MASTER_ADDR, ... started directly, no torchrun).
    It must do its own imports, as in Kubeflow. ``func_args`` are passed as keyword
    arguments and must be JSON-serialisable.

    ``packages_to_install`` are installed with ``python3 -m pip install`` by local rank 0 of
    each node before the function runs (the node's other ranks wait for it); when pip fails,
    the rank exits with pip's status and says so in its log, so the job fails with that exit.
    """

    func: Callable
    func_args: Optional[dict] = None
    packages_to_install: Optional[list] = None
    pip_index_urls: list = field(default_factory=list)
    num_nodes: Optional[int] = None
    resources_per_node: Optional[dict] = None
    env: Optional[dict] = None
    # trainlet: ranks per node (spec.trainer.numProcPerNode); None keeps the runtime's.
    num_proc_per_node: Optional[Union[int, str]] = None
    # trainlet: the interpreter the ranks run the function with.
    python: str = "/usr/bin/python3"


@dataclass
class CommandTrainer:
    """Any command, run as the runtime runs its trainer (spec.trainer.command and args)."""

    command: list
    args: Optional[list] = None
    num_nodes: Optional[int] = None
    resources_per_node: Optional[dict] = None
    env: Optional[dict] = None
    num_proc_per_node: Optional[Union[int, str]] = None  # trainlet: spec.trainer.numProcPerNode


class TrainerType(Enum):
    CUSTOM_TRAINER = CustomTrainer.__name__
    COMMAND_TRAINER = CommandTrainer.__name__


@dataclass
class RuntimeTrainer:
    """The trainer a runtime describes."""

    trainer_type: TrainerType
    framework: str
    image: str = ""  # trainlet runs no images; kept for Kubeflow's shape
    num_nodes: int = 1
    device: str = UNKNOWN
    device_count: str = UNKNOWN
    command: tuple = ()


@dataclass
class Runtime:
    """A (Cluster)TrainingRuntime, referred to by name in train()."""

    name: str
    trainer: Optional[RuntimeTrainer] = None
    pretrained_model: Optional[str] = None
    kind: str = "ClusterTrainingRuntime"  # trainlet: the runtimeRef kind
    namespace: str = ""  # trainlet: a TrainingRuntime's namespace; "" for a cluster-wide one


@dataclass
class Rank:
    """trainlet: one rank of the job's current attempt, as the coordinator knows it."""

    rank: int
    local_rank: int
    node: str
    status: str  # Pending, Running, Succeeded, Failed, StartFailed, Lost, Stopped
    pid: int = 0
    exit_code: int = 0
    signal: int = 0
    message: str = ""
    attempt: int = 0
    devices: str = ""


@dataclass
class Step:
    """One node of the job (``node-0``, ``node-1``, ...), as Kubeflow's steps are."""

    name: str
    status: Optional[str]
    pod_name: str  # trainlet: the node that runs it (trainlet has no pods)
    device: str = UNKNOWN
    device_count: str = UNKNOWN
    ranks: list = field(default_factory=list)  # trainlet: the Ranks it runs


@dataclass
class Metric:
    name: str
    value: str


@dataclass
class TrainerStatus:
    """Kubeflow's trainerStatus: the progress the ranks last reported."""

    progress_percentage: Optional[int] = None
    estimated_remaining_seconds: Optional[int] = None
    metrics: list = field(default_factory=list)  # Metric
    last_updated_time: Optional[datetime] = None
    received_time: Optional[datetime] = None  # trainlet: when the coordinator took it
    attempt: int = 0


@dataclass
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    time: Optional[datetime] = None


@dataclass
class TrainJob:
    """A TrainJob as get_job and list_jobs return it."""

    name: str
    runtime: Runtime
    steps: list
    num_nodes: int
    creation_timestamp: Optional[datetime]
    status: str = UNKNOWN
    # trainlet: the finer state behind ``status`` and what Kubeflow keeps in the CR's status.
    phase: str = UNKNOWN  # Pending, Starting, Running, Restarting, Succeeded, Failed, Suspended
    reason: str = ""
    attempt: int = 0
    num_proc_per_node: int = 0
    ranks: list = field(default_factory=list)
    conditions: list = field(default_factory=list)
    trainer_status: Optional[TrainerStatus] = None
    command: tuple = ()


@dataclass
class Event:
    """An event of a TrainJob, shaped as Kubeflow's (a Kubernetes event)."""

    involved_object_kind: str
    involved_object_name: str
    message: str
    reason: str
    event_time: Optional[datetime]
    type: str = "Normal"  # trainlet: Normal or Warning
