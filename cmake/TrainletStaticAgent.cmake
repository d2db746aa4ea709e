# TRAINLET_STATIC_AGENT: the agent links its C++ libraries as archives, and libstdc++ statically.
#
# The agent runs on every node for the node's whole life, and its idle RSS is mostly the pages of
# the code it maps: a shared library costs its whole text once touched around (the kernel maps
# page-cache pages around each fault), plus its relocations. Linked dynamically the agent maps
# libstdc++ (1.6 MiB), libzmq with libsodium, libnorm, libpgm and libbsd (1.6 MiB), spdlog with
# fmt, and yaml-cpp; as archives only the parts it uses come in, and libstdc++.so is not loaded
# at all (bench/README.md has the numbers). The C libraries stay shared: libc, libm, hwloc (with
# libudev) and libzmq's GSSAPI (krb5), which Debian ships without archives.
#
# Debian ships the archives (libzmq3-dev, libsodium-dev, libpgm-dev, libnorm-dev, libbsd-dev,
# libmd-dev, libyaml-cpp-dev); spdlog and fmt are compiled from their headers
# (common/static/). Where one is missing the agent is linked like the other binaries.
#
# trainletctl and trainlet-exec are linked the same way: one process each per command (per
# remote node for mpirun), and the dynamic loader's work was most of their start-up
# (`trainletctl --version` 5.5 -> 2.5 ms, trainlet-exec 5.2 -> 2.0 ms on the benchmark machine).
#
# Linked with --gc-sections: libstdc++'s archive, and trainlet's own code (compiled with
# -ffunction-sections -fdata-sections, root CMakeLists.txt), lose what the agent never calls.
#
# How: the libraries trainlet_common and trainlet_rendezvous link are generator expressions that
# pick trainlet_static_cxx instead of the shared libraries for an executable whose
# TRAINLET_STATIC_CXX property is on (trainlet_link_static_cxx). The static libraries in between
# are compiled once and serve both kinds of executable.
option(TRAINLET_STATIC_AGENT "Link trainlet-agent with static C++ libraries where Debian has them"
       ON)

set(TRAINLET_STATIC_CXX_AVAILABLE OFF)
if(TRAINLET_STATIC_AGENT AND CMAKE_SYSTEM_NAME STREQUAL "Linux"
   AND NOT TRAINLET_BUILD_FUZZ)
  set(missing)
  set(TRAINLET_STATIC_CXX_ARCHIVES)
  foreach(lib zmq sodium pgm norm protokit bsd md yaml-cpp)
    find_library(TRAINLET_ARCHIVE_${lib} NAMES lib${lib}.a)
    if(TRAINLET_ARCHIVE_${lib})
      list(APPEND TRAINLET_STATIC_CXX_ARCHIVES ${TRAINLET_ARCHIVE_${lib}})
    else()
      list(APPEND missing lib${lib}.a)
    endif()
  endforeach()
  find_library(TRAINLET_GSSAPI_LIBRARY NAMES gssapi_krb5 PATH_SUFFIXES mit-krb5)
  if(NOT TRAINLET_GSSAPI_LIBRARY)
    list(APPEND missing libgssapi_krb5.so)
  else()
    # Linked as the file it names: Debian's mit-krb5/ holds only the link-time symlink (to
    # ../libgssapi_krb5.so.2.2), and a library linked from there gave the binary a RUNPATH of
    # that dir, which CMake pads with a trailing ':' (room for the install-time rewrite). The
    # dynamic loader reads that empty entry as the current directory: each start of trainletctl
    # or the agent tried 20 paths under its cwd for each library (libc.so.6 included) before the
    # system's, and a build-tree binary run as root from a directory holding a libc.so.6 would
    # have loaded it. From its real directory (the system's) no RUNPATH is needed at all.
    get_filename_component(TRAINLET_GSSAPI_LIBRARY_FILE "${TRAINLET_GSSAPI_LIBRARY}" REALPATH)
  endif()
  if(missing)
    message(STATUS "trainlet-agent linked dynamically: no ${missing}")
  else()
    set(TRAINLET_STATIC_CXX_AVAILABLE ON)
  endif()
endif()

set(static_head "$<BOOL:$<TARGET_PROPERTY:TRAINLET_STATIC_CXX>>")
if(TRAINLET_STATIC_CXX_AVAILABLE)
  set(TRAINLET_ZMQ "$<IF:${static_head},trainlet_static_cxx,PkgConfig::ZMQ>")
  set(TRAINLET_SPDLOG "$<IF:${static_head},trainlet_static_cxx,spdlog::spdlog>")
  set(TRAINLET_YAML_CPP "$<IF:${static_head},trainlet_static_cxx,yaml-cpp>")
else()
  set(TRAINLET_ZMQ PkgConfig::ZMQ)
  set(TRAINLET_SPDLOG spdlog::spdlog)
  set(TRAINLET_YAML_CPP yaml-cpp)
endif()
unset(static_head)

# trainlet_link_static_cxx(target): links `target` (an executable) the static way, when available.
# libzmq.a's GSSAPI references are answered in the executable itself, without MIT Kerberos
# (common/static/zmq_gssapi_stubs.cpp): as a source of the target, not of an archive, so they
# resolve before libgssapi_krb5.so is reached and --as-needed drops it.
function(trainlet_link_static_cxx target)
  if(TRAINLET_STATIC_CXX_AVAILABLE)
    set_target_properties(${target} PROPERTIES TRAINLET_STATIC_CXX ON)
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/common/static/zmq_gssapi_stubs.cpp)
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc -Wl,--as-needed
                        -Wl,--gc-sections)
  endif()
endfunction()
