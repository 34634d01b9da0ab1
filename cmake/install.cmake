# Install rules (GNUInstallDirs layout) and Debian packages. Two components, one per package:
#   server  bin/gdbtrace-server, the gdb plugin and its auto-load hook, man pages, docs -> gdbtrace
#   dkms    the kernel module's self-contained source tree with dkms.conf          -> gdbtrace-dkms
# `cmake --install build --prefix /usr/local` installs both; scripts/package.sh makes the .debs.
include(GNUInstallDirs)
include(${CMAKE_CURRENT_LIST_DIR}/version.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/man.cmake)

set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                                                GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(GDBTRACE_DOC_DIR ${CMAKE_INSTALL_DATADIR}/doc/gdbtrace)

# --- server component -----------------------------------------------------------------------
install(TARGETS gdbtrace-server RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)

# The plugin keeps the source tree's layout, so install.sh works from the installed copy too.
set(GDBTRACE_PLUGIN_DIR ${CMAKE_INSTALL_DATADIR}/gdbtrace)
install(FILES ${CMAKE_SOURCE_DIR}/gdb-plugin/gdbtrace.py
              ${CMAKE_SOURCE_DIR}/gdb-plugin/gdbtrace_autoload.py
        DESTINATION ${GDBTRACE_PLUGIN_DIR} COMPONENT server)
install(PROGRAMS ${CMAKE_SOURCE_DIR}/gdb-plugin/install.sh DESTINATION ${GDBTRACE_PLUGIN_DIR}
        COMPONENT server)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/gdb-plugin/gdbtrace_plugin DESTINATION ${GDBTRACE_PLUGIN_DIR}
        COMPONENT server FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
# gdb imports every module in <data-directory>/python/gdb/command/ at start-up; with prefix /usr
# that is Debian's gdb data directory, so the plugin loads in every gdb without a ~/.gdbinit line.
install(FILES ${CMAKE_SOURCE_DIR}/gdb-plugin/gdbtrace_autoload.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/gdb/python/gdb/command COMPONENT server)

install(FILES ${GDBTRACE_MAN_DIR}/gdbtrace-server.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT server)
install(FILES ${GDBTRACE_MAN_DIR}/gdbtrace.7.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man7
        COMPONENT server)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/plugin.md
              ${CMAKE_SOURCE_DIR}/cmake/deb/copyright
        DESTINATION ${GDBTRACE_DOC_DIR} COMPONENT server)

# --- dkms component: what DKMS needs to build gdbtrace.ko without the repository -------------
set(GDBTRACE_DKMS_DIR src/gdbtrace-${PROJECT_VERSION})
file(GLOB gdbtrace_kmod_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kmodule/*.c
     ${CMAKE_SOURCE_DIR}/kmodule/*.h)
list(FILTER gdbtrace_kmod_sources EXCLUDE REGEX "\\.mod\\.c$") # kbuild output of in-tree builds
install(FILES ${CMAKE_SOURCE_DIR}/kmodule/Kbuild ${CMAKE_SOURCE_DIR}/kmodule/Makefile
              ${gdbtrace_kmod_sources}
        DESTINATION ${GDBTRACE_DKMS_DIR} COMPONENT dkms)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/kmodule/uapi DESTINATION ${GDBTRACE_DKMS_DIR} COMPONENT dkms)
# The freestanding C the stub and the module build from the same files (gdbserver-agent/src/shared:
# ax/, abi/, x86/); kmodule/Makefile's `prepare` copies its sources to shared/ in a checkout, the
# install copies them there for DKMS (the Makefile's `prepare` then finds no gdbserver-agent/ and
# keeps these copies). Sources only, as `prepare` copies (*.def: the opcode table ax_opcodes.h
# includes).
foreach(dir ax abi x86)
  file(GLOB gdbtrace_shared_sources CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/gdbserver-agent/src/shared/${dir}/*.c
       ${CMAKE_SOURCE_DIR}/gdbserver-agent/src/shared/${dir}/*.h
       ${CMAKE_SOURCE_DIR}/gdbserver-agent/src/shared/${dir}/*.def)
  install(FILES ${gdbtrace_shared_sources} DESTINATION ${GDBTRACE_DKMS_DIR}/shared/${dir}
          COMPONENT dkms)
endforeach()
configure_file(${CMAKE_SOURCE_DIR}/kmodule/dkms.conf ${CMAKE_BINARY_DIR}/generated/dkms.conf @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/generated/dkms.conf DESTINATION ${GDBTRACE_DKMS_DIR}
        COMPONENT dkms)
# The udev rule that opens /dev/gdbtrace to a group: an example, its rule commented out (off by
# default); an administrator copies it to /etc/udev/rules.d/ and enables it (kmodule/README.md).
install(FILES ${CMAKE_SOURCE_DIR}/kmodule/60-gdbtrace.rules DESTINATION ${GDBTRACE_DKMS_DIR}
        COMPONENT dkms)

include(${CMAKE_CURRENT_LIST_DIR}/package.cmake)
