"""`pip install ./python` works offline: no download, protobuf modules generated into the package.

A copy of python/ and proto/ is installed (pip builds in the tree it is given) into a venv made
with --system-site-packages (so Debian's python3-zmq and python3-protobuf satisfy the
dependencies) with PIP_NO_INDEX=1, so any download fails the test.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTO_DIR = os.path.join(os.path.dirname(PYTHON_DIR), "proto")


@unittest.skipIf(shutil.which("protoc") is None, "needs protoc")
class PipInstallTest(unittest.TestCase):
    def test_offline_install_imports_the_client_and_its_protos(self):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(PYTHON_DIR, os.path.join(tmp, "python"),
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
            shutil.copytree(PROTO_DIR, os.path.join(tmp, "proto"))
            venv = os.path.join(tmp, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            env.pop("PYTHONPATH", None)
            env.pop("TRAINLET_PROTO_DIR", None)
            r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "./python"],
                               cwd=tmp, env=env, capture_output=True, text=True, timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = subprocess.run(
                [os.path.join(venv, "bin", "python"), "-c",
                 "import trainlet, trainlet.v1.envelope_pb2 as e; from trainlet import TrainerClient;"
                 "print(e.__file__)"],
                cwd=tmp, env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(os.path.join("site-packages", "trainlet", "v1", "envelope_pb2.py"), r.stdout)


if __name__ == "__main__":
    unittest.main()
