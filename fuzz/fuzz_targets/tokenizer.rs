//! Arbitrary bytes as a tokenizer's vocabulary, merges and metadata, then as
//! texts: building must succeed or return an error, and a built tokenizer
//! must encode and decode every text without a panic, with
//! `decode(encode(s)) == normalize(s)` (`nfc(s)` without added tokens).
//!
//! The harness lives in `tests/support/tokenizer_harness.rs` so that
//! `tests/tokenizer_regressions.rs` replays findings in a plain `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/tokenizer_harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::check(data);
});
