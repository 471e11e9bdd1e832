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
//! Each step has its file: `added.rs`, `normalize.rs`, `pretok.rs`, and
//! `bpe.rs` with `cache.rs`; `vocab.rs` builds and validates what they
//! look up.
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

mod added;
mod bpe;
mod bytelevel;
mod cache;
mod error;
mod hash;
mod normalize;
mod pretok;
mod stream;
mod vocab;

use added::{AddedTokens, Part};
use bpe::Scratch;
use cache::{CacheGuard, MergeCache};
use vocab::Vocab;

pub(crate) use bytelevel::{byte_to_char, char_to_byte, is_direct};
pub use error::TokenizerError;
pub use pretok::{PreTokenizer, Qwen2Splitter};
pub use stream::StreamDecoder;
pub use vocab::{TokenType, TokenizerParts, MAX_VOCAB};

/// `bytes` written in GPT-2's byte-level alphabet, the form normal tokens
/// and merges take in `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`
/// (a space is `Ġ`, a newline `Ċ`): what a vocabulary builder needs.
pub fn byte_level_text(bytes: &[u8]) -> String {
    bytelevel::encode_bytes(bytes)
}

/// Buffers one `encode` call reuses across pieces.
#[derive(Default)]
struct PieceScratch {
    /// The byte tokens of the piece being merged.
    bytes: Vec<u32>,
    bpe: Scratch,
}

/// A byte-level BPE tokenizer (see the [module docs](self)).
pub struct Tokenizer {
    pre: PreTokenizer,
    vocab: Vocab,
    added: AddedTokens,
    cache: MergeCache,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("pre", &self.pre)
            .field("vocab_size", &self.vocab_size())
            .field("merges", &self.vocab.merges.len())
            .field("added_tokens", &self.vocab.added_ids.len())
            .field("bos", &self.vocab.bos)
            .field("eos", &self.vocab.eos)
            .field("eot", &self.vocab.eot)
            .field("pad", &self.vocab.pad)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Sets how many pieces the BPE cache holds before it is emptied
    /// (16384 by default, a few megabytes at most; 0 disables it). The
    /// cache changes speed only, never ids.
    pub fn set_cache_capacity(&mut self, capacity: usize) {
        self.cache.set_capacity(capacity);
    }

    /// The number of tokens (ids are `0..vocab_size`).
    pub fn vocab_size(&self) -> usize {
        self.vocab.types.len()
    }

    /// The pre-tokenizer.
    pub fn pre_tokenizer(&self) -> PreTokenizer {
        self.pre
    }

    /// The type of token `id`.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.vocab.types.get(id as usize).copied()
    }

    /// The bytes token `id` decodes to (empty for unused tokens), or `None`
    /// for an id beyond the vocabulary.
    pub fn token_to_piece(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        let start = *self.vocab.offsets.get(i)?;
        let end = *self.vocab.offsets.get(i + 1)?;
        self.vocab.pieces.get(start..end)
    }

    /// The id of the control or user-defined token with this exact text
    /// (`"<|im_start|>"`).
    pub fn added_token_id(&self, text: &str) -> Option<u32> {
        self.vocab.added_ids.get(text).copied()
    }

    /// Beginning-of-sequence id (`tokenizer.ggml.bos_token_id`). Qwen3 does
    /// not prepend it; `encode` never adds it.
    pub fn bos(&self) -> Option<u32> {
        self.vocab.bos
    }

    /// End-of-sequence id (`tokenizer.ggml.eos_token_id`).
    pub fn eos(&self) -> Option<u32> {
        self.vocab.eos
    }

    /// End-of-turn id: `tokenizer.ggml.eot_token_id`, else the control
    /// token `<|im_end|>` (or `<|eot_id|>`, `<end_of_turn>`).
    pub fn eot(&self) -> Option<u32> {
        self.vocab.eot
    }

    /// Padding id (`tokenizer.ggml.padding_token_id`).
    pub fn pad(&self) -> Option<u32> {
        self.vocab.pad
    }

    /// Whether generation should stop after token `id`: the eos and eot ids,
    /// and the control tokens `<|im_end|>`, `<|endoftext|>` (and their
    /// counterparts in other vocabularies), since a chat model may end its
    /// turn with either.
    pub fn is_end_of_generation(&self, id: u32) -> bool {
        self.vocab.end_of_generation.binary_search(&id).is_ok()
    }

    /// `text` as `encode` sees it: the stretches between added tokens in NFC.
    /// `decode(encode(text, special))` gives back exactly these bytes.
    pub fn normalize(&self, text: &str, special: bool) -> String {
        let mut out = String::with_capacity(text.len());
        self.added.split(text, special, |part| match part {
            Part::Text(stretch) => out.push_str(&normalize::nfc(stretch)),
            Part::Added(_, token) => out.push_str(token),
        });
        out
    }

    /// Token ids of `text`. With `special`, control tokens written in the
    /// text (`<|im_start|>`) become their ids; without, they are encoded as
    /// plain text. User-defined tokens (`<think>`) are matched either way.
    /// Never adds a BOS token (Qwen3 uses none).
    ///
    /// The steps are those of the [module docs](self).
    pub fn encode(&self, text: &str, special: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        let mut scratch = PieceScratch::default();
        // 1. Added tokens, found whole in the raw text.
        self.added.split(text, special, |part| match part {
            Part::Added(id, _) => out.push(id),
            Part::Text("") => {}
            Part::Text(stretch) => {
                // 2. NFC, within the stretch.
                let stretch = normalize::nfc(stretch);
                let mut cache = self.cache.try_lock();
                // 3. Pre-tokenization into pieces.
                let pieces = match self.pre {
                    PreTokenizer::Qwen2 => Qwen2Splitter::new(&stretch),
                };
                for piece in pieces {
                    // 4. BPE on each piece.
                    self.merge_piece(piece.as_bytes(), &mut scratch, &mut out, cache.as_mut());
                }
            }
        });
        out
    }

    /// BPE on one pre-tokenized piece, through the cache.
    fn merge_piece(
        &self,
        piece: &[u8],
        scratch: &mut PieceScratch,
        out: &mut Vec<u32>,
        cache: Option<&mut CacheGuard<'_>>,
    ) {
        let byte_ids = &self.vocab.byte_ids;
        if let [b] = piece {
            out.push(byte_ids[usize::from(*b)]);
            return;
        }
        if let Some(hit) = cache.as_deref().and_then(|c| c.get(piece)) {
            out.extend_from_slice(hit);
            return;
        }
        scratch.bytes.clear();
        scratch
            .bytes
            .extend(piece.iter().map(|&b| byte_ids[usize::from(b)]));
        let start = out.len();
        bpe::merge(&scratch.bytes, &self.vocab.merges, &mut scratch.bpe, out);
        if let Some(cache) = cache {
            cache.insert(piece, out.get(start..).unwrap_or_default());
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
