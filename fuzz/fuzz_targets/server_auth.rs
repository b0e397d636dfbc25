//! cargo-fuzz target: the body lives in `linerate_proto::fuzzing::server_auth` (a server that
//! requires a pre-shared key), which a stable test also drives with generated inputs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzzing::server_auth(data));
