//! The storm on real sockets, shared by the benchmark (`storm_sockets.rs`)
//! and its smoke run in the test suite (`storm_smoke.rs`).

pub mod chart;
pub mod metrics;
pub mod peers;
pub mod report;
pub mod run;
pub mod server;
pub mod strategies;
