# Homebrew formula for trainlet: `brew install --HEAD ./packaging/homebrew/trainlet.rb`, or from a
# tap once a release is tagged. The agent runs as a launchd service: `brew services start trainlet`
# (see docs/operations.md, "macOS"). What macOS needs differently is in common/platform/: signals
# through a self-pipe, kqueue for readiness sets, timers, step exits and step files, proc_pidinfo
# and sysctl for process facts; no libsystemd (the journal and sd_notify are compiled out). The
# portable half of that code is built and tested on Linux (scripts/test-portable, Debian 12); the
# macOS-only half (kqueue, proc_pidinfo, sysctl, SO_NOSIGPIPE, POSIX_SPAWN_CLOEXEC_DEFAULT) has
# not yet been compiled on a Mac: the first `brew install --HEAD` is its first build.
class Trainlet < Formula
  desc "Run Kubeflow Trainer v2 TrainJobs on bare-metal Linux and macOS nodes"
  # Placeholders for the project's public repository. A release fills in the tag's source
  # tarball and its SHA-256 (the zeros make any install of the stable spec fail loudly); until
  # then, point `head` at a clone and use --HEAD.
  homepage "https://github.com/trainlet/trainlet"
  url "https://github.com/trainlet/trainlet/archive/refs/tags/v0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  head "https://github.com/trainlet/trainlet.git", branch: "main"

  depends_on "cli11" => :build
  depends_on "cmake" => :build
  depends_on "cppzmq" => :build
  depends_on "nlohmann-json" => :build
  depends_on "pkgconf" => :build
  depends_on "fmt"
  depends_on "hwloc"
  depends_on "protobuf"
  depends_on "spdlog"
  depends_on "sqlite"
  depends_on "libyaml"
  depends_on "yaml-cpp"
  depends_on "zeromq"

  def install
    system "cmake", "-S", ".", "-B", "build",
           "-DTRAINLET_BUILD_TESTS=OFF", "-DTRAINLET_BUILD_BENCH=OFF",
           # /etc and the systemd unit dir are absolute on Linux; keep them in the keg here.
           "-DTRAINLET_SYSCONF_DIR=#{etc}/trainlet",
           "-DTRAINLET_SYSTEMD_UNIT_DIR=#{lib}/systemd/system",
           *std_cmake_args
    system "cmake", "--build", "build"
    system "cmake", "--install", "build"
    pkgshare.install "deploy/launchd/io.trainlet.agent.plist"
    (var/"lib/trainlet-agent").mkpath
    (var/"log").mkpath
    (etc/"trainlet/keys").mkpath
  end

  def caveats
    <<~EOS
      The agent needs its key and the coordinator's public key before it can start:
        trainletctl keys create --role agent --name "$(hostname -s)" --dir #{etc}/trainlet/keys
      then enrol the printed public key on the coordinator host and copy coordinator.key.pub to
      #{etc}/trainlet/keys/. Set the coordinator's address in #{etc}/trainlet/agent.yaml.
    EOS
  end

  # The launchd job (brew services), with the settings of deploy/launchd/io.trainlet.agent.plist,
  # which is also installed (pkgshare) for a system-wide LaunchDaemon under its own user. The
  # DSL has no AbandonProcessGroup; the agent starts each rank in a process group of its own,
  # which launchd's cleanup of the job's group does not include.
  service do
    run [opt_bin/"trainlet-agent", "--config", etc/"trainlet/agent.yaml", "--log-target", "stderr"]
    keep_alive true
    working_dir var/"lib/trainlet-agent"
    log_path var/"log/trainlet-agent.log"
    error_log_path var/"log/trainlet-agent.log"
    process_type :standard
  end

  test do
    assert_match "trainlet-agent #{version}", shell_output("#{bin}/trainlet-agent --version")
    assert_match "trainletctl #{version}", shell_output("#{bin}/trainletctl --version")
    system bin/"trainletctl", "keys", "create", "--role", "agent", "--name", "t",
           "--dir", testpath/"keys"
    assert_predicate testpath/"keys/t.key.pub", :exist?
  end
end
