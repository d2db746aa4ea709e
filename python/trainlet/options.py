"""Options for train(), named as Kubeflow's ``kubeflow.trainer.options``.

Each option is a callable that edits the TrainJob manifest (a dict) before it is applied:
``option(job_spec, trainer)``. Options that Kubeflow restricts to one trainer type check it.
"""

from dataclasses import dataclass
from typing import Any

from trainlet.types import CustomTrainer


@dataclass
class Name:
    """The TrainJob's name (.metadata.name); without it train() makes a random one."""

    name: str

    def __call__(self, job_spec: dict, trainer: Any = None) -> None:
        job_spec.setdefault("metadata", {})["name"] = self.name


@dataclass
class Labels:
    """Labels on the TrainJob (.metadata.labels)."""

    labels: dict

    def __call__(self, job_spec: dict, trainer: Any = None) -> None:
        job_spec.setdefault("metadata", {}).setdefault("labels", {}).update(self.labels)


@dataclass
class Annotations:
    """Annotations on the TrainJob (.metadata.annotations), e.g.
    ``{"trainlet.io/max-restarts": "2"}``."""

    annotations: dict

    def __call__(self, job_spec: dict, trainer: Any = None) -> None:
        job_spec.setdefault("metadata", {}).setdefault("annotations", {}).update(self.annotations)


@dataclass
class TrainerEnv:
    """Environment variables of every rank (.spec.trainer.env), on top of the trainer's env."""

    env: dict

    def __call__(self, job_spec: dict, trainer: Any = None) -> None:
        entries = job_spec.setdefault("spec", {}).setdefault("trainer", {}).setdefault("env", [])
        names = {e["name"]: i for i, e in enumerate(entries)}
        for k, v in self.env.items():
            entry = {"name": str(k), "value": str(v)}
            if k in names:
                entries[names[k]] = entry
            else:
                entries.append(entry)


@dataclass
class TrainerCommand:
    """The trainer's command (.spec.trainer.command). Not with a CustomTrainer, whose command
    runs the function (as in Kubeflow)."""

    command: list

    def __call__(self, job_spec: dict, trainer: Any = None) -> None:
        if isinstance(trainer, CustomTrainer):
            raise ValueError(
                "TrainerCommand cannot be used with CustomTrainer: its command runs the function"
            )
        job_spec.setdefault("spec", {}).setdefault("trainer", {})["command"] = list(self.command)


@dataclass
class TrainerArgs:
    """The trainer's args (.spec.trainer.args). Not with a CustomTrainer."""

    args: list

    def __call__(self, job_spec: dict, trainer: Any = None) -> None:
        if isinstance(trainer, CustomTrainer):
            raise ValueError(
                "TrainerArgs cannot be used with CustomTrainer: its command runs the function"
            )
        job_spec.setdefault("spec", {}).setdefault("trainer", {})["args"] = list(self.args)


@dataclass
class ActiveDeadlineSeconds:
    """.spec.activeDeadlineSeconds (trainlet counts it from the job's creation; README)."""

    seconds: int

    def __post_init__(self):
        if type(self.seconds) is not int or self.seconds < 1:
            raise ValueError("activeDeadlineSeconds must be a positive integer (minimum 1)")

    def __call__(self, job_spec: dict, trainer: Any = None) -> None:
        job_spec.setdefault("spec", {})["activeDeadlineSeconds"] = self.seconds


__all__ = [
    "Name",
    "Labels",
    "Annotations",
    "TrainerEnv",
    "TrainerCommand",
    "TrainerArgs",
    "ActiveDeadlineSeconds",
]
