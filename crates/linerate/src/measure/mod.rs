//! Measurement of the host and its sockets.
//!
//! `sys` is the only module of the program with operating-system-specific code; it answers
//! capability queries and returns "unsupported" rather than inventing a figure.

pub mod sys;
