//! Qwen3's tokenizer: byte-level BPE built from GGUF metadata.
//!
//! [`Tokenizer::from_gguf`] reads what llama.cpp's converter stores:
//!
//! | key | holds |
//! |---|---|
//! | `tokenizer.ggml.model` | `"gpt2"` (byte-level BPE; anything else is [`TokenizerError::UnsupportedModel`]) |
//! | `tokenizer.ggml.pre` | `"qwen2"` (anything else is [`TokenizerError::UnsupportedPre`]) |
//! | `tokenizer.ggml.tokens` | the vocabulary, one string per id |
//! | `tokenizer.ggml.token_type` | one [`TokenType`] (`i32`) per id; absent means all normal |
//! | `tokenizer.ggml.merges` | merges `"a b"`, highest priority first |
//! | `tokenizer.ggml.{bos,eos,eot,padding}_token_id` | optional special ids |
//!
//! # What `encode` does
//!
//! It reproduces Qwen3's Hugging Face tokenizer (the one the model was
//! trained with) step by step:
//!
//! 1. **Added tokens** (types [`TokenType::Control`] and
//!    [`TokenType::UserDefined`]: `<|im_start|>`, `<|im_end|>`,
//!    `<|endoftext|>`, `<think>`, ...) are found whole in the raw text,
//!    leftmost-longest first. With `special = false`, control tokens are
//!    left in the text as plain text, while user-defined ones (`<think>`,
//!    `<tool_call>`) are still matched, as both Hugging Face
//!    (`split_special_tokens`) and llama.cpp (`parse_special = false`) do.
//! 2. **NFC normalization**, which Qwen's `tokenizer.json` specifies, is
//!    applied to each stretch of text between added tokens, never across
//!    one, which is where Hugging Face applies it. llama.cpp skips this
//!    step, so on text that is not already NFC (say `e` followed by a
//!    combining acute accent) its ids differ from the reference and from
//!    this crate's.
//! 3. **Pre-tokenization** splits each stretch into pieces with the `qwen2`
//!    regex (see [`Qwen2Splitter`]).
//! 4. **BPE**: each piece's UTF-8 bytes start as one token per byte and are
//!    merged by rank. Results for short pieces are cached (bounded, behind a
//!    lock that `encode` only ever tries, so `encode` takes `&self` and
//!    threads never wait on each other).
//!
//! [`decode`](Tokenizer::decode) maps ids back to bytes, so
//! `decode(encode(s))` is [`normalize(s)`](Tokenizer::normalize): `s` with
//! the text between added tokens in NFC (plain `nfc(s)` when `s` contains
//! none). [`StreamDecoder`] turns ids into text as they are generated,
//! never splitting a UTF-8 character.
//!
//! # Hostile metadata
//!
//! Every inconsistency is a [`TokenizerError`]: duplicate tokens, merges
//! naming tokens that are not in the vocabulary, missing byte tokens, bad
//! special ids, wrong value types, arrays beyond [`MAX_VOCAB`]. Building
//! validates everything `encode` and `decode` rely on, so neither can fail
//! or panic afterwards on any text (decode only refuses unknown ids).
//!
//! Unicode tables come from the `unicode-normalization` and
//! `unicode-properties` crates; characters assigned in Unicode versions
//! newer than the reference tokenizer's tables may classify differently.

mod bpe;
mod bytelevel;
mod error;
mod hash;
mod pretok;
mod stream;

use std::collections::HashMap;
use std::sync::Mutex;

use aho_corasick::{AhoCorasick, MatchKind};
use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use crate::gguf::{Gguf, Metadata, Value};

pub use error::TokenizerError;
pub use pretok::Qwen2Splitter;
pub use stream::StreamDecoder;

use bpe::{pair_key, Merge, Merges, Scratch};
use hash::SeededState;

/// The BPE cache: merged ids of recently seen pieces.
type Cache = HashMap<Box<[u8]>, Box<[u32]>, SeededState>;

