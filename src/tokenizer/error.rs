//! Why a tokenizer could not be built, or an id not decoded.

use crate::gguf::GgufError;

/// An error building a [`Tokenizer`](super::Tokenizer) from metadata, or
/// decoding ids it does not have.
///
/// Tokenizer metadata comes from downloaded files, so each inconsistency is
/// its own variant naming the key, token id or merge at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// A required key is missing or holds the wrong type.
    #[error("tokenizer metadata: {0}")]
    Metadata(#[from] GgufError),
    /// `tokenizer.ggml.model` names a tokenizer other than byte-level BPE.
    #[error("unsupported tokenizer model {model:?} (tokenizer.ggml.model): only \"gpt2\" (byte-level BPE) is supported")]
    UnsupportedModel {
        /// The value found.
        model: String,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not have.
    #[error("unsupported pre-tokenizer {pre:?} (tokenizer.ggml.pre): only \"qwen2\" is supported")]
    UnsupportedPre {
        /// The value found.
        pre: String,
    },
    /// The vocabulary is empty.
    #[error("the vocabulary (tokenizer.ggml.tokens) is empty")]
    EmptyVocab,
    /// An array holds more entries than ids can address.
    #[error("{key} has {len} entries, more than the {max} supported")]
    TooLarge {
        /// The metadata key.
        key: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `tokenizer.ggml.token_type` does not have one entry per token.
    #[error("tokenizer.ggml.token_type has {types} entries for {tokens} tokens")]
    TypeCount {
        /// Number of tokens.
        tokens: usize,
        /// Number of token types.
        types: usize,
    },
    /// A token type outside 1..=6.
    #[error("token {id} has unknown type {token_type} (tokenizer.ggml.token_type)")]
    UnknownTokenType {
        /// The token id.
        id: u32,
        /// The type found.
        token_type: i32,
    },
    /// A token that BPE or added-token matching would use is empty.
    #[error("token {id} is empty")]
    EmptyToken {
        /// The token id.
        id: u32,
    },
    /// Two tokens have the same text, so text cannot name one id.
    #[error("token {id} duplicates token {first}: {text:?}")]
    DuplicateToken {
        /// The later id.
        id: u32,
        /// The first id with that text.
        first: u32,
        /// The shared text.
        text: String,
    },
    /// A normal token holds a character outside the byte-level alphabet.
    #[error("token {id} ({text:?}) is not byte-level text")]
    NotByteLevel {
        /// The token id.
        id: u32,
        /// Its text.
        text: String,
    },
    /// Byte-level BPE needs a token for every single byte, or some text
    /// could not be encoded.
    #[error("no token for byte 0x{byte:02X}: byte-level BPE needs all 256")]
    MissingByte {
        /// The byte without a token.
        byte: u8,
    },
    /// A merge is not two tokens separated by one space.
    #[error("merge {index} ({merge:?}) is not two tokens separated by a space")]
    BadMerge {
        /// The merge's index (its rank).
        index: usize,
        /// Its text.
        merge: String,
    },
    /// A merge names a part that is not a normal token.
    #[error("merge {index} ({merge:?}) names {part:?}, which is not a normal token")]
    MergeUnknownPart {
        /// The merge's index.
        index: usize,
        /// Its text.
        merge: String,
        /// The part not in the vocabulary.
        part: String,
    },
    /// A merge's result is not a normal token.
    #[error("merge {index} ({merge:?}) produces a token not in the vocabulary")]
    MergeUnknownResult {
        /// The merge's index.
        index: usize,
        /// Its text.
        merge: String,
    },
    /// A special token id (bos, eos, ...) beyond the vocabulary.
    #[error("{key} = {id} is outside the vocabulary of {vocab_size} tokens")]
    SpecialIdOutOfRange {
        /// The metadata key.
        key: &'static str,
        /// The id found.
        id: i64,
        /// Vocabulary size.
        vocab_size: usize,
    },
    /// A special token id has a type other than an unsigned or signed
    /// integer.
    #[error("{key} must be an integer token id")]
    SpecialIdType {
        /// The metadata key.
        key: &'static str,
    },
    /// [`decode`](super::Tokenizer::decode) was given an id beyond the
    /// vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab_size} tokens")]
    IdOutOfRange {
        /// The id.
        id: u32,
        /// Vocabulary size.
        vocab_size: usize,
    },
}
