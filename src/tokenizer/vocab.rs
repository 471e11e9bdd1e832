//! The vocabulary: what every id decodes to, the merge table, the special
//! ids, and their build from GGUF metadata (or plain values), validating
//! everything `encode` and `decode` rely on.

use std::collections::HashMap;

use super::added::AddedTokens;
use super::bpe::{pair_key, Merge, Merges};
use super::bytelevel;
use super::cache::MergeCache;
use super::hash::SeededState;
use super::{PreTokenizer, Tokenizer, TokenizerError};
use crate::gguf::{Gguf, Metadata};

/// Most tokens or merges a tokenizer may have: 64 times the largest real
/// vocabularies (~260k), far below what ids (`u32`) can address; bounds the
/// memory a hostile file can make the builder allocate beyond its own size.
pub const MAX_VOCAB: usize = 1 << 24;

/// Text of control tokens that end a generated turn, besides the eos and
/// eot ids.
const END_OF_GENERATION: [&str; 5] = [
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<end_of_turn>",
];

/// Control tokens taken as the end-of-turn id when the metadata names none,
/// in order of preference.
const END_OF_TURN: [&str; 3] = ["<|im_end|>", "<|eot_id|>", "<end_of_turn>"];

/// GGUF metadata keys.
const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
pub(super) const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
const KEY_TYPES: &str = "tokenizer.ggml.token_type";
const KEY_MERGES: &str = "tokenizer.ggml.merges";
const KEY_BOS: &str = "tokenizer.ggml.bos_token_id";
const KEY_EOS: &str = "tokenizer.ggml.eos_token_id";
const KEY_EOT: &str = "tokenizer.ggml.eot_token_id";
const KEY_PAD: &str = "tokenizer.ggml.padding_token_id";

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

    /// The GGUF code (a `const fn`, so writers of metadata can name codes
    /// as constants).
    pub const fn code(self) -> i32 {
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

/// A validated vocabulary: every lookup `encode` and `decode` make on it
/// succeeds.
pub(super) struct Vocab {
    pub(super) types: Vec<TokenType>,
    /// The bytes each token decodes to: `pieces[offsets[i]..offsets[i + 1]]`.
    pub(super) pieces: Vec<u8>,
    pub(super) offsets: Vec<usize>,
    /// The token of each single byte.
    pub(super) byte_ids: [u32; 256],
    pub(super) merges: Merges,
    /// Added tokens by text.
    pub(super) added_ids: HashMap<String, u32>,
    pub(super) bos: Option<u32>,
    pub(super) eos: Option<u32>,
    pub(super) eot: Option<u32>,
    pub(super) pad: Option<u32>,
    /// Sorted ids that end generation.
    pub(super) end_of_generation: Vec<u32>,
}

/// The token entries, read: each id's type and bytes, and the lookups the
/// rest of the build needs.
struct Entries {
    types: Vec<TokenType>,
    pieces: Vec<u8>,
    offsets: Vec<usize>,
    /// Normal tokens by the bytes they stand for.
    normal: HashMap<Vec<u8>, u32>,
    added_ids: HashMap<String, u32>,
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
        Self::build(pre, Vocab::build(tokens, types, merges, ids)?)
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
        let vocab = Vocab::build(&parts.tokens, &parts.token_types, &parts.merges, ids)?;
        Self::build(pre, vocab)
    }

    /// The tokenizer over a validated vocabulary.
    fn build(pre: PreTokenizer, vocab: Vocab) -> Result<Self, TokenizerError> {
        Ok(Tokenizer {
            pre,
            added: AddedTokens::new(&vocab)?,
            vocab,
            cache: MergeCache::new(),
        })
    }
}

impl Vocab {
    /// Reads and validates the token entries, the byte tokens, the merges
    /// and the special ids, in that order (each step relies on the ones
    /// before it).
    fn build(
        tokens: &[String],
        type_codes: &[i32],
        merge_texts: &[String],
        special: SpecialIds,
    ) -> Result<Self, TokenizerError> {
        check_len(KEY_TOKENS, tokens.len())?;
        check_len(KEY_MERGES, merge_texts.len())?;
        let entries = Entries::read(tokens, type_codes)?;
        let byte_ids = entries.byte_ids()?;
        let merges = entries.merges(merge_texts)?;
        let Entries {
            types,
            pieces,
            offsets,
            added_ids,
            ..
        } = entries;
        let mut vocab = Vocab {
            types,
            pieces,
            offsets,
            byte_ids,
            merges,
            added_ids,
            bos: None,
            eos: None,
            eot: None,
            pad: None,
            end_of_generation: Vec::new(),
        };
        vocab.set_special(special)?;
        Ok(vocab)
    }

    /// The id of the added token with text `text`, if it is a control
    /// token.
    fn control_id(&self, text: &str) -> Option<u32> {
        self.added_ids
            .get(text)
            .copied()
            .filter(|&id| self.types.get(id as usize) == Some(&TokenType::Control))
    }

