"""trainlet-initializer (python/initializer/trainlet-initializer), run as the agent runs it: a
process with STORAGE_URI and the workspace env, against temp dirs and an HTTP server this test
starts on 127.0.0.1 port 0 (a thread), which counts the requests it answers."""

import hashlib
import http.server
import io
import json
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import threading
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(
    os.environ.get("TRAINLET_SOURCE_DIR", os.path.join(HERE, "..", "..")),
    "python",
    "initializer",
    "trainlet-initializer",
)


class _Handler(http.server.BaseHTTPRequestHandler):
    # path -> (body, extra headers, bytes actually sent or None)
    files = {}
    counts = {}
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def _answer(self, send_body):
        with self.lock:
            self.counts[(self.command, self.path)] = self.counts.get((self.command, self.path), 0) + 1
        if self.path not in self.files:
            self.send_error(404)
            return
        body, headers, cut = self.files[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"' + hashlib.sha256(body).hexdigest()[:16] + '"')
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if send_body:
            self.wfile.write(body if cut is None else body[:cut])
            if cut is not None:
                self.close_connection = True

    def do_GET(self):
        self._answer(True)

    def do_HEAD(self):
        self._answer(False)


def tar_gz(members):
    """members: name -> bytes, or name -> ("symlink", target)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type = tarfile.SYMTYPE
                info.linkname = content[1]
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def zip_bytes(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    return buf.getvalue()


class InitializerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        cls.thread = threading.Thread(target=cls.server.serve_forever, daemon=True)
        cls.thread.start()
        cls.base = f"http://127.0.0.1:{cls.server.server_address[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="initializer-test.")
        self.root = self.tmp.name
        self.cache = os.path.join(self.root, "cache")
        _Handler.files = {}
        _Handler.counts = {}

    def tearDown(self):
        self.tmp.cleanup()

    def serve(self, path, body, cut=None, headers=None):
        _Handler.files[path] = (body, headers or {}, cut)
        return self.base + path

    def count(self, method, path):
        return _Handler.counts.get((method, path), 0)

    def run_init(self, uri, kind="dataset", dest=None, cache=True, extra_env=None):
        dest = dest or os.path.join(self.root, "ws", kind)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEFLOW_TRAINER_")}
        env.update({
            "STORAGE_URI": uri,
            "TRAINLET_DATASET_DIR": dest if kind == "dataset" else "",
            "TRAINLET_MODEL_DIR": dest if kind == "model" else "",
        })
        if cache:
            env["TRAINLET_CACHE_DIR"] = self.cache
        else:
            env.pop("TRAINLET_CACHE_DIR", None)
        env.update(extra_env or {})
        proc = subprocess.run(
            [sys.executable, PROGRAM, kind], env=env, capture_output=True, text=True, timeout=60
        )
        return proc, dest

    def assert_ok(self, proc):
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def last_err(self, proc):
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        return lines[-1] if lines else ""

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    # --- file:// and plain paths

    def test_a_directory_tree_is_hard_linked_into_the_dataset_dir(self):
        src = os.path.join(self.root, "src")
        os.makedirs(os.path.join(src, "sub"))
        with open(os.path.join(src, "a.txt"), "wb") as f:
            f.write(b"alpha")
        with open(os.path.join(src, "sub", "b.bin"), "wb") as f:
            f.write(b"\0" * 5000)
        proc, dest = self.run_init("file://" + src, cache=False)
        self.assert_ok(proc)
        self.assertEqual(self.read(os.path.join(dest, "a.txt")), b"alpha")
        self.assertEqual(len(self.read(os.path.join(dest, "sub", "b.bin"))), 5000)
        # Same filesystem: the very same inode.
        self.assertEqual(os.stat(os.path.join(dest, "a.txt")).st_ino, os.stat(os.path.join(src, "a.txt")).st_ino)
        self.assertIn("2 hard-linked", proc.stdout)

    def test_a_single_file_by_plain_path_lands_by_its_name(self):
        src = os.path.join(self.root, "weights.safetensors")
        with open(src, "wb") as f:
            f.write(b"w" * 100)
        proc, dest = self.run_init(src, kind="model")
        self.assert_ok(proc)
        self.assertEqual(self.read(os.path.join(dest, "weights.safetensors")), b"w" * 100)
        self.assertIn("cache miss", proc.stdout)

    def test_a_missing_path_fails_with_its_name(self):
        proc, _ = self.run_init("file:///nonexistent/trainlet-data")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("/nonexistent/trainlet-data does not exist", self.last_err(proc))

    def test_a_changed_file_source_is_fetched_again(self):
        src = os.path.join(self.root, "src")
        os.makedirs(src)
        with open(os.path.join(src, "a.txt"), "w") as f:
            f.write("one")
        self.assert_ok(self.run_init("file://" + src)[0])
        os.unlink(os.path.join(src, "a.txt"))  # a new inode: the cached one keeps "one"
        with open(os.path.join(src, "a.txt"), "w") as f:
            f.write("two!")
        proc, dest = self.run_init("file://" + src, dest=os.path.join(self.root, "ws2"))
        self.assert_ok(proc)
        self.assertIn("cache miss", proc.stdout)
        self.assertIn("changed", proc.stdout)
        self.assertEqual(self.read(os.path.join(dest, "a.txt")), b"two!")

    # --- http(s)

    def test_a_tar_gz_over_http_is_unpacked(self):
        uri = self.serve("/data.tar.gz", tar_gz({"train/x.txt": b"x" * 10, "README": b"r"}))
        proc, dest = self.run_init(uri, cache=False)
        self.assert_ok(proc)
        self.assertEqual(self.read(os.path.join(dest, "train", "x.txt")), b"x" * 10)
        self.assertEqual(self.read(os.path.join(dest, "README")), b"r")
        self.assertFalse(any(n.startswith(".") for n in os.listdir(dest)), os.listdir(dest))
        self.assertIn("100%", proc.stdout)

    def test_a_tar_of_dot_as_tar_c_writes_it_is_unpacked(self):
        src = os.path.join(self.root, "tree")
        os.makedirs(os.path.join(src, "sub"))
        with open(os.path.join(src, "sub", "f.txt"), "w") as f:
            f.write("f")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(src, arcname=".")
        uri = self.serve("/dot.tar", buf.getvalue())
        proc, dest = self.run_init(uri)
        self.assert_ok(proc)
        self.assertEqual(self.read(os.path.join(dest, "sub", "f.txt")), b"f")

    def test_a_zip_over_http_is_unpacked(self):
        uri = self.serve("/m.zip", zip_bytes({"config.json": b"{}", "w/model.bin": b"m" * 7}))
        proc, dest = self.run_init(uri, kind="model")
        self.assert_ok(proc)
        self.assertEqual(self.read(os.path.join(dest, "config.json")), b"{}")
        self.assertEqual(self.read(os.path.join(dest, "w", "model.bin")), b"m" * 7)

    def test_a_plain_file_over_http_is_kept_by_its_name(self):
        uri = self.serve("/dir/train.jsonl", b'{"a": 1}\n' * 1000)
        proc, dest = self.run_init(uri)
        self.assert_ok(proc)
        self.assertEqual(len(self.read(os.path.join(dest, "train.jsonl"))), 9000)

    def test_a_short_body_is_an_error_naming_both_sizes(self):
        uri = self.serve("/cut.tar.gz", b"z" * 4096, cut=1000)
        proc, dest = self.run_init(uri)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        err = self.last_err(proc)
        self.assertIn("short body", err)
        self.assertIn("1000", err)
        self.assertIn("4096", err)
        self.assertEqual(os.listdir(dest), [])
        # Nothing half-written is left in the cache.
        self.assertEqual(os.listdir(os.path.join(self.cache, "entries")), [])

    def test_http_errors_name_the_status(self):
        proc, _ = self.run_init(self.base + "/missing.tar.gz")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("HTTP 404", self.last_err(proc))

    def test_path_traversal_in_archives_is_refused(self):
        cases = {
            "/dotdot.tar.gz": tar_gz({"ok.txt": b"1", "../escape.txt": b"bad"}),
            "/abs.tar.gz": tar_gz({"/tmp/trainlet-abs-escape.txt": b"bad"}),
            "/link.tar.gz": tar_gz({"l": ("symlink", "../../etc/passwd")}),
            "/abslink.tar.gz": tar_gz({"l": ("symlink", "/etc/passwd")}),
            "/dotdot.zip": zip_bytes({"../../escape.txt": b"bad"}),
        }
        for path, body in cases.items():
            with self.subTest(path=path):
                uri = self.serve(path, body)
                dest = os.path.join(self.root, "ws" + path.replace("/", "_"))
                proc, _ = self.run_init(uri, dest=dest, cache=False)
                self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
                self.assertRegex(self.last_err(proc), "refused|outside")
                self.assertEqual(os.listdir(dest), [])
        self.assertFalse(os.path.exists(os.path.join(self.root, "escape.txt")))
        self.assertFalse(os.path.exists("/tmp/trainlet-abs-escape.txt"))

    # --- the cache

    def test_a_second_job_with_the_same_uri_is_a_cache_hit_without_a_download(self):
        uri = self.serve("/d.tar.gz", tar_gz({"a.txt": b"aaa", "b/c.txt": b"ccc"}))
        first, dest1 = self.run_init(uri, dest=os.path.join(self.root, "job1"))
        self.assert_ok(first)
        self.assertIn("cache miss", first.stdout)
        second, dest2 = self.run_init(uri, dest=os.path.join(self.root, "job2"))
        self.assert_ok(second)
        self.assertIn("cache hit", second.stdout)
        self.assertEqual(self.count("GET", "/d.tar.gz"), 1)  # one download for both jobs
        self.assertEqual(self.count("HEAD", "/d.tar.gz"), 1)  # the hit's check of the source
        self.assertEqual(self.read(os.path.join(dest2, "b", "c.txt")), b"ccc")
        # Both jobs share the cached inode.
        self.assertEqual(os.stat(os.path.join(dest1, "a.txt")).st_ino, os.stat(os.path.join(dest2, "a.txt")).st_ino)

    # --- the cache's size cap (issue 18: it never expired)

    def entry_of(self, uri):
        return os.path.join(self.cache, "entries", hashlib.sha256(uri.encode()).hexdigest()[:40])

    def job(self, uri, name, cap=None):
        """Runs the initializer for job `name`; its workspace stays until self.delete(name)."""
        env = {"TRAINLET_CACHE_MAX_BYTES": str(cap)} if cap is not None else {}
        proc, _ = self.run_init(uri, dest=os.path.join(self.root, "ws", name), extra_env=env)
        self.assert_ok(proc)
        return proc

    def delete(self, name):
        shutil.rmtree(os.path.join(self.root, "ws", name))

    def test_the_least_recently_used_entries_go_past_the_cap(self):
        a = self.serve("/a.bin", b"a" * 1000)
        b = self.serve("/b.bin", b"b" * 1000)
        c = self.serve("/c.bin", b"c" * 1000)
        self.job(a, "j1")
        self.delete("j1")
        self.job(b, "j2")
        self.delete("j2")
        self.assertIn("cache hit", self.job(a, "j3").stdout)  # a is now used more recently than b
        self.delete("j3")
        # a and b are held by the cache alone: 2000 bytes and their manifests, over 2500 with c's
        # manifest. b, the least recently used, goes; c (just fetched) and a stay.
        out = self.job(c, "j4", cap=2500).stdout
        self.assertIn("removed 1 least recently used entry", out)
        self.assertFalse(os.path.exists(self.entry_of(b)))
        self.assertTrue(os.path.exists(self.entry_of(a)))
        self.assertTrue(os.path.exists(self.entry_of(c)))
        # Without a cap (today's behaviour) nothing goes.
        self.job(b, "j5")
        self.delete("j5")
        self.job(c, "j6")
        self.assertTrue(os.path.exists(self.entry_of(a)))
        self.assertTrue(os.path.exists(self.entry_of(b)))

    def test_an_entry_in_use_is_never_evicted(self):
        a = self.serve("/a.bin", b"a" * 1000)
        b = self.serve("/b.bin", b"b" * 1000)
        self.job(a, "j1")  # j1 is not deleted: its workspace links a's files
        out = self.job(b, "j2", cap=1).stdout
        self.assertNotIn("removed", out)
        self.assertTrue(os.path.exists(self.entry_of(a)))
        self.assertTrue(os.path.exists(self.entry_of(b)))
        self.assertEqual(self.read(os.path.join(self.root, "ws", "j1", "a.bin")), b"a" * 1000)
        # j1 is deleted, but another initializer holds a's lock (it is placing a now).
        self.delete("j1")
        self.delete("j2")
        import fcntl

        key = os.path.basename(self.entry_of(a))
        fd = os.open(os.path.join(self.cache, "locks", key + ".lock"), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            out = self.job(b, "j3", cap=1).stdout
            self.assertTrue(os.path.exists(self.entry_of(a)))
            self.assertIn("cache over its cap", out)
        finally:
            os.close(fd)
        self.delete("j3")
        self.job(b, "j4", cap=1)  # now nothing holds a
        self.assertFalse(os.path.exists(self.entry_of(a)))
        self.assertTrue(os.path.exists(self.entry_of(b)))  # the one just used

    def test_a_corrupted_cache_entry_is_fetched_again(self):
        uri = self.serve("/d.tar.gz", tar_gz({"a.txt": b"good data"}))
        first, dest1 = self.run_init(uri, dest=os.path.join(self.root, "job1"))
        self.assert_ok(first)
        # A job wrote into its hard-linked copy: the cache's file changed too.
        with open(os.path.join(dest1, "a.txt"), "r+b") as f:
            f.write(b"BAD!")
        second, dest2 = self.run_init(uri, dest=os.path.join(self.root, "job2"))
        self.assert_ok(second)
        self.assertIn("cache miss", second.stdout)
        self.assertIn("corrupt", second.stdout)
        self.assertEqual(self.count("GET", "/d.tar.gz"), 2)
        self.assertEqual(self.read(os.path.join(dest2, "a.txt")), b"good data")

    def test_what_a_killed_initializer_left_in_the_cache_is_removed(self):
        uri = self.serve("/d.tar.gz", tar_gz({"a.txt": b"a"}))
        self.assert_ok(self.run_init(uri, dest=os.path.join(self.root, "job1"))[0])
        key = os.listdir(os.path.join(self.cache, "entries"))[0]
        leftover = os.path.join(self.cache, "tmp", key + ".killed")
        os.makedirs(os.path.join(leftover, "data"))
        with open(os.path.join(self.cache, "entries", key, "data", "a.txt"), "wb") as f:
            f.write(b"b")  # corrupt: the next run stores a new entry
        self.assert_ok(self.run_init(uri, dest=os.path.join(self.root, "job2"))[0])
        self.assertEqual(os.listdir(os.path.join(self.cache, "tmp")), [])

    def test_a_changed_http_source_is_fetched_again(self):
        uri = self.serve("/d.tar.gz", tar_gz({"a.txt": b"v1"}))
        self.assert_ok(self.run_init(uri, dest=os.path.join(self.root, "job1"))[0])
        self.serve("/d.tar.gz", tar_gz({"a.txt": b"version 2"}))  # a new ETag and length
        second, dest2 = self.run_init(uri, dest=os.path.join(self.root, "job2"))
        self.assert_ok(second)
        self.assertIn("cache miss", second.stdout)
        self.assertEqual(self.read(os.path.join(dest2, "a.txt")), b"version 2")

    def test_concurrent_initializers_of_one_uri_download_once(self):
        uri = self.serve("/big.tar.gz", tar_gz({"a.bin": os.urandom(1 << 20)}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEFLOW_TRAINER_")}
        procs = []
        for i in range(4):
            e = dict(env, STORAGE_URI=uri, TRAINLET_CACHE_DIR=self.cache,
                     TRAINLET_DATASET_DIR=os.path.join(self.root, f"c{i}"))
            procs.append(subprocess.Popen([sys.executable, PROGRAM, "dataset"], env=e,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=60) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, out + err)
        self.assertEqual(self.count("GET", "/big.tar.gz"), 1)
        self.assertEqual(sum("cache hit" in out for out, _ in outs), 3)

    # --- schemes this node cannot serve

    def test_hf_without_huggingface_hub_names_the_module(self):
        shim = os.path.join(self.root, "shim")
        os.makedirs(os.path.join(shim, "huggingface_hub"))
        with open(os.path.join(shim, "huggingface_hub", "__init__.py"), "w") as f:
            f.write("raise ImportError('hidden by the test')\n")
        env = {"PYTHONPATH": shim + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc, dest = self.run_init("hf://tatsu-lab/alpaca", extra_env=env)
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
        self.assertEqual(
            self.last_err(proc),
            "trainlet-initializer: hf://tatsu-lab/alpaca: the Python module huggingface_hub is not "
            "importable on this node; install it (pip install huggingface_hub) or use file:// or "
            "http(s)://",
        )

    def test_s3_without_boto3_names_the_module(self):
        shim = os.path.join(self.root, "shim")
        os.makedirs(os.path.join(shim, "boto3"))
        with open(os.path.join(shim, "boto3", "__init__.py"), "w") as f:
            f.write("raise ImportError('hidden by the test')\n")
        env = {"PYTHONPATH": shim + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc, _ = self.run_init("s3://bucket/data", extra_env=env)
        self.assertEqual(proc.returncode, 3)
        self.assertIn("the Python module boto3 is not importable", self.last_err(proc))

    def fake_module(self, name, source):
        shim = os.path.join(self.root, "shim-" + name)
        os.makedirs(os.path.join(shim, name))
        with open(os.path.join(shim, name, "__init__.py"), "w") as f:
            f.write(source)
        return {"PYTHONPATH": shim + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def test_hf_goes_through_snapshot_download_with_kubeflows_env(self):
        record = os.path.join(self.root, "hf-call.json")
        env = self.fake_module("huggingface_hub", f"""
import json, os
def snapshot_download(**kwargs):
    with open({record!r}, "w") as f:
        json.dump(kwargs, f)
    os.makedirs(os.path.join(kwargs["local_dir"], ".cache"), exist_ok=True)
    with open(os.path.join(kwargs["local_dir"], "config.json"), "w") as f:
        f.write("{{}}")
""")
        env.update(ACCESS_TOKEN="hf_secret", IGNORE_PATTERNS="*.bin, *.pt")
        proc, dest = self.run_init("hf://meta-llama/Llama-3.2-1B", kind="model", extra_env=env)
        self.assert_ok(proc)
        with open(record) as f:
            call = json.load(f)
        self.assertEqual(call["repo_id"], "meta-llama/Llama-3.2-1B")
        self.assertEqual(call["token"], "hf_secret")
        self.assertEqual(call["ignore_patterns"], ["*.bin", "*.pt"])
        self.assertIn("*.safetensors", call["allow_patterns"])
        self.assertNotIn("repo_type", call)
        self.assertEqual(os.listdir(dest), ["config.json"])  # the hub's .cache is not kept

    def test_s3_goes_through_boto3_with_kubeflows_env(self):
        bucket = os.path.join(self.root, "bucket")
        os.makedirs(os.path.join(bucket, "data", "train"))
        with open(os.path.join(bucket, "data", "train", "a.txt"), "w") as f:
            f.write("a")
        record = os.path.join(self.root, "s3-call.json")
        env = self.fake_module("boto3", f"""
import json, os, shutil
ROOT = {bucket!r}
class _Pages:
    def paginate(self, Bucket, Prefix):
        keys = []
        for d, _, files in os.walk(ROOT):
            keys += [os.path.relpath(os.path.join(d, n), ROOT) for n in files]
        yield {{"Contents": [{{"Key": k, "Size": os.path.getsize(os.path.join(ROOT, k))}}
                             for k in sorted(keys) if k.startswith(Prefix)]}}
class _Client:
    def get_paginator(self, name):
        assert name == "list_objects_v2"
        return _Pages()
    def download_file(self, bucket, key, dst):
        shutil.copy(os.path.join(ROOT, key), dst)
def client(service, **kwargs):
    with open({record!r}, "w") as f:
        json.dump(dict(kwargs, service=service), f)
    return _Client()
""")
        env.update(ENDPOINT="http://127.0.0.1:9000", ACCESS_KEY_ID="id", SECRET_ACCESS_KEY="key",
                   REGION="eu-west-1")
        proc, dest = self.run_init("s3://bucket/data", extra_env=env)
        self.assert_ok(proc)
        with open(record) as f:
            call = json.load(f)
        self.assertEqual(call, {"service": "s3", "endpoint_url": "http://127.0.0.1:9000",
                                "aws_access_key_id": "id", "aws_secret_access_key": "key",
                                "region_name": "eu-west-1"})
        self.assertEqual(self.read(os.path.join(dest, "train", "a.txt")), b"a")

    def test_an_unknown_scheme_names_it_and_the_supported_ones(self):
        proc, _ = self.run_init("gs://bucket/x")
        self.assertEqual(proc.returncode, 2)
        err = self.last_err(proc)
        self.assertIn("unsupported storageUri scheme gs", err)
        self.assertIn("http://", err)
        self.assertIn("hf://", err)

    def test_usage_and_missing_storage_uri(self):
        proc = subprocess.run([sys.executable, PROGRAM, "weights"], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("usage", proc.stderr)
        proc, _ = self.run_init("")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("STORAGE_URI is not set", self.last_err(proc))


class _StatusHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.posts.append((self.path, self.headers.get("Authorization"), json.loads(body)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@unittest.skipIf(shutil.which("openssl") is None, "needs the openssl CLI")
class InitializerProgressTest(unittest.TestCase):
    """Progress goes to the agent's endpoint (KUBEFLOW_TRAINER_SERVER_*), in Kubeflow's body."""

    def test_progress_is_posted_to_the_jobs_status(self):
        with tempfile.TemporaryDirectory(prefix="initializer-progress.") as root:
            cert, key = os.path.join(root, "cert.pem"), os.path.join(root, "key.pem")
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                 "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1",
                 "-addext", "subjectAltName=IP:127.0.0.1"],
                check=True, capture_output=True, timeout=60)
            server = http.server.HTTPServer(("127.0.0.1", 0), _StatusHandler)
            server.posts = []
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            try:
                token = os.path.join(root, "token")
                with open(token, "w") as f:
                    f.write("tok\n")
                src = os.path.join(root, "src.bin")
                with open(src, "wb") as f:
                    f.write(b"d" * 1000)
                env = dict(
                    os.environ,
                    STORAGE_URI=src,
                    TRAINLET_DATASET_DIR=os.path.join(root, "ds"),
                    TRAINLET_JOB="myjob",
                    KUBEFLOW_TRAINER_SERVER_URL=f"https://127.0.0.1:{server.server_address[1]}",
                    KUBEFLOW_TRAINER_SERVER_CA_CERT=cert,
                    KUBEFLOW_TRAINER_SERVER_TOKEN=token,
                )
                env.pop("TRAINLET_CACHE_DIR", None)
                proc = subprocess.run([sys.executable, PROGRAM, "dataset"], env=env,
                                      capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            finally:
                server.shutdown()
                server.server_close()
        self.assertTrue(server.posts, proc.stdout)
        path, auth, body = server.posts[-1]
        self.assertEqual(path, "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/myjob/status")
        self.assertEqual(auth, "Bearer tok")
        status = body["trainerStatus"]
        self.assertEqual(status["progressPercentage"], 100)
        self.assertEqual(status["metrics"][0]["name"], "initializer")
        self.assertTrue(status["metrics"][0]["value"].startswith("dataset ready: 1 file(s)"))
        self.assertLessEqual(len(status["metrics"][0]["value"]), 64)  # Kubeflow's limit


if __name__ == "__main__":
    unittest.main()
