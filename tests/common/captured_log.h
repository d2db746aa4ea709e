// Routes spdlog's default logger to a string for a test's scope, and back to the previous logger
// after, so a test can count the lines a daemon component logged.
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace trainlet::testing {

class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // The lines that contain `text`, in order.
  std::vector<std::string> Lines(const std::string& text) const {
    std::istringstream in(out_.str());
    std::vector<std::string> found;
    for (std::string line; std::getline(in, line);) {
      if (line.find(text) != std::string::npos) found.push_back(line);
    }
    return found;
  }
  int Count(const std::string& text) const { return static_cast<int>(Lines(text).size()); }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace trainlet::testing
