//! cargo-fuzz target: the RESP request parser on arbitrary bytes in arbitrary splits.
#![no_main]

#[path = "../check.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    check::check_input(data);
});
