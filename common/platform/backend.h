// Which implementation each file of common/platform compiles. Private to common/platform: no
// caller tests these macros (or the OS); they use the classes.
//
//  - TRAINLET_NATIVE_LINUX: Linux's own event descriptors (signalfd, pidfd, inotify, eventfd),
//    PR_SET_CHILD_SUBREAPER, and the atomic close-on-exec flags (pipe2, accept4, SOCK_CLOEXEC).
//  - TRAINLET_NATIVE_APPLE: macOS (kqueue EVFILT_PROC and EVFILT_VNODE, proc_pidinfo,
//    SO_NOSIGPIPE, POSIX_SPAWN_CLOEXEC_DEFAULT). Its signals and descriptor flags take the
//    portable path below, so that what macOS runs there is what the Linux portable build tests.
//  - neither: plain POSIX: a self-pipe for signals, polling for process exits and file
//    changes, fcntl for close-on-exec. On Linux, -DTRAINLET_PORTABLE_POSIX=ON selects it, so the
//    code macOS shares with it is built and tested on Linux (scripts/test-portable).
//
// What has no portable form keeps its OS: readiness sets and timers (epoll and timerfd on Linux,
// kqueue on macOS; poll_set.cpp, periodic_timer.cpp) and process facts (/proc on Linux,
// proc_pidinfo and sysctl on macOS; process_info.cpp).
#pragma once

#if defined(__linux__) && !defined(TRAINLET_PORTABLE_POSIX)
#define TRAINLET_NATIVE_LINUX 1
#elif defined(__APPLE__)
#define TRAINLET_NATIVE_APPLE 1
#endif
