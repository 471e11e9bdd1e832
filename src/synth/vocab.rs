//! A synthetic byte-level BPE vocabulary laid out like Qwen3's.
//!
//! llama.cpp (and any GPT-2-style tokenizer) only loads a model whose
//! vocabulary is a consistent byte-level BPE: every byte has a token, and
//! every merge joins two existing tokens into the token spelled by their
//! concatenation. [`vocab`] builds such a vocabulary from a seed:
//!
//! 1. the 256 byte tokens, in the order of GPT-2's byte-to-unicode table
//!    (see [`byte_to_unicode`]);
//! 2. merged tokens, one per merge, in rank order: each joins two existing
//!    tokens into one that does not exist yet. Most merges extend a
//!    word-like token (lowercase letters, optionally after the space marker
//!    `Ġ`) by a letter drawn by English frequency, so English text
//!    tokenized with the vocabulary does get merged; the rest join random
//!    tokens and bytes, as real vocabularies also hold;
//! 3. Qwen3's 26 added tokens ([`ADDED_TOKENS`]), at Qwen3's own ids when
//!    the vocabulary is as large as Qwen3's;
//! 4. unused padding tokens `[PAD<id>]` up to the requested size.

use std::collections::HashSet;

use super::rng::Rng;
use crate::tokenizer::{self, TokenType};

/// Token type of an ordinary token (llama.cpp's `LLAMA_TOKEN_TYPE_NORMAL`).
pub const TOKEN_TYPE_NORMAL: i32 = TokenType::Normal.code();
/// Token type of a control token such as `<|im_end|>`.
pub const TOKEN_TYPE_CONTROL: i32 = TokenType::Control.code();
/// Token type of an added token that is matched in text but is not a
/// control token, such as `<think>`.
pub const TOKEN_TYPE_USER_DEFINED: i32 = TokenType::UserDefined.code();
/// Token type of padding that no text maps to.
pub const TOKEN_TYPE_UNUSED: i32 = TokenType::Unused.code();

/// Qwen3's added tokens, in id order, with their token types.
pub const ADDED_TOKENS: [(&str, i32); 26] = [
    ("<|endoftext|>", TOKEN_TYPE_CONTROL),
    ("<|im_start|>", TOKEN_TYPE_CONTROL),
    ("<|im_end|>", TOKEN_TYPE_CONTROL),
    ("<|object_ref_start|>", TOKEN_TYPE_CONTROL),
    ("<|object_ref_end|>", TOKEN_TYPE_CONTROL),
    ("<|box_start|>", TOKEN_TYPE_CONTROL),
    ("<|box_end|>", TOKEN_TYPE_CONTROL),
    ("<|quad_start|>", TOKEN_TYPE_CONTROL),
    ("<|quad_end|>", TOKEN_TYPE_CONTROL),
    ("<|vision_start|>", TOKEN_TYPE_CONTROL),
    ("<|vision_end|>", TOKEN_TYPE_CONTROL),
    ("<|vision_pad|>", TOKEN_TYPE_CONTROL),
    ("<|image_pad|>", TOKEN_TYPE_CONTROL),
    ("<|video_pad|>", TOKEN_TYPE_CONTROL),
    ("<tool_call>", TOKEN_TYPE_USER_DEFINED),
    ("</tool_call>", TOKEN_TYPE_USER_DEFINED),
    ("<|fim_prefix|>", TOKEN_TYPE_CONTROL),
    ("<|fim_middle|>", TOKEN_TYPE_CONTROL),
    ("<|fim_suffix|>", TOKEN_TYPE_CONTROL),
    ("<|fim_pad|>", TOKEN_TYPE_CONTROL),
    ("<|repo_name|>", TOKEN_TYPE_CONTROL),
    ("<|file_sep|>", TOKEN_TYPE_CONTROL),
    ("<tool_response>", TOKEN_TYPE_USER_DEFINED),
    ("</tool_response>", TOKEN_TYPE_USER_DEFINED),
    ("<think>", TOKEN_TYPE_USER_DEFINED),
    ("</think>", TOKEN_TYPE_USER_DEFINED),
];

/// Qwen3's id of `<|endoftext|>`, its first added token: the number of
/// byte and merged tokens in its vocabulary.
pub const QWEN3_FIRST_ADDED_ID: usize = 151_643;

/// Ids a small vocabulary keeps after its byte and merged tokens: the 26
/// added tokens and 6 padding tokens (the layout of the repository's tiny
/// reference model, whose `<|endoftext|>` is id 480 of 512).
const SMALL_TAIL: usize = 32;

/// The smallest vocabulary: the 256 byte tokens and the added tokens.
pub const MIN_VOCAB: usize = 256 + ADDED_TOKENS.len();

/// Longest merged token, in bytes: real BPE vocabularies rarely go past
/// this, and the cap keeps the metadata small.
const MAX_TOKEN_BYTES: usize = 16;

/// Letters that extend word-like tokens, most frequent first (repeats
/// weight the draw).
const LETTERS: &[u8] = b"eeettaaooiinnsshhrrdlcumwfgypbvkjxqz";

