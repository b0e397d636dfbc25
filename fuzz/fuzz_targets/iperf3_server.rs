//! cargo-fuzz target: the body lives in `linerate_proto::fuzzing::iperf3_server`, which stable
//! tests also drive with generated inputs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzzing::iperf3_server(data));
