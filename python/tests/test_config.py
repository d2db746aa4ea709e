"""TRAINLET_HOME, config.yaml and key files, read as trainletctl reads them."""

import os
import tempfile
import unittest
from unittest import mock

import zmq

from trainlet import config
from trainlet.errors import ConfigError


class ResolveHomeTest(unittest.TestCase):
    def test_argument_then_env_then_default(self):
        with mock.patch.dict(os.environ, {"TRAINLET_HOME": "/tmp/from-env", "HOME": "/home/u"}):
            self.assertEqual(config.resolve_home("/tmp/x/../given"), "/tmp/given")
            self.assertEqual(config.resolve_home(), "/tmp/from-env")
        with mock.patch.dict(os.environ, {"TRAINLET_HOME": "", "HOME": "/home/u"}):
            self.assertEqual(config.resolve_home(), "/home/u/.trainlet")


class ClientConfigTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.home = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def write(self, text):
        with open(os.path.join(self.home, "config.yaml"), "w") as f:
            f.write(text)

    def test_relative_key_paths_are_relative_to_home(self):
        self.write(
            "# trainletctl client configuration\ncoordinator: tcp://127.0.0.1:7071\n"
            "coordinator_key: keys/coordinator.key.pub\nkey: /abs/op.key\n"
        )
        c = config.load_client_config(self.home)
        self.assertEqual(c.coordinator, "tcp://127.0.0.1:7071")
        self.assertEqual(c.coordinator_key_file, os.path.join(self.home, "keys/coordinator.key.pub"))
        self.assertEqual(c.key_file, "/abs/op.key")

    def test_missing_file_says_how_to_get_one(self):
        with self.assertRaises(ConfigError) as e:
            config.load_client_config(self.home)
        self.assertIn("trainletctl local up", str(e.exception))
        self.assertIn(os.path.join(self.home, "config.yaml"), str(e.exception))

    def test_missing_field_is_named(self):
        self.write("coordinator: tcp://127.0.0.1:7071\nkey: k\n")
        with self.assertRaisesRegex(ConfigError, "coordinator_key: required"):
            config.load_client_config(self.home)

    def test_flat_parser_without_yaml(self):
        with mock.patch.dict("sys.modules", {"yaml": None}):
            fields = config._parse_flat_yaml('# c\na: "tcp://x:1"\nb: c  # comment\n', "f")
        self.assertEqual(fields, {"a": "tcp://x:1", "b": "c"})


class KeyFileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def path(self, text):
        p = os.path.join(self.dir.name, "k")
        with open(p, "w") as f:
            f.write(text)
        return p

    def test_reads_both_halves(self):
        pub, sec = zmq.curve_keypair()
        k = config.read_key_pair(
            self.path(f'# c\npublic-key = "{pub.decode()}"\nsecret-key = "{sec.decode()}"\n')
        )
        self.assertEqual((k.public_z85, k.secret_z85), (pub.decode(), sec.decode()))

    def test_public_only(self):
        pub, _ = zmq.curve_keypair()
        k = config.read_key_pair(self.path(f'public-key = "{pub.decode()}"\n'))
        self.assertEqual(k.secret_z85, "")

    def test_malformed_keys_name_the_file(self):
        p = self.path('public-key = "short"\n')
        with self.assertRaisesRegex(ConfigError, "public-key is missing or not a 40-character"):
            config.read_key_pair(p)
        pub, _ = zmq.curve_keypair()
        p = self.path(f'public-key = "{pub.decode()}"\nsecret-key = "{"~" * 40}"\n')
        with self.assertRaisesRegex(ConfigError, "secret-key is not"):
            config.read_key_pair(p)
        with self.assertRaisesRegex(ConfigError, "cannot read key file"):
            config.read_key_pair(os.path.join(self.dir.name, "absent"))


if __name__ == "__main__":
    unittest.main()