/// Most tokens or merges a tokenizer may have: 64 times the largest real
/// vocabularies (~260k), far below what ids (`u32`) can address; bounds the
/// memory a hostile file can make the builder allocate beyond its own size.
pub const MAX_VOCAB: usize = 1 << 24;

/// Pieces longer than this (in bytes) are merged without the cache: rare,
/// and they would crowd it.
const CACHE_MAX_PIECE: usize = 64;
/// Cached pieces before the cache is emptied and refilled, by default.
const CACHE_CAPACITY: usize = 16_384;

/// Text of control tokens that end a generated turn, besides the eos and
/// eot ids.
const END_OF_GENERATION: [&str; 5] = [
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<end_of_turn>",
];

/// GGUF metadata keys.
const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
const KEY_TYPES: &str = "tokenizer.ggml.token_type";
const KEY_MERGES: &str = "tokenizer.ggml.merges";
const KEY_BOS: &str = "tokenizer.ggml.bos_token_id";
const KEY_EOS: &str = "tokenizer.ggml.eos_token_id";
const KEY_EOT: &str = "tokenizer.ggml.eot_token_id";
const KEY_PAD: &str = "tokenizer.ggml.padding_token_id";

/// `bytes` written in GPT-2's byte-level alphabet, the form normal tokens
/// and merges take in `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`
/// (a space is `Ġ`, a newline `Ċ`): what a vocabulary builder needs.
pub fn byte_level_text(bytes: &[u8]) -> String {
    bytelevel::encode_bytes(bytes)
}

/// The kind of a vocabulary entry (`tokenizer.ggml.token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// 1: an ordinary BPE token, stored in the byte-level alphabet.
    Normal,
    /// 2: the unknown token (byte-level BPE never produces it).
    Unknown,
    /// 3: a special token (`<|im_end|>`): matched in text only when encoding
    /// with `special = true`.
    Control,
    /// 4: an added token (`<think>`): always matched whole in text.
    UserDefined,
    /// 5: a placeholder (`[PAD151900]`): never produced, decodes to nothing.
    Unused,
    /// 6: a byte token `<0xAB>` (SentencePiece style): decodes to that byte.
    Byte,
}

impl TokenType {
    /// The type with GGUF code `code`.
    pub fn from_code(code: i32) -> Option<Self> {
        Some(match code {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => return None,
        })
    }

    /// The GGUF code.
    pub fn code(self) -> i32 {
        match self {
            TokenType::Normal => 1,
            TokenType::Unknown => 2,
            TokenType::Control => 3,
            TokenType::UserDefined => 4,
            TokenType::Unused => 5,
            TokenType::Byte => 6,
        }
    }
}

/// The pre-tokenizers this crate implements (`tokenizer.ggml.pre`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PreTokenizer {
    /// `"qwen2"`: Qwen2 and Qwen3 (see [`Qwen2Splitter`]).
    Qwen2,
}

impl PreTokenizer {
    /// The pre-tokenizer named `name` in `tokenizer.ggml.pre`.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::UnsupportedPre`] naming any other value.
    pub fn from_name(name: &str) -> Result<Self, TokenizerError> {
        match name {
            "qwen2" => Ok(PreTokenizer::Qwen2),
            other => Err(TokenizerError::UnsupportedPre {
                pre: other.to_owned(),
            }),
        }
    }

    /// The name stored in `tokenizer.ggml.pre`.
    pub fn name(self) -> &'static str {
        match self {
            PreTokenizer::Qwen2 => "qwen2",
        }
    }
}

/// Everything a tokenizer is built from, as plain values: what
/// [`Tokenizer::from_gguf`] reads from metadata, for tests, fuzzing and
/// vocabularies from elsewhere.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenizerParts {
    /// The pre-tokenizer's name (`"qwen2"`).
    pub pre: String,
    /// The vocabulary: normal tokens in the byte-level alphabet, added
    /// tokens as plain text.
    pub tokens: Vec<String>,
    /// One [`TokenType`] code per token; empty means all normal.
    pub token_types: Vec<i32>,
    /// Merges `"a b"` in rank order.
    pub merges: Vec<String>,
    /// Beginning-of-sequence id.
    pub bos: Option<u32>,
    /// End-of-sequence id.
    pub eos: Option<u32>,
    /// End-of-turn id.
    pub eot: Option<u32>,
    /// Padding id.
    pub pad: Option<u32>,
}

