/* A shared library with a thread-local variable (initial value 500) for the TLS tests. */
__thread int lib_tls = 500;

void lib_tls_set(int value) { lib_tls = value; }
