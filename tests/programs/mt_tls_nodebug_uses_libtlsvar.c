/* mt_tls_uses_libtlsvar without debug info: gdb knows exe_tls and lib_tls only as minimal
 * symbols, so `print (int) exe_tls` goes through qGetTLSAddr with no DWARF location. */
#include "mt_tls_uses_libtlsvar.c"
