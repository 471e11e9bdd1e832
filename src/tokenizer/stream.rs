//! Decoding generated tokens one at a time into text.

use super::{Tokenizer, TokenizerError};

/// Turns token ids, given one at a time as a model produces them, into
/// text that is always whole UTF-8 characters.
///
/// A byte-level token can end in the middle of a character (an emoji is
/// often two or three tokens), so the bytes of an incomplete character are
/// held back until the tokens that complete it arrive. Bytes that can never
/// become valid UTF-8 are emitted as U+FFFD, the same replacement
/// [`String::from_utf8_lossy`] makes, so the concatenated output of
/// [`push`](Self::push) and [`finish`](Self::finish) equals
/// `from_utf8_lossy` of [`Tokenizer::decode`] over all the ids.
#[derive(Debug)]
pub struct StreamDecoder<'t> {
    tokenizer: &'t Tokenizer,
    pending: Vec<u8>,
}

impl<'t> StreamDecoder<'t> {
    /// A decoder with nothing pending.
    pub fn new(tokenizer: &'t Tokenizer) -> Self {
        StreamDecoder {
            tokenizer,
            pending: Vec::new(),
        }
    }

    /// Adds token `id`; returns the text it completes (possibly empty).
    ///
    /// # Errors
    ///
    /// [`TokenizerError::IdOutOfRange`] for an id beyond the vocabulary
    /// (nothing is added).
    pub fn push(&mut self, id: u32) -> Result<String, TokenizerError> {
        let piece = self
            .tokenizer
            .token_to_piece(id)
            .ok_or(TokenizerError::IdOutOfRange {
                id,
                vocab_size: self.tokenizer.vocab_size(),
            })?;
        self.pending.extend_from_slice(piece);
        Ok(self.drain(false))
    }

    /// Flushes what is held back (an incomplete character at the end becomes
    /// U+FFFD) and empties the decoder.
    pub fn finish(&mut self) -> String {
        self.drain(true)
    }

    /// Bytes held back, waiting for the rest of a character.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    fn drain(&mut self, at_end: bool) -> String {
        let mut out = String::new();
        let mut start = 0;
        loop {
            let rest = self.pending.get(start..).unwrap_or_default();
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&rest[..valid]).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start += valid + bad;
                        }
                        None if at_end => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start = self.pending.len();
                            break;
                        }
                        None => {
                            start += valid;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start.min(self.pending.len()));
        out
    }
}
