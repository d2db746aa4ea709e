"""The runtimes list_runtimes and get_runtime show: the coordinator's own, shipped and applied
(GetRuntimesRequest in proto/trainlet/v1/operator.proto; `trainletctl get
clustertrainingruntimes` shows the same). This module only turns the coordinator's answer into
the SDK's ``Runtime``.
"""

from trainlet import types as t


def runtime_of_info(info):
    """A Runtime for one RuntimeInfo of the coordinator's RuntimeList."""
    trainer = t.RuntimeTrainer(
        trainer_type=t.TrainerType.CUSTOM_TRAINER,
        framework=info.framework or "plain",
        num_nodes=int(info.num_nodes or 1),
        command=tuple(info.command),
    )
    return t.Runtime(name=info.name, trainer=trainer, kind=info.kind, namespace=info.namespace)


def runtimes_request(operator_pb2, name="", namespace="default"):
    """The OperatorRequest for the runtimes of ``namespace`` (None: every namespace), or for the
    one called ``name``."""
    req = operator_pb2.OperatorRequest()
    get = req.get_runtimes
    get.name = name
    if namespace is None:
        get.all_namespaces = True
    else:
        get.namespace = namespace
    return req
