# install() rules: what `cmake --install` lays down and what the packages ship
# (packaging/CPackConfig.cmake). Included at the end of the root CMakeLists.txt, once every
# target exists.
#
# Layout (prefix /usr in the .deb, /usr/local by default):
#   <prefix>/bin/                      trainletctl, trainlet-agent, trainlet-coordinator,
#                                      trainlet-exec, trainlet-step, trainlet-pmix,
#                                      trainlet-initializer
#   <prefix>/share/trainlet/runtimes/  the shipped ClusterTrainingRuntimes; `trainletctl local up`
#                                      finds them as <exe>/../share/trainlet/runtimes
#   <prefix>/share/doc/trainlet/       operator docs
#   TRAINLET_SYSCONF_DIR               default daemon configs (/etc/trainlet, conffiles in the .deb)
#   TRAINLET_SYSTEMD_UNIT_DIR          systemd units (/lib/systemd/system)
# The last two are absolute on purpose: /etc and the unit directory do not move with the prefix.
# Under DESTDIR (as cpack installs) they land below DESTDIR.
include(GNUInstallDirs)

set(TRAINLET_SYSCONF_DIR "/etc/trainlet" CACHE PATH
    "Where the default daemon configs are installed (absolute)")
set(TRAINLET_SYSTEMD_UNIT_DIR "/lib/systemd/system" CACHE PATH
    "Where the systemd units are installed (absolute)")

install(TARGETS trainletctl trainlet-agent trainlet-coordinator
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# mpirun's launch agent on every node (OMPI_MCA_plm_rsh_agent), so it goes beside the daemons.
if(TARGET trainlet-exec)
  install(TARGETS trainlet-exec RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# The rendezvous C API for ranks (ctypes loads libtrainlet_rendezvous.so; docs/rendezvous.md).
if(TARGET trainlet_rendezvous_shared)
  install(TARGETS trainlet_rendezvous_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/include/trainlet/rendezvous.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/trainlet)
endif()
# The per-step parent of the ranks; the agent runs it from its own directory.
if(TARGET trainlet-step)
  install(TARGETS trainlet-step RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# The built-in dataset and model initializer (a Python 3 program); the agent runs it from its own
# directory for dataset-initializer and model-initializer steps without a command.
install(PROGRAMS ${TRAINLET_INITIALIZER_SOURCE} DESTINATION ${CMAKE_INSTALL_BINDIR})
# The PMIx server of MPI ranks started directly; trainlet-step runs it from its own directory.
# (The .deb then depends on libpmix2, through CPACK_DEBIAN_PACKAGE_SHLIBDEPS.)
if(TARGET trainlet-pmix)
  install(TARGETS trainlet-pmix RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# Globs, so that a runtime, unit or config added to deploy/ ships without editing this file;
# CONFIGURE_DEPENDS re-runs cmake when one appears.
file(GLOB TRAINLET_INSTALL_RUNTIMES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/deploy/runtimes/*.yaml)
file(GLOB TRAINLET_INSTALL_UNITS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/deploy/systemd/*.service)
file(GLOB TRAINLET_INSTALL_CONFIGS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/deploy/config/*.yaml)
file(GLOB TRAINLET_INSTALL_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)

install(FILES ${TRAINLET_INSTALL_RUNTIMES}
        DESTINATION ${CMAKE_INSTALL_DATADIR}/trainlet/runtimes)
install(FILES ${TRAINLET_INSTALL_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  install(FILES ${TRAINLET_INSTALL_UNITS} DESTINATION ${TRAINLET_SYSTEMD_UNIT_DIR})
endif()
# Configs are conffiles in the .deb: dpkg keeps an operator's edits across upgrades.
install(FILES ${TRAINLET_INSTALL_CONFIGS} DESTINATION ${TRAINLET_SYSCONF_DIR})
