//! `#[testkit::test]`, the attribute of every test of kruntimes' one integration test binary
//! (`tests/it/main.rs`): it keeps the function as written and registers it with the harness
//! (`testkit::harness`), which runs each suite (a module of `tests/it/`) in a process of its
//! own. An `async fn` runs on a Tokio runtime of its own, as under `#[tokio::test]`: the
//! current-thread one, or `flavor = "multi_thread", worker_threads = N`.
//!
//! It owns the registration only: what a test is, how a suite runs and how a name is matched
//! are the harness's.

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::Parser as _;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, ItemFn, Lit, MetaNameValue, Token};

/// Registers the function as a test of the binary's harness.
#[proc_macro_attribute]
pub fn test(attr: TokenStream, item: TokenStream) -> TokenStream {
    let function = syn::parse_macro_input!(item as ItemFn);
    let options = match Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse(attr) {
        Ok(options) => options,
        Err(e) => return e.to_compile_error().into(),
    };
    let mut multi_thread = false;
    let mut workers: Option<usize> = None;
    for option in &options {
        let value = match &option.value {
            Expr::Lit(ExprLit { lit, .. }) => lit,
            other => return error(other, "expected a literal"),
        };
        match (
            option.path.get_ident().map(|i| i.to_string()).as_deref(),
            value,
        ) {
            (Some("flavor"), Lit::Str(s)) if s.value() == "multi_thread" => multi_thread = true,
            (Some("flavor"), Lit::Str(s)) if s.value() == "current_thread" => multi_thread = false,
            (Some("worker_threads"), Lit::Int(n)) => match n.base10_parse() {
                Ok(n) => workers = Some(n),
                Err(e) => return e.to_compile_error().into(),
            },
            _ => {
                return error(
                    option,
                    "expected `flavor = \"multi_thread\"`, `flavor = \"current_thread\"` or `worker_threads = N`",
                );
            }
        }
    }
    if workers.is_some() && !multi_thread {
        return error(
            &options,
            "`worker_threads` needs `flavor = \"multi_thread\"`",
        );
    }
    let signature = &function.sig;
    if !signature.inputs.is_empty() || !matches!(signature.output, syn::ReturnType::Default) {
        return error(signature, "a test takes no arguments and returns nothing");
    }
    let name = &signature.ident;
    let run = if signature.asyncness.is_some() {
        let flavor = match (multi_thread, workers) {
            (false, _) => quote!(::testkit::harness::Flavor::CurrentThread),
            (true, None) => quote!(::testkit::harness::Flavor::MultiThread(None)),
            (true, Some(n)) => quote!(::testkit::harness::Flavor::MultiThread(Some(#n))),
        };
        quote!(::testkit::harness::block_on(#flavor, #name()))
    } else if !options.is_empty() {
        return error(&options, "a runtime flavor is for an `async fn` only");
    } else {
        quote!(#name())
    };
    quote! {
        #function
        ::testkit::harness::inventory::submit! {
            ::testkit::harness::Test {
                module: ::core::module_path!(),
                name: ::core::stringify!(#name),
                run: || #run,
            }
        }
    }
    .into()
}

fn error(at: impl quote::ToTokens, message: &str) -> TokenStream {
    syn::Error::new_spanned(at, message)
        .to_compile_error()
        .into()
}
