"""The TrainJob manifest train() applies, built from a trainer, a runtime and options.

The manifest is a ``trainer.kubeflow.org/v1alpha1`` TrainJob as a dict, sent to the coordinator
as JSON (JSON is YAML, and ``apply`` takes YAML), so the coordinator validates it exactly as it
validates ``trainletctl apply -f``.

A CustomTrainer becomes ``command: [<python>, -c, <script>]``: the script is the function's
source (inspect.getsource, dedented), then a call of it with ``func_args`` decoded from JSON.
On torch-distributed that command is not torchrun, so the agents start it numProcPerNode times
per node with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (docs/runtimes.md).
"""

import inspect
import json
import random
import string
import textwrap
import uuid

from trainlet.types import DEFAULT_RUNTIME, CommandTrainer, CustomTrainer, Runtime

API_VERSION = "trainer.kubeflow.org/v1alpha1"
# One argv string is at most MAX_ARG_STRLEN (128 KiB) on Linux; keep well under it.
MAX_SCRIPT_BYTES = 100 * 1024

# Installs CustomTrainer.packages_to_install before the function runs. Local rank 0 of each node
# runs pip; the node's other ranks wait for its verdict in a marker file in the job's working
# directory (shared by the node's ranks), so pip never runs twice at once on one node.
_PIP_PRELUDE = '''
def _trainlet_install_packages(packages, index_urls):
    import os, subprocess, sys, time
    tag = os.environ.get("TRAINLET_JOB", "job") + "-" + os.environ.get("TRAINLET_ATTEMPT", "0")
    done = ".trainlet-packages-" + tag
    if os.environ.get("TRAINLET_LOCAL_RANK", os.environ.get("LOCAL_RANK", "0")) == "0":
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-warn-script-location"]
        if sys.prefix == sys.base_prefix:
            cmd.append("--user")
        for i, url in enumerate(index_urls):
            cmd += ["--index-url" if i == 0 else "--extra-index-url", url]
        cmd += list(packages)
        print("trainlet: installing " + " ".join(packages) + ": " + " ".join(cmd),
              file=sys.stderr, flush=True)
        rc = subprocess.call(cmd)
        with open(done + ".tmp", "w") as f:
            f.write(str(rc))
        os.replace(done + ".tmp", done)
    else:
        deadline = time.monotonic() + 1800
        while not os.path.exists(done):
            if time.monotonic() > deadline:
                print("trainlet: local rank 0 did not finish installing packages in 30 min",
                      file=sys.stderr, flush=True)
                sys.exit(1)
            time.sleep(0.5)
        with open(done) as f:
            rc = int(f.read().strip() or "1")
    if rc != 0:
        print("trainlet: pip could not install " + ", ".join(packages) + " (pip exited " +
              str(rc) + "; its output is in local rank 0's log). pip needs a package index it "
              "can reach (pip_index_urls) and an environment it may install into (Debian's "
              "python refuses outside a venv: PEP 668). Install them on the nodes instead, "
              "e.g. with apt-get install python3-<name>.", file=sys.stderr, flush=True)
        sys.exit(rc)


'''


def random_job_name():
    """A name as Kubeflow's SDK makes one: a lowercase letter and 11 hex digits."""
    return random.choice(string.ascii_lowercase) + uuid.uuid4().hex[:11]


def function_source(func):
    """The dedented source of ``func``; ValueError when it has none or is a lambda."""
    if not callable(func) or not hasattr(func, "__code__"):
        raise ValueError(f"CustomTrainer.func must be a Python function, got {func!r}")
    if func.__name__ == "<lambda>":
        raise ValueError("CustomTrainer.func cannot be a lambda: give it a def with a name")
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError) as e:
        raise ValueError(
            f"cannot read the source of {func.__name__}: {e} (define it in a file or a "
            "notebook cell)"
        ) from e
    return textwrap.dedent(source)


