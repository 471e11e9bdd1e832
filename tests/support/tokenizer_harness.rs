//! The tokenizer fuzz harness, shared by `fuzz/fuzz_targets/tokenizer.rs`
//! and `tests/tokenizer_regressions.rs` so every fuzz finding replays in a
//! plain `cargo test`.
//!
//! The input is read by a small byte format of its own (not `arbitrary`'s,
//! so the main crate can replay it without that dependency):
//!
//! * flags byte: bit 0 prepends the 256 single-byte tokens (so most inputs
//!   build and reach BPE), bit 1 goes through a GGUF file (metadata path),
//!   bit 2 uses a random pre-tokenizer name, bit 3 stores the token types
//!   with a wrong value type, bit 4 gives eos/bos ids;
//! * a token count, then each token as a length and bytes (made UTF-8
//!   lossily, as GGUF strings are UTF-8), and its type byte;
//! * a merge count, then each merge: two token indices (joined `"a b"`,
//!   mostly valid merges) or raw bytes;
//! * the rest: texts separated by 0xFF bytes.
//!
//! The tokenizer must build or return an error; once built, every text must
//! encode and decode without a panic, and `decode(encode(s)) ==
//! normalize(s)`, which is `nfc(s)` when the vocabulary has no added
//! tokens; streaming the ids must give the same text.

use inferno_cpu::gguf::{Array, Gguf, Writer};
use inferno_cpu::tokenizer::{byte_level_text, TokenType, Tokenizer, TokenizerParts};
use unicode_normalization::UnicodeNormalization;

struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }

    /// A big-endian `u16`.
    fn index(&mut self) -> usize {
        usize::from(self.byte()) << 8 | usize::from(self.byte())
    }

    fn string(&mut self) -> String {
        let n = usize::from(self.byte() % 16);
        String::from_utf8_lossy(self.bytes(n)).into_owned()
    }
}

/// Builds a tokenizer from `data` and checks it on the texts `data` ends
/// with; panics on any violated property. Returns whether it built.
pub fn check(data: &[u8]) -> bool {
    let mut r = Reader { data };
    let flags = r.byte();
    let mut tokens: Vec<String> = Vec::new();
    let mut types: Vec<i32> = Vec::new();
    if flags & 1 != 0 {
        tokens.extend((0..=255u8).map(|b| byte_level_text(&[b])));
        types.extend([1; 256]);
    }
    let extra = r.byte();
    for _ in 0..extra {
        tokens.push(r.string());
        // Mostly valid types (1..=6), sometimes 0 or 7.
        types.push(i32::from(r.byte() % 8));
    }
    let n_merges = r.byte();
    let mut merges = Vec::new();
    for _ in 0..n_merges {
        let kind = r.byte();
        if kind & 1 == 0 && !tokens.is_empty() {
            let a = &tokens[r.index() % tokens.len()];
            let b = &tokens[r.index() % tokens.len()];
            merges.push(format!("{a} {b}"));
        } else {
            merges.push(r.string());
        }
    }
    let pre = if flags & 4 != 0 {
        r.string()
    } else {
        "qwen2".to_owned()
    };
    let (bos, eos) = if flags & 16 != 0 {
        (Some(u32::from(r.byte()) * 2), Some(u32::from(r.byte()) * 2))
    } else {
        (None, None)
    };
    let texts: Vec<String> = r
        .data
        .split(|&b| b == 0xFF)
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .collect();

    let parts = TokenizerParts {
        pre,
        tokens,
        token_types: types,
        merges,
        bos,
        eos,
        eot: None,
        pad: None,
    };
    let built = if flags & 2 != 0 {
        let mut w = Writer::new();
        let ok = w.add_str("tokenizer.ggml.model", "gpt2").is_ok()
            && w.add_str("tokenizer.ggml.pre", &parts.pre).is_ok()
            && w.add_array("tokenizer.ggml.tokens", Array::String(parts.tokens.clone()))
                .is_ok()
            && w.add_array(
                "tokenizer.ggml.token_type",
                if flags & 8 != 0 {
                    Array::U32(parts.token_types.iter().map(|&t| t as u32).collect())
                } else {
                    Array::I32(parts.token_types.clone())
                },
            )
            .is_ok()
            && w.add_array("tokenizer.ggml.merges", Array::String(parts.merges.clone()))
                .is_ok()
            && parts
                .eos
                .is_none_or(|id| w.add_u32("tokenizer.ggml.eos_token_id", id).is_ok());
        if !ok {
            return false;
        }
        let Ok(bytes) = w.to_bytes() else {
            return false;
        };
        let Ok(gguf) = Gguf::parse(&bytes) else {
            return false;
        };
        Tokenizer::from_gguf(&gguf)
    } else {
        Tokenizer::from_parts(&parts)
    };
    let Ok(tok) = built else { return false };

    let vocab = u32::try_from(tok.vocab_size()).unwrap_or(u32::MAX);
    let has_added = (0..vocab).any(|id| {
        matches!(
            tok.token_type(id),
            Some(TokenType::Control | TokenType::UserDefined)
        )
    });
    for text in &texts {
        for special in [true, false] {
            let ids = tok.encode(text, special);
            let normalized = tok.normalize(text, special);
            let decoded = tok.decode(&ids).expect("encode gives known ids");
            assert_eq!(decoded, normalized.as_bytes(), "{text:?} special={special}");
            if !has_added {
                assert_eq!(normalized, text.nfc().collect::<String>(), "{text:?}");
            }
            let mut stream = tok.stream_decoder();
            let mut streamed = String::new();
            for &id in &ids {
                streamed.push_str(&stream.push(id).expect("known id"));
            }
            streamed.push_str(&stream.finish());
            assert_eq!(streamed, normalized, "{text:?} streamed");
        }
        // Arbitrary ids (some beyond the vocabulary) decode or are refused.
        let ids: Vec<u32> = text.bytes().map(|b| u32::from(b) * 3).collect();
        let _ = tok.decode(&ids);
        let _ = tok.decode_lossy(&ids);
    }
    true
}
