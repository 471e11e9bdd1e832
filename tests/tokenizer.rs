//! The tokenizer on a small hand-built vocabulary: expected ids for each
//! rule of the qwen2 pre-tokenizer, added tokens, NFC, decoding, streaming,
//! hostile metadata; the splitter against the regex itself; round trips.
//!
//! The vocabulary (see [`hand_vocab`]): ids 0..=255 are the single bytes,
//! id = byte value (`a` = 97, space = 32, `\n` = 10), so most expected ids
//! below read as bytes. Then the merges, in rank order, each creating the
//! next id:
//!
//! | id | token | from |   | id | token | from |
//! |---|---|---|---|---|---|---|
//! | 256 | `'s` | `'` `s` | | 266 | `ll` | `l` `l` |
//! | 257 | `'t` | `'` `t` | | 267 | `hell` | `he` `ll` |
//! | 258 | `'l` | `'` `l` | | 268 | `hello` | `hell` `o` |
//! | 259 | `'ll` | `'l` `l` | | 269 | `ĠĠ` (2 spaces) | `Ġ` `Ġ` |
//! | 260 | `Ġw` | `Ġ` `w` | | 270 | `ĊĊ` (2 newlines) | `Ċ` `Ċ` |
//! | 261 | `or` | `o` `r` | | 271 | `!!` | `!` `!` |
//! | 262 | `Ġwor` | `Ġw` `or` | | 272 | `Ġ!!` | `Ġ` `!!` |
//! | 263 | `ld` | `l` `d` | | 273 | `'S` | `'` `S` |
//! | 264 | `Ġworld` | `Ġwor` `ld` | | 274 | `Ġx` | `Ġ` `x` |
//! | 265 | `he` | `h` `e` | | 275 | `12` | `1` `2` |
//!
//! Then the added tokens: 276 `<|im_start|>` and 277 `<|im_end|>`
//! (control), 278 `<think>` (user-defined), 279 `[PAD279]` (unused).

use std::collections::HashMap;

use inferno_cpu::gguf::{Array, Gguf, Writer};
use inferno_cpu::tokenizer::{
    byte_level_text, Qwen2Splitter, TokenType, Tokenizer, TokenizerError, TokenizerParts,
};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

const MERGES: [(&str, &str); 20] = [
    ("'", "s"),
    ("'", "t"),
    ("'", "l"),
    ("'l", "l"),
    ("Ġ", "w"),
    ("o", "r"),
    ("Ġw", "or"),
    ("l", "d"),
    ("Ġwor", "ld"),
    ("h", "e"),
    ("l", "l"),
    ("he", "ll"),
    ("hell", "o"),
    ("Ġ", "Ġ"),
    ("Ċ", "Ċ"),
    ("!", "!"),
    ("Ġ", "!!"),
    ("'", "S"),
    ("Ġ", "x"),
    ("1", "2"),
];

const IM_START: u32 = 276;
const IM_END: u32 = 277;
const THINK: u32 = 278;

fn hand_parts() -> TokenizerParts {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_level_text(&[b])).collect();
    let mut merges = Vec::new();
    for (a, b) in MERGES {
        tokens.push(format!("{a}{b}"));
        merges.push(format!("{a} {b}"));
    }
    let mut types = vec![1; tokens.len()];
    for (text, ty) in [
        ("<|im_start|>", 3),
        ("<|im_end|>", 3),
        ("<think>", 4),
        ("[PAD279]", 5),
    ] {
        tokens.push(text.to_owned());
        types.push(ty);
    }
    TokenizerParts {
        pre: "qwen2".into(),
        tokens,
        token_types: types,
        merges,
        bos: None,
        eos: Some(IM_END),
        eot: None,
        pad: None,
    }
}

fn hand_vocab() -> Tokenizer {
    Tokenizer::from_parts(&hand_parts()).expect("the hand vocabulary builds")
}

