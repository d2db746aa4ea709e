"""The SDK's exceptions.

As in Kubeflow's SDK, a request the coordinator refused or could not do raises RuntimeError
(here ``TrainletError`` and its subclasses, all RuntimeErrors), carrying the coordinator's own
message; a coordinator that does not answer in time raises TimeoutError; bad arguments raise
ValueError before anything is sent.
"""


class TrainletError(RuntimeError):
    """The coordinator answered with an error. ``code`` is its error_code (NotFound, Invalid,
    AlreadyExists, Unavailable, PermissionDenied, Internal), "" when none was given."""

    def __init__(self, message, code=""):
        super().__init__(message)
        self.code = code


class NotFoundError(TrainletError):
    """The job (or rank, or attempt) named does not exist."""


class PermissionDeniedError(TrainletError):
    """The coordinator refused this operator key, or the CURVE handshake failed."""


class ConfigError(TrainletError):
    """TRAINLET_HOME's config.yaml or a key file is missing or malformed."""


class ProtocolError(TrainletError):
    """The coordinator answered something that is not a valid operator response."""


def from_code(message, code):
    """The exception for an OperatorResponse's error and error_code."""
    if code == "NotFound":
        return NotFoundError(message, code)
    if code == "PermissionDenied":
        return PermissionDeniedError(message, code)
    return TrainletError(message, code)
