#include "trainletctl/output_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <ostream>
#include <string>
#include <thread>

namespace trainlet::cli {
namespace {

// A pipe whose write end is non-blocking and full: what a shared tty left O_NONBLOCK is when its
// reader is behind. std::cout loses what it writes there and goes on as if printed (issue 19:
// `logs` printed nothing and exited 0); WriteAll must wait and deliver it all.
TEST(WriteAll, WaitsOnAFullNonBlockingPipeInsteadOfDroppingOutput) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK), 0);
  size_t filler = 0;
  const std::string block(4096, 'x');
  while (true) {
    const ssize_t n = write(p[1], block.data(), block.size());
    if (n <= 0) break;
    filler += static_cast<size_t>(n);
  }
  ASSERT_EQ(errno, EAGAIN);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "[rank " + std::to_string(i) + "] hello\n";
  std::string got;
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the reader is behind
    char buf[8192];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  });
  const Status s = WriteAll(p[1], text);
  close(p[1]);
  reader.join();
  close(p[0]);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), filler + text.size());
  EXPECT_EQ(got.substr(filler), text);
}

TEST(WriteAll, AGoneReaderIsABrokenPipeNotSuccess) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[0]);
  bool broken = false;
  const Status s = WriteAll(p[1], "lost\n", &broken);
  close(p[1]);
  sigaction(SIGPIPE, &old, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(broken);
}

TEST(WriteAll, ABadDescriptorIsAnError) {
  bool broken = true;
  EXPECT_FALSE(WriteAll(-1, "x", &broken).ok());
  EXPECT_FALSE(broken);
  EXPECT_TRUE(WriteAll(-1, "").ok());  // nothing to write: nothing fails
}

// What trainletctl's main puts under std::cout: an ostream over a full non-blocking pipe delivers
// every line, in order, once the reader catches up.
TEST(FdOutputBuffer, AnOstreamOverAFullNonBlockingPipeDeliversEverything) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK), 0);
  size_t filler = 0;
  const std::string block(4096, 'x');
  for (ssize_t n; (n = write(p[1], block.data(), block.size())) > 0;) {
    filler += static_cast<size_t>(n);
  }
  std::string got;
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    char buf[8192];
    for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  });
  FdOutputBuffer buffer(p[1]);
  std::ostream out(&buffer);
  std::string want;
  for (int i = 0; i < 3000; ++i) {
    out << "job-" << i << '\n';
    want += "job-" + std::to_string(i) + "\n";
  }
  out.flush();
  const bool good = out.good();
  close(p[1]);
  reader.join();
  close(p[0]);
  EXPECT_TRUE(good);
  EXPECT_TRUE(buffer.status().ok()) << buffer.status().ToString();
  ASSERT_EQ(got.size(), filler + want.size());
  EXPECT_EQ(got.substr(filler), want);
}

TEST(FdOutputBuffer, AFailedWriteMakesTheStreamBadAndSaysWhy) {
  const int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(full, 0);
  FdOutputBuffer buffer(full);
  std::ostream out(&buffer);
  out << "NAME  STATUS\n";
  EXPECT_FALSE(out.good());
  EXPECT_FALSE(buffer.status().ok());
  EXPECT_FALSE(buffer.broken_pipe());
  EXPECT_NE(buffer.status().message().find("space"), std::string::npos)
      << buffer.status().message();
  close(full);
}

TEST(FdOutputBuffer, AGoneReaderIsABrokenPipe) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[0]);
  FdOutputBuffer buffer(p[1]);
  std::ostream out(&buffer);
  out << "lost\n" << 'x';
  close(p[1]);
  sigaction(SIGPIPE, &old, nullptr);
  EXPECT_FALSE(out.good());
  EXPECT_TRUE(buffer.broken_pipe());
}

}  // namespace
}  // namespace trainlet::cli