fn enc(text: &str) -> Vec<u32> {
    hand_vocab().encode(text, true)
}

#[test]
fn the_table_in_the_docs_is_right() {
    let tok = hand_vocab();
    assert_eq!(tok.vocab_size(), 280);
    assert_eq!(tok.token_to_piece(97), Some(&b"a"[..]));
    assert_eq!(tok.token_to_piece(264), Some(&b" world"[..]));
    assert_eq!(tok.token_to_piece(270), Some(&b"\n\n"[..]));
    assert_eq!(tok.token_to_piece(275), Some(&b"12"[..]));
    assert_eq!(tok.token_to_piece(IM_START), Some(&b"<|im_start|>"[..]));
    assert_eq!(tok.token_to_piece(279), Some(&b""[..]));
    assert_eq!(tok.token_to_piece(280), None);
    assert_eq!(tok.token_type(THINK), Some(TokenType::UserDefined));
    assert_eq!(tok.added_token_id("<|im_end|>"), Some(IM_END));
}

// Rule 1: `(?i:'s|'t|'re|'ve|'m|'ll|'d)`, contractions in any case, split
// from the word before them.
#[test]
fn rule_1_contractions() {
    // "it" "'s": no merge joins i and t.
    assert_eq!(enc("it's"), [105, 116, 256]);
    // "don" "'t"
    assert_eq!(enc("don't"), [100, 111, 110, 257]);
    // Upper case: "IT" "'S" (273), "WE" "'LL" (no 'L merge: three bytes).
    assert_eq!(enc("IT'S"), [73, 84, 273]);
    assert_eq!(enc("WE'LL"), [87, 69, 39, 76, 76]);
    // "'ll" is one piece even before more letters: "'ll" "ama".
    assert_eq!(enc("'llama"), [259, 97, 109, 97]);
    // Not a contraction: the quote leads the letters (rule 2), so the
    // "'s" merge cannot apply across the piece "'so".
    assert_eq!(enc("'so"), [256, 111]);
    assert_eq!(enc("'x"), [39, 120]);
}

// Rule 2: `[^\r\n\p{L}\p{N}]?\p{L}+`, a letter run with at most one
// leading non-letter, non-digit, non-newline.
#[test]
fn rule_2_letters_with_one_leading_character() {
    // "hello" " world": the space belongs to the word after it.
    assert_eq!(enc("hello world"), [268, 264]);
    // A tab leads a word as a space does; "Ġw" needs a space, so bytes.
    assert_eq!(enc("\tworld"), [9, 119, 261, 263]);
    // A newline never leads a word: "\n" "world".
    assert_eq!(enc("\nworld"), [10, 119, 261, 263]);
    // A digit never leads a word: "1" "x" (not "1x").
    assert_eq!(enc("1x"), [49, 120]);
}

// Rule 3: `\p{N}`, one digit at a time, so the merge "12" never applies.
#[test]
fn rule_3_single_digits() {
    assert_eq!(enc("12"), [49, 50]);
    assert_eq!(enc("x123"), [120, 49, 50, 51]);
    // Other numbers too: "²" (U+00B2) is C2 B2.
    assert_eq!(enc("1²"), [49, 194, 178]);
}

// Rule 4: ` ?[^\s\p{L}\p{N}]+[\r\n]*`, punctuation runs with one optional
// leading space and the newlines after them.
#[test]
fn rule_4_punctuation_runs() {
    // "hi" " !!\n\n": the space, the run and both newlines are one piece.
    assert_eq!(enc("hi !!\n\n"), [104, 105, 272, 270]);
    // Only U+0020 leads: a tab stays its own piece.
    assert_eq!(enc("\t!!"), [9, 271]);
    // No leading space: "!!" then " world".
    assert_eq!(enc("!! world"), [271, 264]);
}

