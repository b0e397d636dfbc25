//! cargo-fuzz target: the body lives in `linerate_proto::fuzzing::typed_frames`, which a stable
//! test also drives with generated inputs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzzing::typed_frames(data));