    /// Checks the special ids against the vocabulary, falls back to a known
    /// end-of-turn token, and lists the ids that end generation.
    fn set_special(&mut self, special: SpecialIds) -> Result<(), TokenizerError> {
        let vocab_size = self.types.len();
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
        self.bos = check_id(KEY_BOS, special.bos)?;
        self.eos = check_id(KEY_EOS, special.eos)?;
        self.pad = check_id(KEY_PAD, special.pad)?;
        self.eot = match check_id(KEY_EOT, special.eot)? {
            Some(id) => Some(id),
            None => END_OF_TURN.iter().find_map(|t| self.control_id(t)),
        };
        let mut end: Vec<u32> = [self.eos, self.eot].into_iter().flatten().collect();
        end.extend(END_OF_GENERATION.iter().filter_map(|t| self.control_id(t)));
        end.sort_unstable();
        end.dedup();
        self.end_of_generation = end;
        Ok(())
    }
}

impl Entries {
    /// Reads every token's type and bytes, refusing what the byte-level
    /// alphabet cannot spell and duplicates.
    fn read(tokens: &[String], type_codes: &[i32]) -> Result<Self, TokenizerError> {
        if tokens.is_empty() {
            return Err(TokenizerError::EmptyVocab);
        }
        if !type_codes.is_empty() && type_codes.len() != tokens.len() {
            return Err(TokenizerError::TypeCount {
                tokens: tokens.len(),
                types: type_codes.len(),
            });
        }
        let mut e = Entries {
            types: Vec::with_capacity(tokens.len()),
            pieces: Vec::new(),
            offsets: Vec::with_capacity(tokens.len() + 1),
            normal: HashMap::with_capacity(tokens.len()),
            added_ids: HashMap::new(),
        };
        e.offsets.push(0);
        for (index, text) in tokens.iter().enumerate() {
            // `check_len` bounds the vocabulary far below `u32::MAX`.
            let id = u32::try_from(index).unwrap_or(u32::MAX);
            let code = type_codes.get(index).copied().unwrap_or(1);
            let ty = TokenType::from_code(code).ok_or(TokenizerError::UnknownTokenType {
                id,
                token_type: code,
            })?;
            e.types.push(ty);
            e.push(id, ty, text)?;
            e.offsets.push(e.pieces.len());
        }
        Ok(e)
    }

    /// Adds token `id`'s bytes, and the token to the lookup of its type.
    fn push(&mut self, id: u32, ty: TokenType, text: &str) -> Result<(), TokenizerError> {
        match ty {
            TokenType::Normal => {
                let bytes =
                    bytelevel::decode_str(text).ok_or_else(|| TokenizerError::NotByteLevel {
                        id,
                        text: text.to_owned(),
                    })?;
                if bytes.is_empty() {
                    return Err(TokenizerError::EmptyToken { id });
                }
                self.pieces.extend_from_slice(&bytes);
                if let Some(&first) = self.normal.get(&bytes) {
                    return Err(TokenizerError::DuplicateToken {
                        id,
                        first,
                        text: text.to_owned(),
                    });
                }
                self.normal.insert(bytes, id);
            }
            TokenType::Control | TokenType::UserDefined => {
                self.pieces.extend_from_slice(text.as_bytes());
                if !text.is_empty() {
                    if let Some(&first) = self.added_ids.get(text) {
                        return Err(TokenizerError::DuplicateToken {
                            id,
                            first,
                            text: text.to_owned(),
                        });
                    }
                    self.added_ids.insert(text.to_owned(), id);
                }
            }
            TokenType::Unknown => self.pieces.extend_from_slice(text.as_bytes()),
            TokenType::Unused => {}
            TokenType::Byte => match byte_token(text) {
                Some(b) => self.pieces.push(b),
                None => self.pieces.extend_from_slice(text.as_bytes()),
            },
        }
        Ok(())
    }

    /// The normal token of each single byte; every byte must have one, so
    /// any text can be encoded.
    fn byte_ids(&self) -> Result<[u32; 256], TokenizerError> {
        let mut byte_ids = [0u32; 256];
        for (b, slot) in (0..=255u8).zip(byte_ids.iter_mut()) {
            *slot = *self
                .normal
                .get([b].as_slice())
                .ok_or(TokenizerError::MissingByte { byte: b })?;
        }
        Ok(byte_ids)
    }

    /// The merge table: each `"a b"` joins two normal tokens into the normal
    /// token of their bytes together, ranked by its position.
    fn merges(&self, merge_texts: &[String]) -> Result<Merges, TokenizerError> {
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
                    .and_then(|bytes| self.normal.get(&bytes).map(|&id| (id, bytes)))
                    .ok_or_else(|| TokenizerError::MergeUnknownPart {
                        index,
                        merge: merge.clone(),
                        part: p.to_owned(),
                    })
            };
            let (left, mut joined) = part(a)?;
            let (right, right_bytes) = part(b)?;
            joined.extend_from_slice(&right_bytes);
            let id =
                *self
                    .normal
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
        Ok(merges)
    }
}

/// Reads an optional integer token id, of any integer type; a `u64` id
/// beyond `i64` reads as `i64::MAX`, which `set_special` then refuses as
/// out of range.
fn special_id(meta: &Metadata, key: &'static str) -> Result<Option<i64>, TokenizerError> {
    let Some(value) = meta.get(key) else {
        return Ok(None);
    };
    let id = value
        .as_int()
        .ok_or(TokenizerError::SpecialIdType { key })?;
    Ok(Some(i64::try_from(id).unwrap_or(i64::MAX)))
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