/// A byte-level BPE vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vocab {
    /// Token strings, by id, in byte-level unicode (see
    /// [`byte_to_unicode`]); added and padding tokens are plain text.
    pub tokens: Vec<String>,
    /// Token types, by id (`TOKEN_TYPE_*`).
    pub types: Vec<i32>,
    /// Merges in rank order, each `"left right"` in byte-level unicode; the
    /// merge of rank `r` makes token `256 + r`.
    pub merges: Vec<String>,
    /// Beginning-of-sequence id (`<|endoftext|>`, as in Qwen3).
    pub bos: u32,
    /// End-of-sequence id (`<|im_end|>`, Qwen3's end of a chat turn).
    pub eos: u32,
    /// Padding id (`<|endoftext|>`).
    pub pad: u32,
}

/// GPT-2's byte-to-unicode table: printable bytes stand for themselves,
/// the other 68 (control characters, space, DEL, NBSP, soft hyphen) take
/// the code points from U+0100 on, in byte order, so every byte string is
/// spelled by printable characters and a space (`Ġ`) can never be confused
/// with the one separating a merge's two parts. The tokenizer's own table,
/// so a synthetic vocabulary is spelled as the tokenizer reads it.
pub fn byte_to_unicode(b: u8) -> char {
    tokenizer::byte_to_char(b)
}

/// The byte `c` stands for in GPT-2's table, or `None` for a character
/// outside it.
pub fn unicode_to_byte(c: char) -> Option<u8> {
    tokenizer::char_to_byte(c)
}

/// The 256 bytes in token order: the self-mapped ones first, in byte
/// order, then the others (GPT-2's table order).
pub fn byte_token_order() -> [u8; 256] {
    let mut order = [0u8; 256];
    let bytes = (0..=255u8)
        .filter(|&b| tokenizer::is_direct(b))
        .chain((0..=255u8).filter(|&b| !tokenizer::is_direct(b)));
    for (slot, b) in order.iter_mut().zip(bytes) {
        *slot = b;
    }
    order
}

/// How many byte and merged tokens a vocabulary of `size` ids has: Qwen3's
/// 151643 when it fits with the added tokens, else all but 32 ids.
fn normal_count(size: usize) -> usize {
    if size >= QWEN3_FIRST_ADDED_ID + ADDED_TOKENS.len() {
        QWEN3_FIRST_ADDED_ID
    } else {
        size.saturating_sub(SMALL_TAIL).max(256)
    }
}

