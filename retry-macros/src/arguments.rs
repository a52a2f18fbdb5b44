//! Every argument of the attribute, in one table.
//!
//! Name, kind of value, default, an example and what it means live here
//! and nowhere else: `parse` reads values by their kind, error messages
//! take their examples from here, and the "unknown argument" list and the
//! "did you mean" suggestions are this table's names. Adding an argument
//! is one row here plus what it means in `validate` and `expand`.

/// The kind of value an argument takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An integer literal (kept wide and signed, so `-1` gets a range error).
    Integer,
    /// A non-empty string literal.
    Name,
    /// One string of a fixed set.
    OneOf(&'static [&'static str]),
    /// `true` or `false`.
    Bool,
    /// A decimal literal (`1.5`, or `2`), kept in thousandths.
    Decimal,
    /// The name of one of the function's parameters.
    Parameter,
    /// A path to the runtime, written as a string (`"::stormproof"`).
    CratePath,
    /// A path to a function, written as a path (`my_module::classify`).
    FnPath,
}

/// A default, as the code uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Default {
    Integer(u64),
    Choice(&'static str),
    Bool(bool),
    /// No value: the feature is off.
    None,
    /// Computed from the function (`name`, and `breaker` and `budget`: the
    /// operation's own) or a fixed path (`crate`).
    Derived,
}

/// One argument of `#[resilient(...)]`.
#[derive(Debug)]
pub(crate) struct Argument {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Default,
    /// A value that fits, for "like `name = example`" hints.
    pub example: &'static str,
}

pub(crate) const JITTERS: &[&str] = &["full", "equal", "decorrelated", "none"];
pub(crate) const NESTED: &[&str] = &["once", "retry"];
/// The runtime's `Priority::NAMES`.
pub(crate) const PRIORITIES: &[&str] = &["critical", "default", "sheddable"];

/// Every argument, in the order the docs list them.
pub(crate) const ARGUMENTS: &[Argument] = &[
    Argument { name: "max_attempts", kind: Kind::Integer, default: Default::Integer(4), example: "4" },
    Argument { name: "base_ms", kind: Kind::Integer, default: Default::Integer(100), example: "100" },
    Argument { name: "cap_ms", kind: Kind::Integer, default: Default::Integer(20_000), example: "20_000" },
    Argument { name: "factor", kind: Kind::Decimal, default: Default::Integer(2), example: "1.5" },
    Argument {
        name: "jitter",
        kind: Kind::OneOf(JITTERS),
        default: Default::Choice("full"),
        example: "\"full\"",
    },
    Argument { name: "attempt_timeout_ms", kind: Kind::Integer, default: Default::None, example: "500" },
    Argument { name: "deadline_ms", kind: Kind::Integer, default: Default::None, example: "5_000" },
    Argument { name: "breaker", kind: Kind::Name, default: Default::Derived, example: "\"payment\"" },
    Argument { name: "per", kind: Kind::Parameter, default: Default::None, example: "tenant" },
    Argument { name: "budget", kind: Kind::Name, default: Default::Derived, example: "\"payment\"" },
    Argument { name: "bulkhead", kind: Kind::Name, default: Default::None, example: "\"payment\"" },
    Argument { name: "throttle", kind: Kind::Name, default: Default::None, example: "\"payment\"" },
    Argument { name: "rate_limit", kind: Kind::Name, default: Default::None, example: "\"payment\"" },
    Argument {
        name: "priority",
        kind: Kind::OneOf(PRIORITIES),
        default: Default::Choice("default"),
        example: "\"critical\"",
    },
    Argument { name: "hedge_after_ms", kind: Kind::Integer, default: Default::None, example: "50" },
    Argument { name: "max_hedges", kind: Kind::Integer, default: Default::Integer(1), example: "1" },
    Argument { name: "fallback", kind: Kind::FnPath, default: Default::None, example: "cached_price" },
    Argument { name: "idempotent", kind: Kind::Bool, default: Default::Bool(true), example: "false" },
    Argument { name: "key", kind: Kind::Parameter, default: Default::None, example: "order_id" },
    Argument {
        name: "nested",
        kind: Kind::OneOf(NESTED),
        default: Default::Choice("once"),
        example: "\"once\"",
    },
    Argument { name: "name", kind: Kind::Name, default: Default::Derived, example: "\"shop::charge\"" },
    Argument { name: "classify", kind: Kind::FnPath, default: Default::None, example: "classify_db_error" },
    Argument { name: "on_retry", kind: Kind::FnPath, default: Default::None, example: "log_retry" },
    Argument { name: "on_stop", kind: Kind::FnPath, default: Default::None, example: "count_give_up" },
    Argument { name: "crate", kind: Kind::CratePath, default: Default::Derived, example: "\"::stormproof\"" },
];

/// The row of `name`, if it is an argument.
pub(crate) fn find(name: &str) -> Option<&'static Argument> {
    ARGUMENTS.iter().find(|argument| argument.name == name)
}

/// Every argument's name.
pub(crate) fn names() -> Vec<&'static str> {
    ARGUMENTS.iter().map(|argument| argument.name).collect()
}

/// The integer default of `name`.
pub(crate) fn default_integer(name: &str) -> u64 {
    match find(name).map(|argument| argument.default) {
        Some(Default::Integer(value)) => value,
        _ => unreachable!("`{name}` has an integer default in the table"),
    }
}

#[cfg(test)]
mod tests {
    /// The argument names of a Markdown table whose rows start with
    /// `| \`name\` |` (after `prefix`), in order.
    fn table_names(text: &str, prefix: &str) -> Vec<String> {
        text.lines()
            .filter_map(|line| line.strip_prefix(prefix)?.strip_prefix("| `"))
            .filter_map(|row| row.split('`').next().map(str::to_owned))
            .collect()
    }

    /// The attribute's rustdoc lists every argument of the table the
    /// macro parses by, in its order, and nothing else; so does the
    /// guide's page of the attribute.
    #[test]
    fn the_docs_list_every_argument_of_the_table() {
        let names = super::names();
        assert_eq!(table_names(include_str!("lib.rs"), "/// "), names, "the attribute's rustdoc");
        let guide = include_str!("../../docs/attribute.md");
        let section = &guide[guide.find("## The attribute's arguments").expect("the section")..];
        let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
        assert_eq!(table_names(section, ""), names, "docs/attribute.md");
    }
}
