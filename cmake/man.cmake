# Man pages, generated at build time from the programs themselves so they cannot drift:
#   gdbtrace-server(1)  help2man from `gdbtrace-server --help` / `--version`, plus the sections
#                       --help does not have (COMM forms, monitor commands, collectors, exit
#                       status) from man/gdbtrace-server.h2m
#   gdbtrace(7)         the plugin commands' `help` text, read from gdb with the plugin loaded
# Installed gzipped (Debian policy; man reads .gz under any prefix).
find_program(GDBTRACE_HELP2MAN help2man)
find_program(GDBTRACE_MAN_GDB NAMES gdb)
if(NOT GDBTRACE_HELP2MAN OR NOT GDBTRACE_MAN_GDB)
  message(FATAL_ERROR "help2man and gdb are needed to generate the man pages "
                      "(scripts/setup.sh installs them from scripts/packages.txt)")
endif()

set(GDBTRACE_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(server_h2m ${CMAKE_SOURCE_DIR}/man/gdbtrace-server.h2m)
add_custom_command(
  OUTPUT ${GDBTRACE_MAN_DIR}/gdbtrace-server.1 ${GDBTRACE_MAN_DIR}/gdbtrace-server.1.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GDBTRACE_MAN_DIR}
  COMMAND ${GDBTRACE_HELP2MAN} --no-info --no-discard-stderr --section=1 --include=${server_h2m}
          --version-string=${PROJECT_VERSION}
          --output=${GDBTRACE_MAN_DIR}/gdbtrace-server.1
          "${CMAKE_SOURCE_DIR}/man/help2man-server.sh $<TARGET_FILE:gdbtrace-server>"
  COMMAND gzip -9nfk ${GDBTRACE_MAN_DIR}/gdbtrace-server.1
  DEPENDS gdbtrace-server ${server_h2m} ${CMAKE_SOURCE_DIR}/man/help2man-server.sh
  COMMENT "help2man: gdbtrace-server.1")

file(GLOB plugin_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/gdb-plugin/*.py
     ${CMAKE_SOURCE_DIR}/gdb-plugin/gdbtrace_plugin/*.py)
set(plugin_man_script ${CMAKE_SOURCE_DIR}/man/gdbtrace_plugin_man.py)
add_custom_command(
  OUTPUT ${GDBTRACE_MAN_DIR}/gdbtrace.7 ${GDBTRACE_MAN_DIR}/gdbtrace.7.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GDBTRACE_MAN_DIR}
  COMMAND ${CMAKE_COMMAND} -E env GDBTRACE_MAN_OUT=${GDBTRACE_MAN_DIR}/gdbtrace.7
          GDBTRACE_VERSION=${PROJECT_VERSION} PYTHONDONTWRITEBYTECODE=1 ${GDBTRACE_MAN_GDB} -nx
          -batch -x ${CMAKE_SOURCE_DIR}/gdb-plugin/gdbtrace.py -x ${plugin_man_script}
  COMMAND gzip -9nfk ${GDBTRACE_MAN_DIR}/gdbtrace.7
  DEPENDS ${plugin_sources} ${plugin_man_script}
  COMMENT "gdb help text: gdbtrace.7")

add_custom_target(gdbtrace_man ALL DEPENDS ${GDBTRACE_MAN_DIR}/gdbtrace-server.1.gz
                                           ${GDBTRACE_MAN_DIR}/gdbtrace.7.gz)
