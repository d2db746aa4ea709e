"""The TrainJob manifest train() applies, and the program a CustomTrainer's ranks run."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from trainlet import (
    ActiveDeadlineSeconds,
    Annotations,
    CommandTrainer,
    CustomTrainer,
    Labels,
    Name,
    Runtime,
    TrainerArgs,
    TrainerCommand,
    TrainerEnv,
)
from trainlet import trainjob_spec as spec


def train_with_args(greeting, count=1):
    import os

    for _ in range(count):
        print(greeting, os.environ.get("RANK", "?"))


def train_no_args():
    print("no args")


def run_script(script, env=None, cwd=None):
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        cwd=cwd,
        timeout=120,
    )


class ManifestTest(unittest.TestCase):
    def test_custom_trainer_on_the_default_runtime(self):
        trainer = CustomTrainer(
            func=train_with_args,
            func_args={"greeting": "hello", "count": 2},
            num_nodes=2,
            num_proc_per_node=2,
            resources_per_node={"cpu": 2, "memory": "1Gi", "gpu": 1},
            env={"GLOO_SOCKET_IFNAME": "lo"},
        )
        job = spec.build_trainjob(trainer=trainer)
        self.assertEqual(job["apiVersion"], "trainer.kubeflow.org/v1alpha1")
        self.assertEqual(job["kind"], "TrainJob")
        self.assertRegex(job["metadata"]["name"], r"^[a-z][0-9a-f]{11}$")
        self.assertEqual(job["spec"]["runtimeRef"], {"name": "torch-distributed"})
        t = job["spec"]["trainer"]
        self.assertEqual(t["command"][:2], ["/usr/bin/python3", "-c"])
        self.assertEqual(t["numNodes"], 2)
        self.assertEqual(t["numProcPerNode"], 2)
        self.assertEqual(t["resourcesPerNode"]["limits"], {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"})
        self.assertEqual(t["resourcesPerNode"]["requests"], t["resourcesPerNode"]["limits"])
        self.assertIn({"name": "GLOO_SOCKET_IFNAME", "value": "lo"}, t["env"])
        self.assertIn({"name": "PYTHONUNBUFFERED", "value": "1"}, t["env"])
        # What is applied is JSON (which is YAML) and says the same.
        self.assertEqual(json.loads(spec.to_apply_text(job)), job)

    def test_the_script_runs_the_function_with_its_args(self):
        script = spec.custom_trainer_script(
            CustomTrainer(func=train_with_args, func_args={"greeting": "héllo", "count": 2})
        )
        self.assertIn("def train_with_args(greeting, count=1):", script)
        r = run_script(script, {"RANK": "3"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "héllo 3\nhéllo 3\n")
        r = run_script(spec.custom_trainer_script(CustomTrainer(func=train_no_args)))
        self.assertEqual(r.stdout, "no args\n")

    def test_nested_functions_are_dedented(self):
        def inner():
            print("inner ran")

        r = run_script(spec.custom_trainer_script(CustomTrainer(func=inner)))
        self.assertEqual((r.returncode, r.stdout), (0, "inner ran\n"), r.stderr)

    def test_a_raising_function_exits_non_zero_with_its_traceback(self):
        def boom():
            raise ValueError("boom from the rank")

        r = run_script(spec.custom_trainer_script(CustomTrainer(func=boom)))
        self.assertEqual(r.returncode, 1)
        self.assertIn("ValueError: boom from the rank", r.stderr)

    def test_packages_that_pip_cannot_install_fail_the_rank_clearly(self):
        script = spec.custom_trainer_script(
            CustomTrainer(func=train_no_args, packages_to_install=["trainlet-no-such-package"])
        )
        with tempfile.TemporaryDirectory() as cwd:
            env = {"PIP_NO_INDEX": "1", "TRAINLET_LOCAL_RANK": "0", "TRAINLET_JOB": "j"}
            r = run_script(script, env, cwd)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("trainlet: pip could not install trainlet-no-such-package", r.stderr)
            self.assertNotIn("no args", r.stdout)
            # Another rank of the node waits for local rank 0's verdict and fails the same way.
            r2 = run_script(script, dict(env, TRAINLET_LOCAL_RANK="1"), cwd)
            self.assertEqual(r2.returncode, r.returncode)
            self.assertIn("pip could not install", r2.stderr)
            self.assertNotIn("installing", r2.stderr)

    def test_arguments_trainlet_cannot_do_are_refused_before_anything_is_sent(self):
        with self.assertRaisesRegex(ValueError, "initializer"):
            spec.build_trainjob(trainer=CustomTrainer(func=train_no_args), initializer=object())
        with self.assertRaisesRegex(ValueError, "lambda"):
            spec.build_trainjob(trainer=CustomTrainer(func=lambda: None))
        with self.assertRaisesRegex(ValueError, "JSON"):
            spec.custom_trainer_script(CustomTrainer(func=train_with_args, func_args={"greeting": object()}))
        with self.assertRaisesRegex(ValueError, "num_nodes"):
            spec.build_trainjob(trainer=CommandTrainer(command=["true"], num_nodes=0))
        with self.assertRaisesRegex(ValueError, "CustomTrainer or a CommandTrainer"):
            spec.build_trainjob(trainer="python3 train.py")
        with self.assertRaisesRegex(ValueError, "TrainerCommand cannot be used with CustomTrainer"):
            spec.build_trainjob(trainer=CustomTrainer(func=train_no_args), options=[TrainerCommand(["x"])])
        with self.assertRaises(ValueError):
            ActiveDeadlineSeconds(0)


class OptionsTest(unittest.TestCase):
    def test_command_trainer_with_options(self):
        job = spec.build_trainjob(
            runtime=Runtime(name="plain"),
            trainer=CommandTrainer(command=["/bin/sh", "-c"], args=["echo hi"], num_nodes=1, env={"A": "1"}),
            options=[
                Name("my-job"),
                Labels({"team": "a"}),
                Annotations({"trainlet.io/max-restarts": "2"}),
                TrainerEnv({"A": "2", "B": 3}),
                TrainerArgs(["echo bye"]),
                ActiveDeadlineSeconds(60),
            ],
        )
        self.assertEqual(job["metadata"], {
            "name": "my-job",
            "labels": {"team": "a"},
            "annotations": {"trainlet.io/max-restarts": "2"},
        })
        self.assertEqual(job["spec"]["runtimeRef"], {"name": "plain"})
        t = job["spec"]["trainer"]
        self.assertEqual(t["command"], ["/bin/sh", "-c"])
        self.assertEqual(t["args"], ["echo bye"])
        self.assertEqual(t["env"], [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}])
        self.assertEqual(job["spec"]["activeDeadlineSeconds"], 60)

    def test_runtime_by_name_and_namespaced_kind(self):
        job = spec.build_trainjob(runtime="mpi-distributed")
        self.assertEqual(job["spec"]["runtimeRef"], {"name": "mpi-distributed"})
        self.assertNotIn("trainer", job["spec"])
        job = spec.build_trainjob(runtime=Runtime(name="mine", kind="TrainingRuntime"))
        self.assertEqual(job["spec"]["runtimeRef"], {"name": "mine", "kind": "TrainingRuntime"})


if __name__ == "__main__":
    unittest.main()
