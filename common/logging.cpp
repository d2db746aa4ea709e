#include "common/logging.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "common/systemd_library.h"

namespace trainlet {
namespace {

// Set once in main before any thread logs; read by every entry.
std::string g_component;
std::string g_node;
std::string g_target = "stderr";

thread_local std::string t_job;
thread_local int64_t t_rank = -1;

int SyslogPriority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    case spdlog::level::critical:
      return 2;
    default:
      return 6;
  }
}

// systemd sets JOURNAL_STREAM to "<dev>:<ino>" of the stream it connected to stderr; only a
// match means our stderr really goes to the journal (and not to a pipe a child inherited).
bool StderrIsJournal() {
  const char* js = std::getenv("JOURNAL_STREAM");
  if (js == nullptr) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  return dev == static_cast<unsigned long long>(st.st_dev) &&
         ino == static_cast<unsigned long long>(st.st_ino);
}

class JournalSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit JournalSink(const SystemdLibrary* systemd) : systemd_(systemd) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::vector<std::string> fields = JournalFields(
        SyslogPriority(msg.level), std::string(msg.payload.data(), msg.payload.size()));
    std::vector<iovec> iov(fields.size());
    for (size_t i = 0; i < fields.size(); ++i) {
      iov[i].iov_base = const_cast<char*>(fields[i].data());
      iov[i].iov_len = fields[i].size();
    }
    systemd_->journal_sendv(iov.data(), static_cast<int>(iov.size()));
  }
  void flush_() override {}

 private:
  const SystemdLibrary* const systemd_;
};

}  // namespace

Result<LogTarget> ParseLogTarget(const std::string& name) {
  if (name == "auto") return LogTarget::kAuto;
  if (name == "stderr") return LogTarget::kStderr;
  if (name == "journal") return LogTarget::kJournal;
  return InvalidError("must be auto, stderr or journal, got \"" + name + "\"");
}

bool IsValidLogLevel(const std::string& level) {
  for (const char* l : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    if (level == l) return true;
  }
  return false;
}

std::vector<std::string> JournalFields(int priority, const std::string& message) {
  std::vector<std::string> f = {"MESSAGE=" + message, "PRIORITY=" + std::to_string(priority),
                                "SYSLOG_IDENTIFIER=trainlet-" + g_component,
                                "TRAINLET_COMPONENT=" + g_component};
  if (!g_node.empty()) f.push_back("TRAINLET_NODE=" + g_node);
  if (!t_job.empty()) f.push_back("TRAINLET_JOB=" + t_job);
  if (t_rank >= 0) f.push_back("TRAINLET_RANK=" + std::to_string(t_rank));
  return f;
}

void SetUpLogging(const std::string& component, const std::string& level, LogTarget target) {
  g_component = component;
  bool journal = target == LogTarget::kJournal || (target == LogTarget::kAuto && StderrIsJournal());
  // Asked for the journal where there is none (a container, a chroot, macOS): stderr rather
  // than nothing, and said once the logger is up.
  std::string no_journal;
  const SystemdLibrary* systemd = nullptr;
  if (journal && access("/run/systemd/journal/socket", W_OK) != 0) {
    no_journal = "no journal socket on this system";
  } else if (journal && (systemd = LoadSystemdLibrary(&no_journal)) == nullptr) {
    no_journal = "libsystemd cannot be loaded (" + no_journal + ")";
  }
  if (!no_journal.empty()) journal = false;
  std::shared_ptr<spdlog::logger> logger;
  if (journal) {
    logger = std::make_shared<spdlog::logger>(component, std::make_shared<JournalSink>(systemd));
    spdlog::register_logger(logger);
  } else {
    logger = spdlog::stderr_logger_mt(component);
  }
  g_target = journal ? "journal" : "stderr";
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ " + component + ": %v");
  spdlog::set_default_logger(logger);
  auto lvl = spdlog::level::from_str(level);
  spdlog::set_level(lvl == spdlog::level::off && level != "off" ? spdlog::level::info : lvl);
  spdlog::flush_on(spdlog::level::info);
  if (target == LogTarget::kJournal && !no_journal.empty()) {
    spdlog::warn("log_target journal: {}; logging to stderr", no_journal);
  }
}

void SetLogNode(const std::string& node) { g_node = node; }

std::string ActiveLogTarget() { return g_target; }

ScopedLogFields::ScopedLogFields(const std::string& job, int64_t rank)
    : saved_job_(t_job), saved_rank_(t_rank) {
  t_job = job;
  t_rank = rank;
}

ScopedLogFields::~ScopedLogFields() {
  t_job = std::move(saved_job_);
  t_rank = saved_rank_;
}

}  // namespace trainlet
