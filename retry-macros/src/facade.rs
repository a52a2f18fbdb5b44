//! Where the expansion finds the facade, `stormproof`: at the path
//! `crate = "..."` gives, or under the name the calling crate's Cargo.toml
//! gives the package (a renamed dependency, `sp = { package = "stormproof" }`,
//! included), read with `proc-macro-crate` as serde's and tokio's users'
//! macros do.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::Ident;

/// The facade's package name.
const FACADE: &str = "stormproof";

/// The path the expansion's calls start from, when `crate = ".."` is not given.
pub(crate) fn path() -> syn::Result<TokenStream> {
    match crate_name(FACADE) {
        // The facade's own tests, examples and doc tests: there it is an
        // extern crate of its own name (its library never uses the attribute).
        Ok(FoundCrate::Itself) => Ok(quote!(::stormproof)),
        Ok(FoundCrate::Name(name)) => {
            let name = Ident::new(&name, Span::call_site());
            Ok(quote!(::#name))
        }
        // Not among this crate's dependencies: it reaches the facade through
        // another crate's re-export, which only the user can name.
        Err(proc_macro_crate::Error::CrateNotFound { .. }) => Err(syn::Error::new(
            Span::call_site(),
            "#[resilient] cannot find the `stormproof` crate among this crate's dependencies: add it to Cargo.toml, or name the path it is re-exported at with `crate = \"...\"` (as in `crate = \"::my_lib::stormproof\"`)",
        )),
        // No Cargo.toml to read (a build system other than cargo): the
        // facade is most likely there under its own name.
        Err(_) => Ok(quote!(::stormproof)),
    }
}
