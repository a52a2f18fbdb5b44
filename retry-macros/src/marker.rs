//! The mark an expansion leaves in the function it rewrites, which a second
//! `#[resilient]` on the same function reads: its own module, since both
//! `expand` (which writes it) and `validate` (which looks for it) use it, and
//! neither may import the other back.

/// The name of the `static` policy every expansion declares first thing in
/// the function's body: what tells a second `#[resilient]` on the function
/// that it is given an expansion, whatever name either was imported under.
pub(crate) const POLICY: &str = "__RESILIENT_POLICY";