/// Special ids from metadata, before they are checked against the
/// vocabulary.
#[derive(Clone, Copy, Default)]
struct SpecialIds {
    bos: Option<i64>,
    eos: Option<i64>,
    eot: Option<i64>,
    pad: Option<i64>,
}

/// Added tokens of one matching mode: an automaton and the id of each of its
/// patterns.
struct AddedMatcher {
    automaton: AhoCorasick,
    ids: Vec<u32>,
}

/// Buffers one `encode` call reuses across pieces.
#[derive(Default)]
struct PieceScratch {
    /// The byte tokens of the piece being merged.
    bytes: Vec<u32>,
    bpe: Scratch,
}

/// A stretch of text between added tokens, or an added token.
enum Part<'s> {
    Text(&'s str),
    Added(u32, &'s str),
}

/// A byte-level BPE tokenizer (see the [module docs](self)).
pub struct Tokenizer {
    pre: PreTokenizer,
    types: Vec<TokenType>,
    /// The bytes each token decodes to: `pieces[offsets[i]..offsets[i + 1]]`.
    pieces: Vec<u8>,
    offsets: Vec<usize>,
    /// The token of each single byte.
    byte_ids: [u32; 256],
    merges: Merges,
    /// Control and user-defined tokens (`special = true`).
    added_all: Option<AddedMatcher>,
    /// User-defined tokens only (`special = false`).
    added_user: Option<AddedMatcher>,
    /// Added tokens by text.
    added_ids: HashMap<String, u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    pad: Option<u32>,
    /// Sorted ids that end generation.
    end_of_generation: Vec<u32>,
    /// Merged ids of recently seen pieces.
    cache: Mutex<Cache>,
    /// Pieces the cache holds before it is emptied; 0 disables it.
    cache_capacity: usize,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("pre", &self.pre)
            .field("vocab_size", &self.vocab_size())
            .field("merges", &self.merges.len())
            .field("added_tokens", &self.added_ids.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("eot", &self.eot)
            .field("pad", &self.pad)
            .finish_non_exhaustive()
    }
}

/// Reads an optional integer token id.
fn special_id(meta: &Metadata, key: &'static str) -> Result<Option<i64>, TokenizerError> {
    let Some(value) = meta.get(key) else {
        return Ok(None);
    };
    let id = match *value {
        Value::U8(v) => i64::from(v),
        Value::I8(v) => i64::from(v),
        Value::U16(v) => i64::from(v),
        Value::I16(v) => i64::from(v),
        Value::U32(v) => i64::from(v),
        Value::I32(v) => i64::from(v),
        Value::U64(v) => i64::try_from(v).unwrap_or(i64::MAX),
        Value::I64(v) => v,
        _ => return Err(TokenizerError::SpecialIdType { key }),
    };
    Ok(Some(id))
}

fn check_len(key: &'static str, len: usize) -> Result<(), TokenizerError> {
    if len > MAX_VOCAB {
        return Err(TokenizerError::TooLarge {
            key,
            len,
            max: MAX_VOCAB,
        });
    }
    Ok(())
}

/// Parses `<0xAB>` into the byte it names.
fn byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

fn build_matcher(patterns: Vec<(&str, u32)>) -> Result<Option<AddedMatcher>, TokenizerError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let automaton = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(patterns.iter().map(|(text, _)| text))
        // The automaton's own size limits; far beyond any real vocabulary.
        .map_err(|_| TokenizerError::TooLarge {
            key: KEY_TOKENS,
            len: patterns.len(),
            max: patterns.len().saturating_sub(1),
        })?;
    Ok(Some(AddedMatcher {
        automaton,
        ids: patterns.into_iter().map(|(_, id)| id).collect(),
    }))
}