// Rule 5: `\s*[\r\n]+`, whitespace up to and including its last newline.
#[test]
fn rule_5_whitespace_through_the_last_newline() {
    // "a" " \n\n": the space joins the newlines, which still merge.
    assert_eq!(enc("a \n\n"), [97, 32, 270]);
    // "\n\n" " " " x": spaces after the last newline go to the next rules.
    assert_eq!(enc("\n\n  x"), [270, 32, 274]);
    assert_eq!(enc("\r\n"), [13, 10]);
}

// Rule 6: `\s+(?!\S)`, a whitespace run minus the character that leads the
// next word; or all of it at the end of the text.
#[test]
fn rule_6_whitespace_not_followed_by_text() {
    // "a" "  " " world": three spaces, the last leads "world".
    assert_eq!(enc("a   world"), [97, 269, 264]);
    // At the end: all four spaces, merged in pairs.
    assert_eq!(enc("a    "), [97, 269, 269]);
}

// Rule 7: `\s+`, a lone whitespace before something that is not a letter.
#[test]
fn rule_7_remaining_whitespace() {
    // "a" " " "1": a space cannot lead a digit.
    assert_eq!(enc("a 1"), [97, 32, 49]);
    // "x" "  " " 1"?  No: rule 6 keeps "  " minus the last space, then rule
    // 7 takes the lone space before the digit.
    assert_eq!(enc("x   1"), [120, 269, 32, 49]);
}

#[test]
fn added_tokens_are_matched_whole_and_on_request() {
    let tok = hand_vocab();
    let chat = "<|im_start|>hello<|im_end|>";
    assert_eq!(tok.encode(chat, true), [IM_START, 268, IM_END]);
    // Without `special`, control tokens are plain text: "<|" "im" "_start" "|>".
    let plain = tok.encode(chat, false);
    assert!(!plain.contains(&IM_START) && !plain.contains(&IM_END));
    assert_eq!(&plain[..4], [60, 124, 105, 109]);
    assert_eq!(tok.decode(&plain).unwrap(), chat.as_bytes());
    // User-defined tokens are matched either way.
    assert_eq!(tok.encode("<think>hello", false), [THINK, 268]);
    assert_eq!(tok.encode("<think>hello", true), [THINK, 268]);
    // An added token splits the text around it for the pre-tokenizer.
    assert_eq!(tok.encode("hello<think> world", true), [268, THINK, 264]);
    // A partial marker is text.
    assert_eq!(tok.encode("<|im_", true), [60, 124, 105, 109, 95]);
}

/// Added tokens are matched leftmost-longest, as Hugging Face matches
/// them: where one added token is a prefix of another, the longer one wins
/// wherever the text holds it, and the shorter one where it does not.
#[test]
fn an_added_token_inside_a_longer_one_yields_to_it() {
    const EMPTY_THINK: u32 = 280; // `<think></think>`, user-defined
    const IM_START_ASSISTANT: u32 = 281; // `<|im_start|>assistant`, control
    let mut parts = hand_parts();
    for (text, ty) in [("<think></think>", 4), ("<|im_start|>assistant", 3)] {
        parts.tokens.push(text.to_owned());
        parts.token_types.push(ty);
    }
    let tok = Tokenizer::from_parts(&parts).unwrap();
    let with = |head: &[u32], text: &str, special: bool| {
        let mut ids = head.to_vec();
        ids.extend(tok.encode(text, special));
        ids
    };
    for special in [true, false] {
        assert_eq!(tok.encode("<think></think>", special), [EMPTY_THINK]);
        assert_eq!(
            tok.encode("<think><think></think>hello", special),
            [THINK, EMPTY_THINK, 268]
        );
        assert_eq!(
            tok.encode("<think></think", special),
            with(&[THINK], "</think", special)
        );
        assert_eq!(
            tok.encode("hello<think></think><think>", special),
            [268, EMPTY_THINK, THINK]
        );
    }
    assert_eq!(
        tok.encode("<|im_start|>assistant\nhello", true),
        with(&[IM_START_ASSISTANT], "\nhello", true)
    );
    assert_eq!(
        tok.encode("<|im_start|>user", true),
        with(&[IM_START], "user", true)
    );
    assert_eq!(
        tok.encode("<|im_start|>assistant<|im_start|>", true),
        [IM_START_ASSISTANT, IM_START]
    );
    // Without `special`, control tokens are text, long or short.
    let plain = tok.encode("<|im_start|>assistant", false);
    assert!(!plain.contains(&IM_START) && !plain.contains(&IM_START_ASSISTANT));
}

