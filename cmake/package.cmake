# Debian packages from this build tree (scripts/package.sh runs cpack):
#   gdbtrace       the server component; Depends: computed by dpkg-shlibdeps from the binary
#   gdbtrace-dkms  the dkms component; DKMS builds the module on install and on kernel upgrades
set(GDBTRACE_DEB_MAINTAINER "gdbtrace maintainers <gdbtrace@example.org>")
set(GDBTRACE_DEB_RELEASE 1)
string(TIMESTAMP GDBTRACE_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC) # honours SOURCE_DATE_EPOCH
set(deb_dir ${CMAKE_CURRENT_LIST_DIR}/deb)
set(deb_out ${CMAKE_BINARY_DIR}/generated/deb)

# Debian-only files: installed into the packages (component installs), not by a plain
# `cmake --install` (EXCLUDE_FROM_ALL).
foreach(GDBTRACE_DEB_NAME gdbtrace gdbtrace-dkms)
  configure_file(${deb_dir}/changelog.in ${deb_out}/${GDBTRACE_DEB_NAME}/changelog.Debian @ONLY)
  execute_process(COMMAND gzip -9nf ${deb_out}/${GDBTRACE_DEB_NAME}/changelog.Debian
                  COMMAND_ERROR_IS_FATAL ANY)
endforeach()
install(FILES ${deb_out}/gdbtrace/changelog.Debian.gz DESTINATION ${GDBTRACE_DOC_DIR}
        COMPONENT server EXCLUDE_FROM_ALL)
install(FILES ${deb_out}/gdbtrace-dkms/changelog.Debian.gz ${deb_dir}/copyright
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/gdbtrace-dkms COMPONENT dkms EXCLUDE_FROM_ALL)
set(GDBTRACE_DEB_PLUGIN_DIR /usr/${GDBTRACE_PLUGIN_DIR})
set(GDBTRACE_DEB_HOOK_DIR /usr/${CMAKE_INSTALL_DATADIR}/gdb/python/gdb/command)
configure_file(${deb_dir}/server-prerm.in ${deb_out}/gdbtrace/prerm @ONLY
               FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                WORLD_READ WORLD_EXECUTE)
foreach(script postinst prerm)
  configure_file(${deb_dir}/dkms-${script}.in ${deb_out}/gdbtrace-dkms/${script} @ONLY
                 FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                  WORLD_READ WORLD_EXECUTE)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gdbtrace)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server dkms)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${GDBTRACE_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${GDBTRACE_DEB_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME gdbtrace)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_SERVER_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_RECOMMENDS gdb)
set(CPACK_DEBIAN_SERVER_PACKAGE_SUGGESTS "gdbtrace-dkms, python3-matplotlib")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA ${deb_out}/gdbtrace/prerm)
set(CPACK_COMPONENT_SERVER_DESCRIPTION
    "gdbserver-compatible remote stub with in-kernel tracepoints
gdbtrace-server speaks gdb's remote protocol like gdbserver, and runs the
tracepoint conditions and actions gdb downloads in the kernel (the
gdbtrace module or eBPF), or by ptrace where neither is available.
The package also holds the gdb plugin (gdbtrace status, live, export,
stats, plot, latency), which every gdb loads at start-up.")

set(CPACK_DEBIAN_DKMS_PACKAGE_NAME gdbtrace-dkms)
set(CPACK_DEBIAN_DKMS_PACKAGE_SECTION kernel)
set(CPACK_DEBIAN_DKMS_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_DKMS_PACKAGE_DEPENDS dkms)
set(CPACK_DEBIAN_DKMS_PACKAGE_CONTROL_EXTRA ${deb_out}/gdbtrace-dkms/postinst
                                             ${deb_out}/gdbtrace-dkms/prerm)
set(CPACK_COMPONENT_DKMS_DESCRIPTION
    "gdbtrace kernel module source for DKMS
The gdbtrace module collects gdb tracepoint frames in the kernel: a
uprobe handler runs the agent bytecode and writes the frame to per-CPU
rings, so the traced program does not stop. DKMS builds it for every
installed kernel with headers, and again after kernel upgrades.
Kernels that refuse unsigned modules (Secure Boot, lockdown) cannot
load it; gdbtrace-server then uses its eBPF collector.")

include(CPack)
