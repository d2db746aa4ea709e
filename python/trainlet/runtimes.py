"""The runtimes list_runtimes and get_runtime show.

The operator API has no request that lists the coordinator's runtimes yet, so the SDK reads the
ClusterTrainingRuntimes trainlet ships, from the first of these folders that exists:

1. ``$TRAINLET_RUNTIMES_DIR``;
2. ``<dir of trainletctl on PATH>/../share/trainlet/runtimes`` (what ``trainletctl local up``
   gives its coordinator);
3. ``/usr/share/trainlet/runtimes`` (the .deb);
4. ``<source tree>/deploy/runtimes`` when the SDK runs from a checkout.

Runtimes applied later with ``trainletctl apply`` are not listed; train() still takes them by
name (``Runtime(name=...)`` or the name itself).
"""

import glob
import os
import shutil

from trainlet import types as t
from trainlet.errors import NotFoundError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_FRAMEWORKS = ("torch", "mpi", "jax", "xgboost", "flux")


def candidate_dirs():
    dirs = []
    env = os.environ.get("TRAINLET_RUNTIMES_DIR", "")
    if env:
        dirs.append(env)
    ctl = shutil.which("trainletctl")
    if ctl:
        dirs.append(
            os.path.join(os.path.dirname(os.path.realpath(ctl)), "..", "share", "trainlet", "runtimes")
        )
    dirs.append("/usr/share/trainlet/runtimes")
    dirs.append(os.path.join(os.path.dirname(os.path.dirname(_PACKAGE_DIR)), "deploy", "runtimes"))
    return [os.path.normpath(d) for d in dirs]


def runtimes_dir():
    for d in candidate_dirs():
        if glob.glob(os.path.join(d, "*.yaml")):
            return d
    return None


def _container_command(spec):
    """The command of the runtime's node container, if it gives one."""
    try:
        for job in spec["template"]["spec"]["replicatedJobs"]:
            containers = job["template"]["spec"]["template"]["spec"]["containers"]
            for c in containers:
                if c.get("command"):
                    return tuple(c["command"]) + tuple(c.get("args") or ())
    except (KeyError, TypeError):
        pass
    return ()


def runtime_of_document(doc):
    """A Runtime for one (Cluster)TrainingRuntime document, or None for anything else."""
    if not isinstance(doc, dict) or doc.get("kind") not in (
        "ClusterTrainingRuntime",
        "TrainingRuntime",
    ):
        return None
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    policy = spec.get("mlPolicy") or {}
    framework = (meta.get("labels") or {}).get("trainer.kubeflow.org/framework")
    if not framework:
        framework = next((f for f in _FRAMEWORKS if f in policy), "plain")
    trainer = t.RuntimeTrainer(
        trainer_type=t.TrainerType.CUSTOM_TRAINER,
        framework=framework,
        num_nodes=int(policy.get("numNodes") or 1),
        command=_container_command(spec),
    )
    return t.Runtime(name=meta.get("name", ""), trainer=trainer, kind=doc["kind"])


def list_runtimes():
    """The shipped runtimes, by name. Needs python3-yaml to read them."""
    d = runtimes_dir()
    if d is None:
        return []
    import yaml  # python3-yaml

    out = []
    for path in sorted(glob.glob(os.path.join(d, "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                r = runtime_of_document(doc)
                if r is not None and r.name:
                    out.append(r)
    return sorted(out, key=lambda r: r.name)


def get_runtime(name):
    for r in list_runtimes():
        if r.name == name:
            return r
    where = runtimes_dir() or " or ".join(candidate_dirs())
    raise NotFoundError(
        f"runtime {name!r} is not among the runtimes in {where}; a runtime applied with "
        f"trainletctl can still be used: train(runtime=Runtime(name={name!r}), ...)",
        "NotFound",
    )
