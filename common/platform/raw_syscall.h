// A Linux system call made without libc: the result is returned as the kernel gives it (-errno
// on failure) and nothing is written anywhere else. glibc's wrappers, syscall(2) included, store
// a failure in errno, which is the calling thread's: a child that runs on its parent's memory
// while the parent runs on (SpawnBatch, vfork_spawn.h) would change the parent's errno under it.
//
// The instruction is written here for x86-64 and AArch64 (TRAINLET_HAVE_RAW_SYSCALL 1). Elsewhere
// on Linux RawSyscall is syscall(2) with its errno turned back into -errno: the same answers, but
// errno is written, so the concurrent spawn is not used there.
#pragma once

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))

#define TRAINLET_HAVE_RAW_SYSCALL 1

namespace trainlet::platform {

// Always inlined: the caller may be a child on a small borrowed stack, and no call it makes may
// be instrumented (no_sanitize_address).
__attribute__((always_inline)) inline long RawSyscall(long number, long a = 0, long b = 0,
                                                      long c = 0, long d = 0, long e = 0) {
#if defined(__x86_64__)
  long result;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                   : "rcx", "r11", "memory");
  return result;
#else
  register long x8 __asm__("x8") = number;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  return x0;
#endif
}

}  // namespace trainlet::platform

#elif defined(__linux__)

#include <unistd.h>

#include <cerrno>

#define TRAINLET_HAVE_RAW_SYSCALL 0

namespace trainlet::platform {

inline long RawSyscall(long number, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  const long result = syscall(number, a, b, c, d, e);
  return result < 0 ? -errno : result;
}

}  // namespace trainlet::platform

#endif
