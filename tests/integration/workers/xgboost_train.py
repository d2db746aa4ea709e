"""A real distributed XGBoost (1.7, Debian's python3-xgboost) training run, for the tests.

    xgboost_train.py dmlc        a TrainJob on xgboost-distributed: rabit reads trainlet's
                                 DMLC_TRACKER_URI, DMLC_TRACKER_PORT and DMLC_TASK_ID itself;
                                 DMLC_NUM_WORKER sizes the tracker
    xgboost_train.py xgboostjob  a kubeflow.org/v1 XGBoostJob: the Training Operator's MASTER_ADDR,
                                 MASTER_PORT, RANK and WORLD_SIZE, passed to rabit as its
                                 DMLC_* arguments, as Kubeflow's XGBoostJob examples do

Task 0 hosts the rabit tracker on the tracker address and port it was given (the port its node's
agent reserved), as Kubeflow's xgboost runtime expects, then joins as a worker. Every worker
trains a few rounds on its own rows of one synthetic dataset (rows rank, rank + n, ...), so the
trees can only come out the same on every worker if the histograms really were allreduced.
Each worker saves its model (JSON) as $TRAINLET_WORK_DIR/xgboost-model-<rank>.json and prints
"xgboost rank R of N: ... model sha256 H" (rank as the tracker assigned it), then, after the
communicator is finalized, the hash of a model trained on its own rows alone ("alone sha256 L"),
which a test can tell apart from H. The whole run is bounded by an alarm, so a lost peer fails it
instead of hanging.
"""
import hashlib
import os
import signal
import sys
import time

import numpy as np
import xgboost
from xgboost import collective
from xgboost.tracker import RabitTracker

ROUNDS = 5


def contract(mode):
    """(tracker host, tracker port, world size, task id, rabit args) from the env as given."""
    env = os.environ
    if mode == "dmlc":
        # rabit reads these from the env itself: no arguments.
        return (env["DMLC_TRACKER_URI"], int(env["DMLC_TRACKER_PORT"]),
                int(env["DMLC_NUM_WORKER"]), int(env["DMLC_TASK_ID"]), {})
    if mode == "xgboostjob":
        host, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
        world, rank = int(env["WORLD_SIZE"]), int(env["RANK"])
        return (host, port, world, rank, {"DMLC_TRACKER_URI": host, "DMLC_TRACKER_PORT": port,
                                          "DMLC_TASK_ID": str(rank)})
    raise SystemExit(f"unknown mode {mode!r}")


def start_tracker(host, port, world):
    # The agent may still be handing its reserved port over when the rank starts.
    deadline = time.time() + 5
    while True:
        try:
            tracker = RabitTracker(host_ip=host, n_workers=world, port=port, sortby="task")
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    tracker.start(world)
    return tracker


def dataset():
    rng = np.random.RandomState(7)
    x = rng.rand(400, 6)
    y = (x[:, 0] + 0.5 * x[:, 1] - x[:, 2] + 0.1 * rng.rand(400) > 0.25).astype(np.float32)
    return x, y


def train(x, y):
    params = {"objective": "binary:logistic", "tree_method": "hist", "max_depth": 3, "eta": 0.3,
              "seed": 1, "nthread": 1}
    return xgboost.train(params, xgboost.DMatrix(x, label=y), num_boost_round=ROUNDS)


def main():
    signal.alarm(90)
    # rabit tries the tracker 5 times by default, sleeping 1, 2, 3 and 4 s between tries: on a
    # busy machine task 0 may take longer than that to import xgboost and start the tracker.
    os.environ.setdefault("DMLC_WORKER_CONNECT_RETRY", "10")
    host, port, world, task, args = contract(sys.argv[1])
    tracker = start_tracker(host, port, world) if task == 0 else None
    with collective.CommunicatorContext(**args):
        rank, n = collective.get_rank(), collective.get_world_size()
        if n != world or rank != task:
            raise SystemExit(f"task {task} of {world} became rank {rank} of {n}")
        x, y = dataset()
        mine = np.arange(rank, len(y), n)
        booster = train(x[mine], y[mine])
        model = bytes(booster.save_raw("json"))
        path = os.path.join(os.environ["TRAINLET_WORK_DIR"], f"xgboost-model-{rank}.json")
        with open(path, "wb") as f:
            f.write(model)
        print(f"xgboost rank {rank} of {n}: trained {booster.num_boosted_rounds()} rounds on "
              f"{len(mine)} rows, model sha256 {hashlib.sha256(model).hexdigest()}", flush=True)
    if tracker is not None:
        tracker.join()  # every worker has said shutdown to the tracker
    alone = bytes(train(x[mine], y[mine]).save_raw("json"))
    print(f"xgboost rank {rank}: alone sha256 {hashlib.sha256(alone).hexdigest()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
