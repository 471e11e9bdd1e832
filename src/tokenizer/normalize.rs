//! Step 2 of `encode`: NFC normalization of each stretch between added
//! tokens, as Qwen's `tokenizer.json` specifies.

use std::borrow::Cow;

use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// `text` in NFC: borrowed as it is when a quick check proves it already is
/// (nearly all text), so the common case copies nothing.
pub(super) fn nfc(text: &str) -> Cow<'_, str> {
    if is_nfc_quick(text.chars()) == IsNormalized::Yes {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.nfc().collect())
    }
}