impl Tokenizer {
    /// Builds the tokenizer a GGUF file describes.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::Metadata`] for a missing key or one of the wrong
    /// type, [`TokenizerError::UnsupportedModel`] /
    /// [`TokenizerError::UnsupportedPre`] naming a value this crate does
    /// not implement, and the other variants for inconsistent contents.
    pub fn from_gguf(gguf: &Gguf<'_>) -> Result<Self, TokenizerError> {
        Self::from_metadata(gguf.metadata())
    }

    /// Builds the tokenizer from a metadata table (see
    /// [`from_gguf`](Self::from_gguf)).
    ///
    /// # Errors
    ///
    /// As [`from_gguf`](Self::from_gguf).
    pub fn from_metadata(meta: &Metadata) -> Result<Self, TokenizerError> {
        let model = meta.get_str(KEY_MODEL)?;
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel {
                model: model.to_owned(),
            });
        }
        let pre = PreTokenizer::from_name(meta.get_str(KEY_PRE)?)?;
        let tokens = meta.get_str_array(KEY_TOKENS)?;
        let types = if meta.contains_key(KEY_TYPES) {
            meta.get_i32_array(KEY_TYPES)?
        } else {
            &[]
        };
        let merges = meta.get_str_array(KEY_MERGES)?;
        let ids = SpecialIds {
            bos: special_id(meta, KEY_BOS)?,
            eos: special_id(meta, KEY_EOS)?,
            eot: special_id(meta, KEY_EOT)?,
            pad: special_id(meta, KEY_PAD)?,
        };
        Self::build(pre, tokens, types, merges, ids)
    }

    /// Builds the tokenizer from plain values.
    ///
    /// # Errors
    ///
    /// As [`from_gguf`](Self::from_gguf).
    pub fn from_parts(parts: &TokenizerParts) -> Result<Self, TokenizerError> {
        let pre = PreTokenizer::from_name(&parts.pre)?;
        let ids = SpecialIds {
            bos: parts.bos.map(i64::from),
            eos: parts.eos.map(i64::from),
            eot: parts.eot.map(i64::from),
            pad: parts.pad.map(i64::from),
        };
        Self::build(pre, &parts.tokens, &parts.token_types, &parts.merges, ids)
    }

    fn build(
        pre: PreTokenizer,
        tokens: &[String],
        type_codes: &[i32],
        merge_texts: &[String],
        special: SpecialIds,
    ) -> Result<Self, TokenizerError> {
        check_len(KEY_TOKENS, tokens.len())?;
        check_len(KEY_MERGES, merge_texts.len())?;
        if tokens.is_empty() {
            return Err(TokenizerError::EmptyVocab);
        }
        if !type_codes.is_empty() && type_codes.len() != tokens.len() {
            return Err(TokenizerError::TypeCount {
                tokens: tokens.len(),
                types: type_codes.len(),
            });
        }

        let mut types = Vec::with_capacity(tokens.len());
        let mut pieces = Vec::new();
        let mut offsets = Vec::with_capacity(tokens.len() + 1);
        offsets.push(0);
        // Normal tokens by the bytes they stand for.
        let mut normal: HashMap<Vec<u8>, u32> = HashMap::with_capacity(tokens.len());
        let mut added_ids: HashMap<String, u32> = HashMap::new();
        for (index, text) in tokens.iter().enumerate() {
            // `check_len` bounds the vocabulary far below `u32::MAX`.
            let id = u32::try_from(index).unwrap_or(u32::MAX);
            let code = type_codes.get(index).copied().unwrap_or(1);
            let ty = TokenType::from_code(code).ok_or(TokenizerError::UnknownTokenType {
                id,
                token_type: code,
            })?;
            types.push(ty);
            match ty {
                TokenType::Normal => {
                    let bytes = bytelevel::decode_str(text).ok_or_else(|| {
                        TokenizerError::NotByteLevel {
                            id,
                            text: text.clone(),
                        }
                    })?;
                    if bytes.is_empty() {
                        return Err(TokenizerError::EmptyToken { id });
                    }
                    pieces.extend_from_slice(&bytes);
                    if let Some(&first) = normal.get(&bytes) {
                        return Err(TokenizerError::DuplicateToken {
                            id,
                            first,
                            text: text.clone(),
                        });
                    }
                    normal.insert(bytes, id);
                }
                TokenType::Control | TokenType::UserDefined => {
                    pieces.extend_from_slice(text.as_bytes());
                    if !text.is_empty() {
                        if let Some(&first) = added_ids.get(text) {
                            return Err(TokenizerError::DuplicateToken {
                                id,
                                first,
                                text: text.clone(),
                            });
                        }
                        added_ids.insert(text.clone(), id);
                    }
                }
                TokenType::Unknown => pieces.extend_from_slice(text.as_bytes()),
                TokenType::Unused => {}
                TokenType::Byte => match byte_token(text) {
                    Some(b) => pieces.push(b),
                    None => pieces.extend_from_slice(text.as_bytes()),
                },
            }
            offsets.push(pieces.len());
        }

        let mut byte_ids = [0u32; 256];
        for (b, slot) in (0..=255u8).zip(byte_ids.iter_mut()) {
            *slot = *normal
                .get([b].as_slice())
                .ok_or(TokenizerError::MissingByte { byte: b })?;
        }

        let mut merges: Merges =
            HashMap::with_capacity_and_hasher(merge_texts.len(), SeededState::new());
        for (index, merge) in merge_texts.iter().enumerate() {
            let bad = || TokenizerError::BadMerge {
                index,
                merge: merge.clone(),
            };
            let (a, b) = merge.split_once(' ').ok_or_else(bad)?;
            if a.is_empty() || b.is_empty() || b.contains(' ') {
                return Err(bad());
            }
            let part = |p: &str| {
                bytelevel::decode_str(p)
                    .and_then(|bytes| normal.get(&bytes).map(|&id| (id, bytes)))
                    .ok_or_else(|| TokenizerError::MergeUnknownPart {
                        index,
                        merge: merge.clone(),
                        part: p.to_owned(),
                    })
            };
            let (left, mut joined) = part(a)?;
            let (right, right_bytes) = part(b)?;
            joined.extend_from_slice(&right_bytes);
            let id = *normal
                .get(&joined)
                .ok_or_else(|| TokenizerError::MergeUnknownResult {
                    index,
                    merge: merge.clone(),
                })?;
            let rank = u32::try_from(index).unwrap_or(u32::MAX);
            // A repeated pair keeps its first (highest-priority) rank, as
            // llama.cpp does.
            merges
                .entry(pair_key(left, right))
                .or_insert(Merge { rank, id });
        }
        drop(normal);

        let vocab_size = tokens.len();
        let check_id =
            |key: &'static str, id: Option<i64>| -> Result<Option<u32>, TokenizerError> {
                match id {
                    None => Ok(None),
                    Some(v) => match u32::try_from(v) {
                        Ok(id) if (id as usize) < vocab_size => Ok(Some(id)),
                        _ => Err(TokenizerError::SpecialIdOutOfRange {
                            key,
                            id: v,
                            vocab_size,
                        }),
                    },
                }
            };
        let bos = check_id(KEY_BOS, special.bos)?;
        let eos = check_id(KEY_EOS, special.eos)?;
        let pad = check_id(KEY_PAD, special.pad)?;
        let eot = match check_id(KEY_EOT, special.eot)? {
            Some(id) => Some(id),
            None => ["<|im_end|>", "<|eot_id|>", "<end_of_turn>"]
                .iter()
                .find_map(|t| {
                    added_ids
                        .get(*t)
                        .copied()
                        .filter(|&id| types.get(id as usize) == Some(&TokenType::Control))
                }),
        };
        let mut end_of_generation: Vec<u32> = [eos, eot].into_iter().flatten().collect();
        for text in END_OF_GENERATION {
            if let Some(&id) = added_ids.get(text) {
                if types.get(id as usize) == Some(&TokenType::Control) {
                    end_of_generation.push(id);
                }
            }
        }
        end_of_generation.sort_unstable();
        end_of_generation.dedup();

        let mut all = Vec::new();
        let mut user = Vec::new();
        for (text, &id) in &added_ids {
            all.push((text.as_str(), id));
            if types.get(id as usize) == Some(&TokenType::UserDefined) {
                user.push((text.as_str(), id));
            }
        }
        // Id order, so the automata do not depend on hash order.
        all.sort_unstable_by_key(|&(_, id)| id);
        user.sort_unstable_by_key(|&(_, id)| id);
        let added_all = build_matcher(all)?;
        let added_user = build_matcher(user)?;

        Ok(Tokenizer {
            pre,
            types,
            pieces,
            offsets,
            byte_ids,
            merges,
            added_all,
            added_user,
            added_ids,
            bos,
            eos,
            eot,
            pad,
            end_of_generation,
            cache: Mutex::new(HashMap::with_hasher(SeededState::new())),
            cache_capacity: CACHE_CAPACITY,
        })
    }

    /// Sets how many pieces the BPE cache holds before it is emptied
    /// (16384 by default, a few megabytes at most; 0 disables it). The
    /// cache changes speed only, never ids.
    pub fn set_cache_capacity(&mut self, capacity: usize) {
        self.cache_capacity = capacity;
        if let Ok(cache) = self.cache.get_mut() {
            cache.clear();
        }
    }

    /// The number of tokens (ids are `0..vocab_size`).
    pub fn vocab_size(&self) -> usize {
        self.types.len()
    }

    /// The pre-tokenizer.
    pub fn pre_tokenizer(&self) -> PreTokenizer {
        self.pre
    }

    /// The type of token `id`.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// The bytes token `id` decodes to (empty for unused tokens), or `None`
    /// for an id beyond the vocabulary.
    pub fn token_to_piece(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        let start = *self.offsets.get(i)?;
        let end = *self.offsets.get(i + 1)?;
        self.pieces.get(start..end)
    }

    /// The id of the control or user-defined token with this exact text
    /// (`"<|im_start|>"`).
    pub fn added_token_id(&self, text: &str) -> Option<u32> {
        self.added_ids.get(text).copied()
    }

    /// Beginning-of-sequence id (`tokenizer.ggml.bos_token_id`). Qwen3 does
    /// not prepend it; `encode` never adds it.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence id (`tokenizer.ggml.eos_token_id`).
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// End-of-turn id: `tokenizer.ggml.eot_token_id`, else the control
    /// token `<|im_end|>` (or `<|eot_id|>`, `<end_of_turn>`).
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }

    /// Padding id (`tokenizer.ggml.padding_token_id`).
    pub fn pad(&self) -> Option<u32> {
        self.pad
    }

    /// Whether generation should stop after token `id`: the eos and eot ids,
    /// and the control tokens `<|im_end|>`, `<|endoftext|>` (and their
    /// counterparts in other vocabularies), since a chat model may end its
    /// turn with either.
    pub fn is_end_of_generation(&self, id: u32) -> bool {
        self.end_of_generation.binary_search(&id).is_ok()
    }

    fn matcher(&self, special: bool) -> Option<&AddedMatcher> {
        if special {
            self.added_all.as_ref()
        } else {
            self.added_user.as_ref()
        }
    }

    /// Calls `f` on each stretch of `text` between added tokens and on each
    /// added token found, in order.
    fn split_added<'s>(&self, text: &'s str, special: bool, mut f: impl FnMut(Part<'s>)) {
        let mut last = 0;
        if let Some(m) = self.matcher(special) {
            for found in m.automaton.find_iter(text) {
                let (Some(before), Some(matched), Some(&id)) = (
                    text.get(last..found.start()),
                    text.get(found.start()..found.end()),
                    m.ids.get(found.pattern().as_usize()),
                ) else {
                    continue;
                };
                f(Part::Text(before));
                f(Part::Added(id, matched));
                last = found.end();
            }
        }
        f(Part::Text(text.get(last..).unwrap_or_default()));
    }

    /// `text` as `encode` sees it: the stretches between added tokens in NFC.
    /// `decode(encode(text, special))` gives back exactly these bytes.
    pub fn normalize(&self, text: &str, special: bool) -> String {
        let mut out = String::with_capacity(text.len());
        self.split_added(text, special, |part| match part {
            Part::Text(stretch) => out.extend(stretch.nfc()),
            Part::Added(_, token) => out.push_str(token),
        });
        out
    }

    /// Token ids of `text`. With `special`, control tokens written in the
    /// text (`<|im_start|>`) become their ids; without, they are encoded as
    /// plain text. User-defined tokens (`<think>`) are matched either way.
    /// Never adds a BOS token (Qwen3 uses none).
    pub fn encode(&self, text: &str, special: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        let mut scratch = PieceScratch::default();
        self.split_added(text, special, |part| match part {
            Part::Text(stretch) => self.encode_stretch(stretch, &mut scratch, &mut out),
            Part::Added(id, _) => out.push(id),
        });
        out
    }

    /// Normalizes, pre-tokenizes and merges one stretch without added
    /// tokens.
    fn encode_stretch(&self, stretch: &str, scratch: &mut PieceScratch, out: &mut Vec<u32>) {
        if stretch.is_empty() {
            return;
        }
        let normalized;
        let text = if is_nfc_quick(stretch.chars()) == IsNormalized::Yes {
            stretch
        } else {
            normalized = stretch.nfc().collect::<String>();
            normalized.as_str()
        };
        let mut cache = if self.cache_capacity == 0 {
            None
        } else {
            self.cache.try_lock().ok()
        };
        match self.pre {
            PreTokenizer::Qwen2 => {
                for piece in Qwen2Splitter::new(text) {
                    self.encode_piece(piece.as_bytes(), scratch, out, cache.as_deref_mut());
                }
            }
        }
    }

    /// BPE on one pre-tokenized piece.
    fn encode_piece(
        &self,
        piece: &[u8],
        scratch: &mut PieceScratch,
        out: &mut Vec<u32>,
        cache: Option<&mut Cache>,
    ) {
        if let [b] = piece {
            out.push(self.byte_ids[usize::from(*b)]);
            return;
        }
        let cache = cache.filter(|_| piece.len() <= CACHE_MAX_PIECE);
        if let Some(hit) = cache.as_ref().and_then(|c| c.get(piece)) {
            out.extend_from_slice(hit);
            return;
        }
        scratch.bytes.clear();
        scratch
            .bytes
            .extend(piece.iter().map(|&b| self.byte_ids[usize::from(b)]));
        let start = out.len();
        bpe::merge(&scratch.bytes, &self.merges, &mut scratch.bpe, out);
        if let Some(cache) = cache {
            if cache.len() >= self.cache_capacity {
                cache.clear();
            }
            let ids = out.get(start..).unwrap_or_default();
            cache.insert(piece.into(), ids.into());
        }
    }

    /// The bytes of `ids`, concatenated. Control and user-defined tokens
    /// give their text, unused tokens nothing.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::IdOutOfRange`] for an id beyond the vocabulary.
    pub fn decode(&self, ids: &[u32]) -> Result<Vec<u8>, TokenizerError> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            let piece = self
                .token_to_piece(id)
                .ok_or(TokenizerError::IdOutOfRange {
                    id,
                    vocab_size: self.vocab_size(),
                })?;
            out.extend_from_slice(piece);
        }
        Ok(out)
    }

    /// [`decode`](Self::decode) as a string, invalid UTF-8 replaced by
    /// U+FFFD.
    ///
    /// # Errors
    ///
    /// As [`decode`](Self::decode).
    pub fn decode_lossy(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let bytes = self.decode(ids)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A [`StreamDecoder`] over this tokenizer.
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }
}
