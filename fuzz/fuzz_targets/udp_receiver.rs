//! cargo-fuzz target: the body lives in `linerate_proto::fuzzing::udp_receiver`, which stable tests
//! also drive with generated datagram streams.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzzing::udp_receiver(data));
