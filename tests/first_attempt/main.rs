//! The plain first attempt: a call through the global registry with at
//! most a breaker, a budget and a bulkhead with a place free, no key, no
//! timeout, no deadline, not nested, has its first attempt awaited on its
//! own, without building the call (see the runtime's `call::plain`).
//! What the guards see must be what every other attempt shows them:
//! a success recorded in the breaker and refilling the budget, a first
//! attempt counted by a ratio budget, a failure recorded and retried after
//! its wait, a refusal (a call whose breaker is not closed is not plain)
//! running nothing and counted once, a bulkhead place held exactly while
//! the attempt runs (not while it waits to retry) and given back however it
//! ends, and a full bulkhead waited for.
//!
//! The guards live in the global registry (a scoped registry's calls are
//! never plain), each test with names of its own.

mod support;

mod breaker;
mod budget;
mod bulkhead;
mod context;
mod policy_run;
