"""Where the SDK finds its coordinator and keys: the same TRAINLET_HOME as trainletctl.

The home is the ``home`` argument if given, else ``$TRAINLET_HOME``, else ``~/.trainlet``
(cli/trainletctl/client_config.cpp). It holds ``config.yaml``::

    coordinator: tcp://127.0.0.1:7071          # the coordinator's operator endpoint
    coordinator_key: keys/coordinator.key.pub  # the coordinator's public key
    key: keys/operator.key                     # this operator's key pair

Relative key paths are relative to the home. Key files are ZeroMQ Z85 text, as
common/curve_keys.h writes them::

    public-key = "<40 chars>"
    secret-key = "<40 chars>"     (absent in a .pub file)
"""

import os
from dataclasses import dataclass

from trainlet.errors import ConfigError

_Z85_CHARS = set(
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)


@dataclass(frozen=True)
class ClientConfig:
    """What a TRAINLET_HOME says: the endpoint and the paths of both keys (absolute)."""

    home: str
    coordinator: str
    coordinator_key_file: str
    key_file: str


@dataclass(frozen=True)
class CurveKeyPair:
    public_z85: str
    secret_z85: str  # "" when the file holds only the public half


def resolve_home(home=None):
    """``home`` if given, else $TRAINLET_HOME, else ~/.trainlet; absolute and normalised."""
    if home:
        return os.path.normpath(os.path.abspath(os.path.expanduser(home)))
    env = os.environ.get("TRAINLET_HOME", "")
    if env:
        return os.path.normpath(os.path.abspath(env))
    return os.path.join(os.environ.get("HOME", "/root"), ".trainlet")


def _unquote(value):
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _parse_flat_yaml(text, path):
    """The flat ``key: value`` map trainletctl writes; comments and blank lines skipped.
    PyYAML is used when present (a hand-edited file may use more of YAML)."""
    try:
        import yaml  # python3-yaml; optional
    except ImportError:
        yaml = None
    if yaml is not None:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: {e}") from e
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a map of coordinator, coordinator_key and key")
        return {str(k): ("" if v is None else str(v)) for k, v in data.items()}
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if ":" not in stripped:
            raise ConfigError(f"{path}:{n}: expected `key: value`")
        key, _, value = stripped.partition(":")
        if " #" in value:
            value = value.split(" #", 1)[0]
        out[key.strip()] = _unquote(value)
    return out


def load_client_config(home=None):
    """Reads ``<home>/config.yaml``. Raises ConfigError naming the file and the field."""
    home = resolve_home(home)
    path = os.path.join(home, "config.yaml")
    if not os.path.exists(path):
        raise ConfigError(
            f"no client configuration at {path}: start a local cluster (trainletctl local up) "
            "or set TRAINLET_HOME (or TrainerClient(home=...)) to a directory holding config.yaml"
        )
    try:
        with open(path, encoding="utf-8") as f:
            fields = _parse_flat_yaml(f.read(), path)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from e
    values = {}
    for key in ("coordinator", "coordinator_key", "key"):
        if not fields.get(key):
            raise ConfigError(f"{path}: {key}: required string field missing")
        values[key] = fields[key]

    def rel(p):
        return p if os.path.isabs(p) else os.path.join(home, p)

    return ClientConfig(
        home=home,
        coordinator=values["coordinator"],
        coordinator_key_file=rel(values["coordinator_key"]),
        key_file=rel(values["key"]),
    )


def is_valid_z85_key(key):
    return len(key) == 40 and all(c in _Z85_CHARS for c in key)


def _value_of(line, name):
    """``name = "value"`` -> value; "" when the line is not of that form for ``name``."""
    t = line.strip()
    if not t.startswith(name):
        return ""
    rest = t[len(name):].strip()
    if not rest.startswith("="):
        return ""
    return _unquote(rest[1:])


def read_key_pair(path):
    """Reads a key file (or its .pub). Raises ConfigError naming the file and the problem."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ConfigError(f"cannot read key file {path}: {e.strerror}") from e
    public = secret = ""
    for line in lines:
        public = _value_of(line, "public-key") or public
        secret = _value_of(line, "secret-key") or secret
    if not is_valid_z85_key(public):
        raise ConfigError(f"key file {path}: public-key is missing or not a 40-character Z85 key")
    if secret and not is_valid_z85_key(secret):
        raise ConfigError(f"key file {path}: secret-key is not a 40-character Z85 key")
    return CurveKeyPair(public, secret)
