#include "common/cpulist.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trainlet {
namespace {

using Cpus = std::vector<unsigned>;

TEST(FormatCpuListTest, CollapsesSortsAndDropsDuplicates) {
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({5}), "5");
  EXPECT_EQ(FormatCpuList({0, 1}), "0-1");
  EXPECT_EQ(FormatCpuList({8, 3, 0, 1, 2, 2}), "0-3,8");
  EXPECT_EQ(FormatCpuList({0, 2, 4}), "0,2,4");
  EXPECT_EQ(FormatCpuList({1, 3, 4, 5, 7, 9, 10}), "1,3-5,7,9-10");
}

TEST(ParseCpuListTest, AcceptsTheKernelFormat) {
  EXPECT_EQ(ParseCpuList("").value(), Cpus{});
  EXPECT_EQ(ParseCpuList("\n").value(), Cpus{});
  EXPECT_EQ(ParseCpuList("7").value(), Cpus{7});
  EXPECT_EQ(ParseCpuList("0-3,8\n").value(), (Cpus{0, 1, 2, 3, 8}));
  EXPECT_EQ(ParseCpuList("8,0-1,1").value(), (Cpus{0, 1, 8}));  // sorted, deduplicated
  EXPECT_EQ(ParseCpuList("2-2").value(), Cpus{2});
  EXPECT_EQ(ParseCpuList("0-9:3").value(), (Cpus{0, 3, 6, 9}));           // util-linux stride
  EXPECT_EQ(ParseCpuList("0-11:2/4").value(), (Cpus{0, 1, 4, 5, 8, 9}));  // kernel groups
  EXPECT_EQ(ParseCpuList("0-3:4000000000").value(), Cpus{0});             // no wrap-around
}

TEST(ParseCpuListTest, RoundTrips) {
  for (const char* text : {"0", "0-55,112-167", "56-111,168-223", "0,2,4-7,100", "1023"}) {
    Result<Cpus> cpus = ParseCpuList(text);
    ASSERT_TRUE(cpus.ok()) << text << ": " << cpus.status().ToString();
    EXPECT_EQ(FormatCpuList(*cpus), text);
  }
  const Cpus odd = {1, 3, 5, 6, 7, 64, 65, 200};
  EXPECT_EQ(ParseCpuList(FormatCpuList(odd)).value(), odd);
}

// Each bad list fails as Invalid and the message quotes the entry at fault.
TEST(ParseCpuListTest, RejectsBadEntriesNamingThem) {
  struct Case {
    const char* text;
    const char* entry;
  };
  for (const Case& c :
       {Case{"3-1", "\"3-1\""}, Case{"a", "\"a\""}, Case{"1,,2", "\"\""},
        Case{"0-3,x-5", "\"x-5\""}, Case{",", "\"\""}, Case{"1,", "\"\""}, Case{"-1", "\"-1\""},
        Case{"1-", "\"1-\""}, Case{"+1", "\"+1\""}, Case{"1.5", "\"1.5\""},
        Case{"0-7:0", "\"0-7:0\""}, Case{"0-7:3/2", "\"0-7:3/2\""}, Case{"4:2", "\"4:2\""},
        Case{"0-99999999", "\"0-99999999\""},
        Case{"99999999999999999999", "\"99999999999999999999\""}}) {
    Result<Cpus> r = ParseCpuList(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid) << c.text;
    EXPECT_NE(r.status().message().find(std::string("entry ") + c.entry), std::string::npos)
        << c.text << " -> " << r.status().message();
    EXPECT_NE(r.status().message().find(std::string("\"") + c.text + "\""), std::string::npos)
        << r.status().message();
  }
}

TEST(ParseCpuListTest, ExplainsWhy) {
  EXPECT_NE(ParseCpuList("3-1").status().message().find("ends before it starts"),
            std::string::npos);
  EXPECT_NE(ParseCpuList("a").status().message().find("not a number"), std::string::npos);
  EXPECT_NE(ParseCpuList("1,,2").status().message().find("empty"), std::string::npos);
}

}  // namespace
}  // namespace trainlet