#[test]
fn nfc_applies_between_added_tokens_only() {
    let tok = hand_vocab();
    // "e" + U+0301 composes to "é" (C3 A9) before BPE (llama.cpp would
    // encode the decomposed bytes 65 CC 81).
    assert_eq!(tok.encode("e\u{301}", true), [195, 169]);
    assert_eq!(tok.normalize("e\u{301}", true), "é");
    // A combining mark right after an added token stays uncomposed: the
    // token is found in the raw text first.
    assert_eq!(
        tok.normalize("<think>\u{301}", true),
        "<think>\u{301}".to_owned()
    );
    assert_eq!(tok.encode("<think>\u{301}", true), [THINK, 204, 129]);
}

#[test]
fn special_ids_and_end_of_generation() {
    let tok = hand_vocab();
    assert_eq!(tok.eos(), Some(IM_END));
    assert_eq!(tok.eot(), Some(IM_END)); // found by its text
    assert_eq!(tok.bos(), None);
    assert!(tok.is_end_of_generation(IM_END));
    assert!(!tok.is_end_of_generation(IM_START));
    assert!(!tok.is_end_of_generation(97));
}

#[test]
fn decode_refuses_unknown_ids_and_streams_whole_characters() {
    let tok = hand_vocab();
    assert!(matches!(
        tok.decode(&[97, 280]),
        Err(TokenizerError::IdOutOfRange {
            id: 280,
            vocab_size: 280
        })
    ));
    // "€" is E2 82 AC, one byte token each: nothing until the last.
    let mut stream = tok.stream_decoder();
    assert_eq!(stream.push(0xE2).unwrap(), "");
    assert_eq!(stream.push(0x82).unwrap(), "");
    assert_eq!(stream.pending(), [0xE2, 0x82]);
    assert_eq!(stream.push(0xAC).unwrap(), "€");
    assert!(stream.push(280).is_err());
    // An invalid byte is replaced at once; an incomplete tail at the end.
    assert_eq!(stream.push(0xFF).unwrap(), "\u{FFFD}");
    assert_eq!(stream.push(264).unwrap(), " world");
    assert_eq!(stream.push(0xE2).unwrap(), "");
    assert_eq!(stream.finish(), "\u{FFFD}");
    assert_eq!(stream.finish(), "");
}

// ---------------------------------------------------------------------------
// Hostile metadata.

fn parts_err(edit: impl FnOnce(&mut TokenizerParts)) -> TokenizerError {
    let mut parts = hand_parts();
    edit(&mut parts);
    Tokenizer::from_parts(&parts).expect_err("must be refused")
}

