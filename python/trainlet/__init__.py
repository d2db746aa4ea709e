"""trainlet's Python SDK, shaped as Kubeflow's ``kubeflow.trainer``.

    from trainlet import TrainerClient, CustomTrainer

    def train_fn():
        import torch.distributed as dist
        dist.init_process_group("gloo")
        ...

    client = TrainerClient()                       # reads TRAINLET_HOME, as trainletctl
    name = client.train(trainer=CustomTrainer(func=train_fn, num_nodes=2))
    client.wait_for_job_status(name)
    print("\\n".join(client.get_job_logs(name)))

See python/README.md. The client needs python3-zmq and python3-protobuf;
``update_trainjob_status`` (called inside a rank) needs only the standard library.
"""

from trainlet import _protos

# trainlet.v1 (the generated protobuf modules) may live outside this folder: _protos.py says
# where it is looked for.
_protos.install_path(__path__)

from trainlet.errors import (  # noqa: E402
    ConfigError,
    NotFoundError,
    PermissionDeniedError,
    TrainletError,
)
from trainlet.options import (  # noqa: E402
    ActiveDeadlineSeconds,
    Annotations,
    Labels,
    Name,
    TrainerArgs,
    TrainerCommand,
    TrainerEnv,
)
from trainlet.progress import update_trainjob_status  # noqa: E402
from trainlet.types import (  # noqa: E402
    CommandTrainer,
    Condition,
    CustomTrainer,
    Event,
    Metric,
    Rank,
    Runtime,
    RuntimeTrainer,
    Step,
    TrainerStatus,
    TrainerType,
    TrainJob,
)

__version__ = "0.1.0"


def __getattr__(name):
    # TrainerClient imports zmq and the protobuf modules: only when it is asked for, so that
    # update_trainjob_status works in a rank whose Python has neither.
    if name == "TrainerClient":
        from trainlet.client import TrainerClient

        return TrainerClient
    raise AttributeError(f"module 'trainlet' has no attribute {name!r}")


__all__ = [
    "TrainerClient",
    "CustomTrainer",
    "CommandTrainer",
    "Runtime",
    "RuntimeTrainer",
    "TrainerType",
    "TrainJob",
    "Step",
    "Rank",
    "TrainerStatus",
    "Metric",
    "Condition",
    "Event",
    "Name",
    "Labels",
    "Annotations",
    "TrainerEnv",
    "TrainerCommand",
    "TrainerArgs",
    "ActiveDeadlineSeconds",
    "update_trainjob_status",
    "TrainletError",
    "NotFoundError",
    "PermissionDeniedError",
    "ConfigError",
]
