"""pip install ./python: the trainlet SDK, with its protobuf modules generated at build time.

No pyproject.toml on purpose: with one, pip builds in an isolated environment and would download
setuptools; without, it uses the setuptools already installed (Debian's python3-setuptools), so
the install works offline. Dependencies are declared but expected from Debian (python3-zmq,
python3-protobuf; python3-tqdm and python3-yaml optional): in a venv made with
``--system-site-packages`` pip sees them installed and downloads nothing.

build_py runs ``protoc --python_out`` on ../proto/trainlet/v1/*.proto into the package
(trainlet/v1/). Without protoc it copies the modules a CMake build generated
($TRAINLET_PROTO_DIR, else ../build/python), and fails naming both when neither is there.
"""

import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "proto")


def _generated_elsewhere():
    for root in (os.environ.get("TRAINLET_PROTO_DIR", ""), os.path.join(HERE, "..", "build", "python")):
        if root and glob.glob(os.path.join(root, "trainlet", "v1", "*_pb2.py")):
            return os.path.join(root, "trainlet", "v1")
    return None


class BuildWithProtos(build_py):
    """build_py, then the generated trainlet/v1/*_pb2.py beside the package's modules."""

    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "trainlet", "v1")
        os.makedirs(out, exist_ok=True)
        protos = sorted(glob.glob(os.path.join(PROTO_ROOT, "trainlet", "v1", "*.proto")))
        protoc = shutil.which("protoc")
        if protos and protoc:
            subprocess.check_call(
                [protoc, f"--python_out={self.build_lib}", "-I", PROTO_ROOT] + protos
            )
            return
        generated = _generated_elsewhere()
        if generated is None:
            raise SystemExit(
                "trainlet: cannot make the protobuf modules: "
                + ("protoc is not installed (apt-get install protobuf-compiler)" if protos
                   else f"no .proto files under {PROTO_ROOT} (install from the source tree)")
                + ", and no CMake build generated them (cmake --build build --target "
                "trainlet_python_protos, or set TRAINLET_PROTO_DIR)"
            )
        for f in glob.glob(os.path.join(generated, "*_pb2.py")):
            shutil.copy(f, out)


setup(
    name="trainlet",
    version="0.1.0",
    description="Python SDK for trainlet (Kubeflow TrainerClient-shaped)",
    packages=["trainlet"],
    python_requires=">=3.9",
    install_requires=["pyzmq", "protobuf"],
    extras_require={"progress": ["tqdm"], "runtimes": ["PyYAML"]},
    cmdclass={"build_py": BuildWithProtos},
)
