"""Where the generated protobuf modules (trainlet/v1/*_pb2.py) come from.

protoc names each generated module after its .proto path, so proto/trainlet/v1/envelope.proto
becomes the module ``trainlet.v1.envelope_pb2``, which imports its siblings as
``from trainlet.v1 import node_pb2``. They therefore live in this package's ``v1`` subpackage.
They are generated, never committed, and found in this order:

1. ``$TRAINLET_PROTO_DIR/trainlet/v1/``: a folder holding ``trainlet/v1/*_pb2.py`` (ctest sets it
   to ``<build>/python``, where the CMake build generates them);
2. inside the package itself (``trainlet/v1/``): what the .deb, ``cmake --install`` and
   ``pip install ./python`` lay down;
3. ``<source tree>/build/python/trainlet/v1/``, when this package is imported from a source
   checkout (``PYTHONPATH=python``) built into ``build/``.

The first folder found is put first in ``trainlet.__path__``, so ``import trainlet.v1.x_pb2``
resolves there. Only this module touches the search; nothing else needs to know.
"""

import os

_MARKER = os.path.join("trainlet", "v1", "envelope_pb2.py")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def candidate_roots():
    """Folders that may hold trainlet/v1/*_pb2.py, in the order they are tried."""
    roots = []
    env = os.environ.get("TRAINLET_PROTO_DIR", "")
    if env:
        roots.append(os.path.abspath(env))
    roots.append(os.path.dirname(_PACKAGE_DIR))  # the package's own v1/
    source_root = os.path.dirname(os.path.dirname(_PACKAGE_DIR))  # python/trainlet -> repo
    roots.append(os.path.join(source_root, "build", "python"))
    return roots


def find_proto_root():
    """The first candidate folder that holds the generated modules, or None."""
    for root in candidate_roots():
        if os.path.isfile(os.path.join(root, _MARKER)):
            return root
    return None


def install_path(package_path):
    """Makes ``trainlet.v1`` importable from the generated modules' folder.

    ``package_path`` is ``trainlet.__path__``; the folder's ``trainlet`` directory is put first
    in it (so the order above holds even when the package has a v1/ of its own) unless it is
    already there. Returns the folder used, or None when none was found (then importing
    ``trainlet.v1`` fails with the message of ``missing_message()``).
    """
    root = find_proto_root()
    if root is None:
        return None
    pkg = os.path.join(root, "trainlet")
    if os.path.abspath(pkg) not in [os.path.abspath(p) for p in package_path]:
        package_path.insert(0, pkg)
    return root


def missing_message():
    tried = ", ".join(os.path.join(r, "trainlet", "v1") for r in candidate_roots())
    return (
        "trainlet's generated protobuf modules (trainlet/v1/*_pb2.py) were not found; looked "
        "in " + tried + ". Build them with `cmake --build build --target trainlet_python_protos`"
        " (or set TRAINLET_PROTO_DIR to the folder holding trainlet/v1/), or install the "
        "package with `pip install ./python`, which runs protoc."
    )


def load():
    """Imports and returns (envelope_pb2, operator_pb2, progress_pb2), or raises ImportError
    with a message saying where the modules were looked for."""
    try:
        from trainlet.v1 import envelope_pb2, operator_pb2, progress_pb2  # noqa: WPS433
    except ImportError as e:
        raise ImportError(missing_message() + " (" + str(e) + ")") from e
    return envelope_pb2, operator_pb2, progress_pb2
