# The release number lives only in the top-level project(gdbtrace VERSION ...). The server reads it
# from a generated header; the module gets it through dkms.conf (GDBTRACE_VERSION=...), the Debian
# packages through CPACK_PACKAGE_VERSION.
set(GDBTRACE_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
configure_file(${CMAKE_CURRENT_LIST_DIR}/gdbtrace_version.h.in
               ${GDBTRACE_GENERATED_DIR}/gdbtrace_version.h @ONLY)
target_include_directories(gdbtrace_common INTERFACE ${GDBTRACE_GENERATED_DIR})
