//! One call, attempt by attempt, by behaviour: each guard around an
//! attempt, the backoff between attempts, the attempt timeout and the
//! deadline, and what an attempt runs in. Every scenario runs the two ways
//! an entry point hands an attempt to the call (made, or made by a
//! closure), which must behave the same.
//!
//! The guards live in this binary's global registry (a plain first attempt
//! needs it); every test uses names of its own.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod backoff;
mod breaker;
mod bulkhead;
mod context;
mod deadline;
mod rate_limit;
mod throttle;