#[test]
fn hostile_parts_are_typed_errors() {
    let e = parts_err(|p| p.pre = "llama-bpe".into());
    assert!(matches!(&e, TokenizerError::UnsupportedPre { pre } if pre == "llama-bpe"));
    assert!(e.to_string().contains("llama-bpe"));
    let e = parts_err(|p| p.tokens.push("a".into()));
    assert!(matches!(e, TokenizerError::TypeCount { .. }));
    let e = parts_err(|p| {
        p.tokens.push("a".into());
        p.token_types.push(1);
    });
    assert!(matches!(
        e,
        TokenizerError::DuplicateToken {
            id: 280,
            first: 97,
            ..
        }
    ));
    let e = parts_err(|p| {
        p.tokens.push("<think>".into());
        p.token_types.push(3);
    });
    assert!(matches!(
        e,
        TokenizerError::DuplicateToken {
            id: 280,
            first: 278,
            ..
        }
    ));
    let e = parts_err(|p| p.token_types[5] = 7);
    assert!(matches!(
        e,
        TokenizerError::UnknownTokenType {
            id: 5,
            token_type: 7
        }
    ));
    let e = parts_err(|p| p.token_types[5] = -1);
    assert!(matches!(e, TokenizerError::UnknownTokenType { id: 5, .. }));
    let e = parts_err(|p| p.tokens[260] = "x y".into());
    assert!(matches!(e, TokenizerError::NotByteLevel { id: 260, .. }));
    let e = parts_err(|p| p.tokens[120] = "é€".into());
    assert!(matches!(e, TokenizerError::NotByteLevel { id: 120, .. }));
    let e = parts_err(|p| p.token_types[10] = 5);
    assert!(matches!(e, TokenizerError::MissingByte { byte: 10 }));
    let e = parts_err(|p| p.tokens[256] = String::new());
    assert!(matches!(e, TokenizerError::EmptyToken { id: 256 }));
    let e = parts_err(|p| p.tokens.clear());
    assert!(matches!(
        e,
        TokenizerError::EmptyVocab | TokenizerError::TypeCount { .. }
    ));
    let e = parts_err(|p| {
        p.tokens.clear();
        p.token_types.clear();
    });
    assert!(matches!(e, TokenizerError::EmptyVocab));
    for bad in ["ab", "a  b", " a", "a ", "a b c", ""] {
        let e = parts_err(|p| p.merges.push(bad.into()));
        assert!(
            matches!(e, TokenizerError::BadMerge { index: 20, .. }),
            "{bad:?}: {e}"
        );
    }
    let e = parts_err(|p| p.merges.push("<think> a".into()));
    assert!(matches!(&e, TokenizerError::MergeUnknownPart { part, .. } if part == "<think>"));
    let e = parts_err(|p| p.merges.push("q z".into()));
    assert!(matches!(
        e,
        TokenizerError::MergeUnknownResult { index: 20, .. }
    ));
    let e = parts_err(|p| p.eos = Some(280));
    assert!(matches!(
        e,
        TokenizerError::SpecialIdOutOfRange {
            id: 280,
            vocab_size: 280,
            ..
        }
    ));
    // A repeated merge keeps its first rank; no error.
    let mut parts = hand_parts();
    parts.merges.push("h e".into());
    assert!(Tokenizer::from_parts(&parts).is_ok());
}