/// The seeded vocabulary of `vocab_size` ids (at least [`MIN_VOCAB`]: a
/// smaller size is raised to it, since the byte and added tokens are
/// needed).
///
/// For a size of at least 151669 the added tokens sit at Qwen3's ids
/// (`<|endoftext|>` = 151643, `<|im_start|>` = 151644, `<|im_end|>` =
/// 151645, ... `</think>` = 151668); a smaller one keeps the last 32 ids for
/// the added tokens and 6 padding tokens. The same arguments always give the
/// same vocabulary.
pub fn vocab(vocab_size: usize, seed: u64) -> Vocab {
    let size = vocab_size.max(MIN_VOCAB);
    let normal = normal_count(size);
    let mut tokens: Vec<String> = Vec::with_capacity(size);
    let mut types = Vec::with_capacity(size);
    let mut merges = Vec::with_capacity(normal - 256);
    // Byte length of each token, to cap merged tokens.
    let mut lens: Vec<u8> = Vec::with_capacity(normal);
    let order = byte_token_order();
    let mut index_of_byte = [0usize; 256];
    for (id, &b) in order.iter().enumerate() {
        tokens.push(byte_to_unicode(b).to_string());
        index_of_byte[usize::from(b)] = id;
        lens.push(1);
    }
    types.resize(normal, TOKEN_TYPE_NORMAL);
    let mut seen: HashSet<String> = tokens.iter().cloned().collect();
    // Word-like tokens: a letter or the space marker, then letters.
    let mut wordy: Vec<usize> = std::iter::once(b' ')
        .chain(b'a'..=b'z')
        .map(|b| index_of_byte[usize::from(b)])
        .collect();
    let mut rng = Rng::new(seed, u64::MAX, 0);
    while tokens.len() < normal {
        let kind = rng.below(8);
        let (left, right) = match kind {
            // Mostly a word-like token and a letter, so English merges.
            0..=4 => (
                wordy[rng.below(wordy.len())],
                index_of_byte[usize::from(LETTERS[rng.below(LETTERS.len())])],
            ),
            // Sometimes any token and any byte, sometimes any two tokens.
            5 | 6 => (rng.below(tokens.len()), rng.below(256)),
            _ => (rng.below(tokens.len()), rng.below(tokens.len())),
        };
        let len = usize::from(lens[left]) + usize::from(lens[right]);
        if len > MAX_TOKEN_BYTES {
            continue;
        }
        let joined = format!("{}{}", tokens[left], tokens[right]);
        if seen.contains(&joined) {
            continue;
        }
        if kind <= 4 {
            wordy.push(tokens.len());
        }
        merges.push(format!("{} {}", tokens[left], tokens[right]));
        seen.insert(joined.clone());
        tokens.push(joined);
        lens.push(len as u8);
    }
    let first_added = tokens.len();
    for (text, ty) in ADDED_TOKENS {
        tokens.push(text.to_owned());
        types.push(ty);
    }
    while tokens.len() < size {
        tokens.push(format!("[PAD{}]", tokens.len()));
        types.push(TOKEN_TYPE_UNUSED);
    }
    let id = |offset: usize| (first_added + offset) as u32;
    Vocab {
        tokens,
        types,
        merges,
        bos: id(0),
        eos: id(2),
        pad: id(0),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The invariants a byte-level BPE loader relies on.
    fn check(v: &Vocab, size: usize) {
        assert_eq!(v.tokens.len(), size);
        assert_eq!(v.types.len(), size);
        let order = byte_token_order();
        for (id, &b) in order.iter().enumerate() {
            assert_eq!(v.tokens[id], byte_to_unicode(b).to_string());
            assert_eq!(unicode_to_byte(byte_to_unicode(b)), Some(b));
        }
        let ids: HashMap<&str, usize> = v
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i))
            .collect();
        assert_eq!(ids.len(), size, "token strings are unique");
        for (rank, merge) in v.merges.iter().enumerate() {
            let made = 256 + rank;
            let (left, right) = merge.split_once(' ').expect("two parts");
            assert!(!right.contains(' '));
            assert!(ids[left] < made && ids[right] < made, "parts exist earlier");
            assert_eq!(v.tokens[made], format!("{left}{right}"));
            assert!(v.tokens[made].chars().all(|c| unicode_to_byte(c).is_some()));
            assert_eq!(v.types[made], TOKEN_TYPE_NORMAL);
        }
        let first = 256 + v.merges.len();
        for (i, (text, ty)) in ADDED_TOKENS.iter().enumerate() {
            assert_eq!(v.tokens[first + i], *text);
            assert_eq!(v.types[first + i], *ty);
        }
        for id in first + ADDED_TOKENS.len()..size {
            assert_eq!(v.tokens[id], format!("[PAD{id}]"));
            assert_eq!(v.types[id], TOKEN_TYPE_UNUSED);
        }
        assert_eq!(v.tokens[v.bos as usize], "<|endoftext|>");
        assert_eq!(v.tokens[v.pad as usize], "<|endoftext|>");
        assert_eq!(v.tokens[v.eos as usize], "<|im_end|>");
    }

    #[test]
    fn byte_table_is_gpt2s() {
        assert_eq!(byte_to_unicode(b'A'), 'A');
        assert_eq!(byte_to_unicode(0), '\u{100}');
        assert_eq!(byte_to_unicode(b' '), 'Ġ');
        assert_eq!(byte_to_unicode(b'\n'), 'Ċ');
        assert_eq!(byte_to_unicode(0xAD), '\u{143}');
        assert_eq!(unicode_to_byte('x'), Some(b'x'));
        assert_eq!(unicode_to_byte(' '), None);
        let order = byte_token_order();
        assert_eq!(order[0], b'!');
        assert_eq!(order[187], 0xFF);
        assert_eq!(order[188], 0);
        let mut sorted = order;
        sorted.sort_unstable();
        assert!(sorted.iter().enumerate().all(|(i, &b)| usize::from(b) == i));
    }

    #[test]
    fn small_vocab_matches_the_reference_layout() {
        let v = vocab(512, 7);
        check(&v, 512);
        assert_eq!((v.bos, v.eos, v.pad), (480, 482, 480));
        assert_eq!(v.merges.len(), 224);
        assert_eq!(v, vocab(512, 7));
        assert_ne!(v.merges, vocab(512, 8).merges);
    }

    #[test]
    fn most_merges_are_word_like() {
        let v = vocab(4096, 0);
        let word_like = |t: &str| {
            let t = t.strip_prefix('Ġ').unwrap_or(t);
            !t.is_empty() && t.bytes().all(|b| b.is_ascii_lowercase())
        };
        let n = v.tokens[256..256 + v.merges.len()]
            .iter()
            .filter(|t| word_like(t))
            .count();
        assert!(n * 2 > v.merges.len(), "{n} of {}", v.merges.len());
        assert!(v.tokens.iter().any(|t| t.len() == 2 && word_like(t)));
    }

    #[test]
    fn smallest_vocab_has_no_merges() {
        let v = vocab(0, 1);
        check(&v, MIN_VOCAB);
        assert!(v.merges.is_empty());
        assert_eq!(v.bos, 256);
    }

    #[test]
    fn qwen3_sized_vocab_uses_qwen3_ids() {
        let v = vocab(151_936, 0);
        check(&v, 151_936);
        assert_eq!((v.bos, v.eos, v.pad), (151_643, 151_645, 151_643));
        assert_eq!(v.tokens[151_644], "<|im_start|>");
        assert_eq!(v.tokens[151_668], "</think>");
        assert_eq!(v.tokens[151_935], "[PAD151935]");
    }
}