def custom_trainer_script(trainer):
    """The Python program every rank runs for a CustomTrainer."""
    name = trainer.func.__name__
    parts = [f"# trainlet CustomTrainer: runs {name}() on every rank\n"]
    if trainer.packages_to_install:
        packages = [str(p) for p in trainer.packages_to_install]
        urls = [str(u) for u in (trainer.pip_index_urls or [])]
        parts.append(_PIP_PRELUDE)
        parts.append(f"_trainlet_install_packages({packages!r}, {urls!r})\n\n")
    parts.append(function_source(trainer.func))
    parts.append("\n")
    if trainer.func_args:
        try:
            encoded = json.dumps(trainer.func_args)
        except (TypeError, ValueError) as e:
            raise ValueError(f"CustomTrainer.func_args must be JSON-serialisable: {e}") from e
        parts.append("import json as _trainlet_json\n")
        parts.append(f"{name}(**_trainlet_json.loads({encoded!r}))\n")
    else:
        parts.append(f"{name}()\n")
    script = "".join(parts)
    if len(script.encode()) > MAX_SCRIPT_BYTES:
        raise ValueError(
            f"the source of {name} is {len(script.encode())} bytes; at most {MAX_SCRIPT_BYTES} "
            "fit in a command line: move most of it into a module the nodes can import"
        )
    return script


def resources_per_node(resources):
    """Kubeflow's resources_per_node shorthand ({"cpu": 4, "memory": "8Gi", "gpu": 1}) as the
    TrainJob's resourcesPerNode (requests and limits alike; "gpu" means nvidia.com/gpu)."""
    quantities = {}
    for key, value in resources.items():
        k = "nvidia.com/gpu" if str(key).lower() == "gpu" else str(key)
        quantities[k] = str(value)
    return {"requests": dict(quantities), "limits": dict(quantities)}


def _env_list(env):
    return [{"name": str(k), "value": str(v)} for k, v in env.items()]


def trainer_spec(trainer):
    """spec.trainer for a CustomTrainer or CommandTrainer."""
    spec = {}
    if isinstance(trainer, CustomTrainer):
        spec["command"] = [trainer.python, "-c", custom_trainer_script(trainer)]
        # Output as it happens: the rank's log is read while the job runs.
        env = {"PYTHONUNBUFFERED": "1"}
        env.update(trainer.env or {})
    elif isinstance(trainer, CommandTrainer):
        if not trainer.command:
            raise ValueError("CommandTrainer.command must name a program")
        spec["command"] = [str(c) for c in trainer.command]
        if trainer.args:
            spec["args"] = [str(a) for a in trainer.args]
        env = dict(trainer.env or {})
    else:
        raise ValueError(
            f"trainer must be a CustomTrainer or a CommandTrainer, got {type(trainer).__name__}"
        )
    if trainer.num_nodes is not None:
        if int(trainer.num_nodes) < 1:
            raise ValueError(f"num_nodes must be at least 1, got {trainer.num_nodes}")
        spec["numNodes"] = int(trainer.num_nodes)
    if trainer.num_proc_per_node is not None:
        spec["numProcPerNode"] = trainer.num_proc_per_node
    if trainer.resources_per_node:
        spec["resourcesPerNode"] = resources_per_node(trainer.resources_per_node)
    if env:
        spec["env"] = _env_list(env)
    return spec


def build_trainjob(runtime=None, trainer=None, initializer=None, options=None):
    """The TrainJob manifest (a dict) for train(). ValueError for arguments trainlet cannot do."""
    if initializer is not None:
        raise ValueError(
            "initializer: trainlet has no dataset or model initializers (no pods to run them "
            "in); fetch the data inside the training function instead"
        )
    if runtime is None:
        runtime = Runtime(name=DEFAULT_RUNTIME)
    elif isinstance(runtime, str):
        runtime = Runtime(name=runtime)
    ref = {"name": runtime.name}
    if getattr(runtime, "kind", "ClusterTrainingRuntime") != "ClusterTrainingRuntime":
        ref["kind"] = runtime.kind
    job = {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": random_job_name()},
        "spec": {"runtimeRef": ref},
    }
    if trainer is not None:
        job["spec"]["trainer"] = trainer_spec(trainer)
    for option in options or []:
        if not callable(option):
            raise ValueError(f"options: {option!r} is not an option (see trainlet.options)")
        option(job, trainer)
    return job


def to_apply_text(job):
    """The manifest as the text ``apply`` takes: JSON, which is YAML."""
    return json.dumps(job, ensure_ascii=False, indent=1)