fn gguf_with(edit: impl FnOnce(&mut Writer<'_>)) -> Vec<u8> {
    let parts = hand_parts();
    let mut w = Writer::new();
    w.add_str("tokenizer.ggml.model", "gpt2").unwrap();
    w.add_str("tokenizer.ggml.pre", "qwen2").unwrap();
    w.add_array("tokenizer.ggml.tokens", Array::String(parts.tokens))
        .unwrap();
    w.add_array("tokenizer.ggml.token_type", Array::I32(parts.token_types))
        .unwrap();
    w.add_array("tokenizer.ggml.merges", Array::String(parts.merges))
        .unwrap();
    w.add_u32("tokenizer.ggml.eos_token_id", IM_END).unwrap();
    edit(&mut w);
    w.to_bytes().unwrap()
}

fn from_gguf(bytes: &[u8]) -> Result<Tokenizer, TokenizerError> {
    Tokenizer::from_gguf(&Gguf::parse(bytes).unwrap())
}

/// A writer holding only the given keys of the good file, others replaced.
fn gguf_replacing(key: &str, value: inferno_cpu::gguf::Value) -> Vec<u8> {
    let good = gguf_with(|_| {});
    let g = Gguf::parse(&good).unwrap();
    let mut w = Writer::new();
    for (k, v) in g.metadata().iter() {
        if k != key {
            w.add(k, v.clone()).unwrap();
        }
    }
    w.add(key, value).unwrap();
    w.to_bytes().unwrap()
}

#[test]
fn from_gguf_reads_the_keys_and_names_bad_values() {
    use inferno_cpu::gguf::Value;
    let tok = from_gguf(&gguf_with(|_| {})).unwrap();
    assert_eq!(tok.encode("hello world", true), [268, 264]);
    assert_eq!(tok.eos(), Some(IM_END));

    let e = from_gguf(&gguf_replacing(
        "tokenizer.ggml.model",
        Value::String("llama".into()),
    ))
    .unwrap_err();
    assert!(matches!(&e, TokenizerError::UnsupportedModel { model } if model == "llama"));
    assert!(e.to_string().contains("\"llama\""));
    let e = from_gguf(&gguf_replacing(
        "tokenizer.ggml.pre",
        Value::String("deepseek-llm".into()),
    ))
    .unwrap_err();
    assert!(e.to_string().contains("deepseek-llm"), "{e}");
    let e = from_gguf(&gguf_replacing(
        "tokenizer.ggml.tokens",
        Value::Array(Array::U32(vec![1, 2])),
    ))
    .unwrap_err();
    assert!(matches!(e, TokenizerError::Metadata(_)), "{e}");
    assert!(e.to_string().contains("tokenizer.ggml.tokens"), "{e}");
    let e = from_gguf(&gguf_replacing(
        "tokenizer.ggml.token_type",
        Value::Array(Array::U8(vec![1; 280])),
    ))
    .unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.token_type"), "{e}");
    let e = from_gguf(&gguf_replacing("tokenizer.ggml.merges", Value::U32(3))).unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.merges"), "{e}");
    let e = from_gguf(&gguf_replacing(
        "tokenizer.ggml.eos_token_id",
        Value::String("x".into()),
    ))
    .unwrap_err();
    assert!(matches!(e, TokenizerError::SpecialIdType { .. }), "{e}");
    let e = from_gguf(&gguf_replacing(
        "tokenizer.ggml.eos_token_id",
        Value::I32(-1),
    ))
    .unwrap_err();
    assert!(
        matches!(e, TokenizerError::SpecialIdOutOfRange { id: -1, .. }),
        "{e}"
    );
    let e = from_gguf(&gguf_replacing(
        "tokenizer.ggml.bos_token_id",
        Value::U64(u64::MAX),
    ))
    .unwrap_err();
    assert!(
        matches!(e, TokenizerError::SpecialIdOutOfRange { .. }),
        "{e}"
    );
    // Missing keys.
    let e = from_gguf(&Writer::new().to_bytes().unwrap()).unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.model"), "{e}");
    // Without token types every token is normal: the added tokens must then
    // be byte-level text, and "<|im_start|>" is, so it builds, as text.
    let g = gguf_with(|_| {});
    let parsed = Gguf::parse(&g).unwrap();
    let mut w = Writer::new();
    for (k, v) in parsed.metadata().iter() {
        if k != "tokenizer.ggml.token_type" {
            w.add(k, v.clone()).unwrap();
        }
    }
    let tok = from_gguf(&w.to_bytes().unwrap()).unwrap();
    assert_eq!(tok.token_type(IM_START), Some(TokenType::Normal));
}

// ---------------------------------------------------------------------------
// Property tests.

/// The qwen2 regex, run by a backtracking engine with look-ahead.
fn regex_split(text: &str) -> Vec<String> {
    thread_local! {
        static RE: fancy_regex::Regex = fancy_regex::Regex::new(
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        )
        .unwrap();
    }
    RE.with(|re| {
        re.find_iter(text)
            .map(|m| m.unwrap().as_str().to_owned())
            .collect()
    })
}

/// Strings rich in what the rules distinguish: letters of several scripts,
/// digits and other numbers, punctuation, every kind of whitespace,
/// newlines, quotes for contractions, combining marks, emoji with joiners.
fn tricky_text() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "a",
        "Z",
        "é",
        "ß",
        "ſ",
        "東",
        "한",
        "я",
        "ǅ",
        "1",
        "9",
        "²",
        "½",
        "٣",
        "Ⅻ",
        " ",
        "  ",
        "\t",
        "\n",
        "\r",
        "\r\n",
        "\u{a0}",
        "\u{3000}",
        "\u{2028}",
        "\u{85}",
        "\u{b}",
        "\u{c}",
        "'",
        "'s",
        "'S",
        "'t",
        "'re",
        "'RE",
        "'ve",
        "'m",
        "'ll",
        "'LL",
        "'d",
        "'ſ",
        "!",
        "?",
        ".",
        "(",
        "\"",
        "-",
        "_",
        "<",
        "|",
        ">",
        "\u{301}",
        "\u{327}",
        "e\u{301}",
        "\u{200d}",
        "\u{fe0f}",
        "😀",
        "👍🏽",
        "👨‍👩‍👧",
        "🇺🇸",
        "\0",
        "\u{7f}",
        "\u{ad}",
        "\u{fffd}",
        "\u{e000}",
        "<think>",
        "<|im_end|>",
        "<|im_start|>",
    ]);
    prop_oneof![
        prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat()),
        any::<String>(),
        "[ \t\n\r0-9a-z']{0,60}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn splitter_matches_the_regex(text in tricky_text()) {
        let ours: Vec<&str> = Qwen2Splitter::new(&text).collect();
        prop_assert_eq!(ours.concat(), text.clone());
        prop_assert_eq!(ours, regex_split(&text));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn decode_of_encode_is_the_normalized_text(text in tricky_text(), special in any::<bool>()) {
        let tok = hand_vocab();
        let ids = tok.encode(&text, special);
        let normalized = tok.normalize(&text, special);
        prop_assert_eq!(tok.decode(&ids).unwrap(), normalized.as_bytes());
        if !text.contains('<') {
            let nfc: String = text.nfc().collect();
            prop_assert_eq!(normalized, nfc);
        }
        // Streamed one id at a time: the same text, never a replacement.
        let mut stream = tok.stream_decoder();
        let mut streamed = String::new();
        for &id in &ids {
            streamed.push_str(&stream.push(id).unwrap());
        }
        streamed.push_str(&stream.finish());
        prop_assert_eq!(streamed, tok.normalize(&text, special));
    }

    #[test]
    fn streaming_any_ids_equals_lossy_decoding(ids in prop::collection::vec(0u32..280, 0..60)) {
        let tok = hand_vocab();
        let mut stream = tok.stream_decoder();
        let mut streamed = String::new();
        for &id in &ids {
            streamed.push_str(&stream.push(id).unwrap());
        }
        streamed.push_str(&stream.finish());
        prop_assert_eq!(streamed, tok.decode_lossy(&ids).unwrap());
    }

    #[test]
    fn long_runs_of_spaces_and_digits(spaces in 0usize..300, digits in 0usize..300, word in "[a-z]{0,5}") {
        let tok = hand_vocab();
        let text = format!("{}{}{word}{}", " ".repeat(spaces), "7".repeat(digits), "\n".repeat(spaces % 7));
        let ids = tok.encode(&text, true);
        prop_assert_eq!(tok.decode(&ids).unwrap(), text.as_bytes());
        prop_assert_eq!(ids.iter().filter(|&&id| id == 55).count(), digits);
    }
}

/// `hand_vocab` built twice gives the same ids: nothing depends on hash
/// order.
#[test]
fn deterministic() {
    let texts = ["hello world", "<|im_start|>x<think>", "a   b\n\n"];
    let a: HashMap<_, _> = texts.iter().map(|t| (*t, enc(t))).collect();
    let b: HashMap<_, _> = texts.iter().map(|t| (*t, enc(t))).collect();
    assert_eq!(a, b);
}
