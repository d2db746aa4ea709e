# The trainlet .deb: `cpack -G DEB` (or `cmake --build . --target package`) in a build tree.
# What goes in is decided by the install() rules in cmake/TrainletInstall.cmake; the maintainer
# scripts in packaging/debian/ create the `trainlet` system user and /var/lib/trainlet, and stop
# the units on removal only where systemd runs.
set(CPACK_PACKAGE_NAME "trainlet")
set(CPACK_PACKAGE_VENDOR "trainlet")
set(CPACK_PACKAGE_CONTACT "trainlet maintainers <trainlet@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Run Kubeflow Trainer v2 TrainJobs on bare-metal Linux and macOS nodes")
set(CPACK_PACKAGE_DESCRIPTION
    "trainlet is a per-node agent (trainlet-agent), a coordinator (trainlet-coordinator) and a\n\
kubectl-like CLI (trainletctl) that run Kubeflow Trainer v2 TrainJobs without Kubernetes.\n\
The package ships the three binaries, trainlet-initializer (the bare-metal dataset and model\n\
initializer, a python3 program), systemd units (not enabled), default configs in\n\
/etc/trainlet, the shipped ClusterTrainingRuntimes in /usr/share/trainlet/runtimes and the\n\
Python SDK (import trainlet: Kubeflow's TrainerClient over the operator API).")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
# /etc/trainlet and /lib/systemd/system are absolute install destinations on purpose.
set(CPACK_WARN_ON_ABSOLUTE_INSTALL_DESTINATION OFF)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # trainlet_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION "admin")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Library dependencies come from dpkg-shlibdeps on the binaries; adduser is for postinst.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libsystemd is loaded with dlopen under systemd (common/systemd_library.h), so shlibdeps cannot
# see it.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, libsystemd0")
# hwloc finds GPUs and NICs through its PCI plugin, which Debian packages separately.
# The Python SDK (/usr/lib/python3/dist-packages/trainlet) runs on Debian's python3-zmq and
# python3-protobuf; the daemons do not need them, so they are recommended, not required. tqdm
# draws its progress bars and PyYAML lets it list the shipped runtimes.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libhwloc-plugins, python3, python3-zmq, python3-protobuf")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-tqdm, python3-yaml")

# conffiles: every default config, so dpkg keeps an operator's edits across upgrades and removes
# them only on purge.
set(_trainlet_conffiles "")
foreach(_config ${TRAINLET_INSTALL_CONFIGS})
  get_filename_component(_name ${_config} NAME)
  string(APPEND _trainlet_conffiles "${TRAINLET_SYSCONF_DIR}/${_name}\n")
endforeach()
file(WRITE ${PROJECT_BINARY_DIR}/packaging/debian/conffiles "${_trainlet_conffiles}")
set(_trainlet_control_extra
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
if(_trainlet_conffiles)
  list(APPEND _trainlet_control_extra ${PROJECT_BINARY_DIR}/packaging/debian/conffiles)
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${_trainlet_control_extra})
# Maintainer scripts 0755 and conffiles 0644 in the control archive, whatever the checkout's modes.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

include(CPack)
