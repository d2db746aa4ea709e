// GSSAPI stand-ins for the statically linked libzmq of trainlet-agent, trainletctl and
// trainlet-exec (cmake/TrainletStaticAgent.cmake's trainlet_link_static_cxx adds this file).
//
// Debian's libzmq.a is built with ZeroMQ's GSSAPI security mechanism, so linking it needs the
// 11 gss_* functions and 2 name-type OIDs below from libgssapi_krb5.so, which brings MIT Kerberos
// with it (libkrb5, libk5crypto, libkrb5support, libcom_err, libkeyutils, libresolv), loaded for
// a mechanism nothing of trainlet selects (CURVE to the coordinator, plain or CURVE to the ranks;
// nothing sets ZMQ_GSSAPI_*): about 600 kB of an idle agent's RSS (bench/README.md, issue 15's
// "at most 1 MB added"), and seven libraries for the dynamic loader to open, map and relocate at
// every start of trainletctl (one per command) and trainlet-exec (one per remote node of an
// mpirun). Defined here, in the executable, they resolve libzmq's references before the shared
// library is reached, and --as-needed then drops it.
//
// Should anything ever select GSSAPI, each call fails as GSSAPI says a missing mechanism does
// (GSS_S_UNAVAILABLE; the release calls succeed with nothing to release), so ZeroMQ reports a
// failed handshake instead of crashing. Only the statically linked executables link this file;
// the libraries, the coordinator and the tests link the real libgssapi_krb5.
#include <gssapi/gssapi.h>

extern "C" {

gss_OID GSS_C_NT_HOSTBASED_SERVICE = nullptr;
gss_OID GSS_C_NT_USER_NAME = nullptr;

OM_uint32 gss_acquire_cred(OM_uint32* minor, gss_name_t, OM_uint32, gss_OID_set, gss_cred_usage_t,
                           gss_cred_id_t*, gss_OID_set*, OM_uint32*) {
  *minor = 0;
  return GSS_S_UNAVAILABLE;
}

OM_uint32 gss_release_cred(OM_uint32* minor, gss_cred_id_t*) {
  *minor = 0;
  return GSS_S_COMPLETE;
}

OM_uint32 gss_init_sec_context(OM_uint32* minor, gss_cred_id_t, gss_ctx_id_t*, gss_name_t, gss_OID,
                               OM_uint32, OM_uint32, gss_channel_bindings_t, gss_buffer_t, gss_OID*,
                               gss_buffer_t, OM_uint32*, OM_uint32*) {
  *minor = 0;
  return GSS_S_UNAVAILABLE;
}

OM_uint32 gss_accept_sec_context(OM_uint32* minor, gss_ctx_id_t*, gss_cred_id_t, gss_buffer_t,
                                 gss_channel_bindings_t, gss_name_t*, gss_OID*, gss_buffer_t,
                                 OM_uint32*, OM_uint32*, gss_cred_id_t*) {
  *minor = 0;
  return GSS_S_UNAVAILABLE;
}

OM_uint32 gss_delete_sec_context(OM_uint32* minor, gss_ctx_id_t*, gss_buffer_t) {
  *minor = 0;
  return GSS_S_COMPLETE;
}

OM_uint32 gss_display_name(OM_uint32* minor, gss_name_t, gss_buffer_t, gss_OID*) {
  *minor = 0;
  return GSS_S_UNAVAILABLE;
}

OM_uint32 gss_import_name(OM_uint32* minor, gss_buffer_t, gss_OID, gss_name_t*) {
  *minor = 0;
  return GSS_S_UNAVAILABLE;
}

OM_uint32 gss_release_buffer(OM_uint32* minor, gss_buffer_t) {
  *minor = 0;
  return GSS_S_COMPLETE;
}

OM_uint32 gss_release_name(OM_uint32* minor, gss_name_t*) {
  *minor = 0;
  return GSS_S_COMPLETE;
}

OM_uint32 gss_wrap(OM_uint32* minor, gss_ctx_id_t, int, gss_qop_t, gss_buffer_t, int*,
                   gss_buffer_t) {
  *minor = 0;
  return GSS_S_UNAVAILABLE;
}

OM_uint32 gss_unwrap(OM_uint32* minor, gss_ctx_id_t, gss_buffer_t, gss_buffer_t, int*, gss_qop_t*) {
  *minor = 0;
  return GSS_S_UNAVAILABLE;
}

}  // extern "C"
