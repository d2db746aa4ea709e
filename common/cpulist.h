// The Linux "cpulist" text format: comma-separated CPU numbers and inclusive ranges, as in
// /sys/devices/system/node/node0/cpulist, `taskset -c` and `numactl --physcpubind`
// ("0-15,32-47"). Used for NUMA cpusets in the wire contract and for CPU bindings in launch plans.
//
// Pure functions, no state: safe to call from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace trainlet {

// CPU numbers at or above this are rejected by ParseCpuList: far beyond any kernel's NR_CPUS
// (8192 today), and low enough that "0-4000000000" cannot allocate gigabytes.
inline constexpr unsigned kMaxCpuNumber = 1u << 20;

// Sorted, duplicates dropped, runs of two or more consecutive CPUs collapsed to "a-b", as the
// kernel writes them: {3,0,1,2,8} -> "0-3,8". Returns "" for an empty list.
std::string FormatCpuList(const std::vector<unsigned>& cpus);

// Accepts "N", "A-B", "A-B:S" (every S-th CPU from A to B, as util-linux's taskset reads it) and
// "A-B:U/G" (the first U CPUs of every group of G, as the kernel's bitmap_parselist reads it),
// comma-separated;
// whitespace around the list (sysfs files end in a newline) and an empty list are allowed.
// Returns the CPUs sorted and without duplicates. An Invalid error quotes the list and names
// the offending entry: an empty entry ("1,,2"), a non-number ("a"), a reversed range ("3-1"),
// a zero stride, or a number >= kMaxCpuNumber.
Result<std::vector<unsigned>> ParseCpuList(std::string_view text);

}  // namespace trainlet
