//! Step 3 of `encode`: the `qwen2` pre-tokenizer splits text into the pieces
//! BPE runs on.
//!
//! Qwen's `tokenizer.json` (and llama.cpp's `qwen2` pre-tokenizer) split
//! with this regex, each match one piece:
//!
//! ```text
//! (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! The `\s+(?!\S)` branch needs look-ahead, which the `regex` crate does not
//! have, and a backtracking engine is several times slower than needed, so
//! [`Qwen2Splitter`] is a hand-written scanner that reproduces the regex's
//! leftmost-first semantics branch by branch (the comments on
//! [`piece_end`] say how each branch reduces to a scan). A property test
//! checks it against `fancy-regex` running the regex itself.
//!
//! Every character is matched by some branch (the last ones cover all
//! whitespace, letters, digits and everything else), so the pieces tile the
//! text: concatenated, they give it back.

use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};

use super::TokenizerError;

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

/// The character classes the regex distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// `\p{L}`: general category L (Lu, Ll, Lt, Lm, Lo).
    Letter,
    /// `\p{N}`: general category N (Nd, Nl, No).
    Number,
    /// `\r` or `\n` (also whitespace).
    Newline,
    /// `\s` other than `\r` and `\n`: the Unicode `White_Space` property.
    Space,
    /// Anything else: punctuation, symbols, marks, controls, unassigned.
    Other,
}

fn class(c: char) -> Class {
    if c.is_ascii() {
        return match c {
            'a'..='z' | 'A'..='Z' => Class::Letter,
            '0'..='9' => Class::Number,
            '\r' | '\n' => Class::Newline,
            ' ' | '\t' | '\x0B' | '\x0C' => Class::Space,
            _ => Class::Other,
        };
    }
    // `char::is_whitespace` is exactly the `White_Space` property, which is
    // what `\s` means in Unicode regex engines (Oniguruma and `regex`).
    if c.is_whitespace() {
        return Class::Space;
    }
    match c.general_category_group() {
        GeneralCategoryGroup::Letter => Class::Letter,
        GeneralCategoryGroup::Number => Class::Number,
        _ => Class::Other,
    }
}

/// Iterator over the pieces of a text, as `&str` slices of it.
#[derive(Clone, Debug)]
pub struct Qwen2Splitter<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Qwen2Splitter<'a> {
    /// Splits `text`.
    pub fn new(text: &'a str) -> Self {
        Qwen2Splitter { text, pos: 0 }
    }
}

impl<'a> Iterator for Qwen2Splitter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.text.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        let len = piece_end(rest).max(rest.chars().next().map_or(1, char::len_utf8));
        let piece = rest.get(..len)?;
        self.pos += len;
        Some(piece)
    }
}

/// Whether `c` folds to one of `lower`'s case variants, as `(?i)` matches:
/// simple case folding, which adds U+017F LATIN SMALL LETTER LONG S to `s`.
fn eq_fold(c: char, lower: char) -> bool {
    c == lower || c == lower.to_ascii_uppercase() || (lower == 's' && c == '\u{17F}')
}

/// Byte length of the contraction (`'s`, `'T`, `'re`, `'LL`, ...) at the
/// start of `rest`, which begins with `'`.
fn contraction(rest: &str) -> Option<usize> {
    let mut chars = rest.chars();
    if chars.next() != Some('\'') {
        return None;
    }
    let c1 = chars.next()?;
    let c2 = chars.next();
    for single in ['s', 't', 'm', 'd'] {
        if eq_fold(c1, single) {
            return Some(1 + c1.len_utf8());
        }
    }
    for (a, b) in [('r', 'e'), ('v', 'e'), ('l', 'l')] {
        if eq_fold(c1, a) && c2.is_some_and(|c2| eq_fold(c2, b)) {
            return Some(1 + c1.len_utf8() + 1);
        }
    }
    None
}

/// Byte offset where the run of characters of `rest` (from byte `from`)
/// satisfying `keep` ends.
fn run_end(rest: &str, from: usize, keep: impl Fn(Class) -> bool) -> usize {
    rest.get(from..)
        .and_then(|tail| {
            tail.char_indices()
                .find(|&(_, c)| !keep(class(c)))
                .map(|(i, _)| from + i)
        })
        .unwrap_or(rest.len())
}

/// Byte length of the piece at the start of `rest` (non-empty): the match
/// the regex finds there, trying its branches in order.
fn piece_end(rest: &str) -> usize {
    let mut chars = rest.chars();
    let Some(c0) = chars.next() else { return 0 };
    let c1 = chars.next();
    let k0 = class(c0);
    let k1 = c1.map(class);
    let n0 = c0.len_utf8();

    // 1. `(?i:'s|'t|'re|'ve|'m|'ll|'d)`.
    if c0 == '\'' {
        if let Some(len) = contraction(rest) {
            return len;
        }
    }
    // 2. `[^\r\n\p{L}\p{N}]?\p{L}+`: a letter run, with at most one leading
    //    character that is not a newline, letter or digit (a space, tab,
    //    quote, bracket...). The optional part cannot hold a letter, so a
    //    run starting on a letter takes no prefix.
    if k0 == Class::Letter {
        return run_end(rest, 0, |k| k == Class::Letter);
    }
    if matches!(k0, Class::Space | Class::Other) && k1 == Some(Class::Letter) {
        return run_end(rest, n0, |k| k == Class::Letter);
    }
    // 3. `\p{N}`: one digit (or other number) at a time.
    if k0 == Class::Number {
        return n0;
    }
    // 4. ` ?[^\s\p{L}\p{N}]+[\r\n]*`: a run of "other" characters, with one
    //    optional leading U+0020 (not any whitespace), and the newlines that
    //    follow it.
    let other_from = if c0 == ' ' && k1 == Some(Class::Other) {
        Some(n0)
    } else if k0 == Class::Other {
        Some(0)
    } else {
        None
    };
    if let Some(from) = other_from {
        let end = run_end(rest, from, |k| k == Class::Other);
        return run_end(rest, end, |k| k == Class::Newline);
    }
    // Only whitespace is left (k0 is Space or Newline). `ws_end` is where
    // the whitespace run starting here ends.
    let ws_end = run_end(rest, 0, |k| matches!(k, Class::Space | Class::Newline));
    // 5. `\s*[\r\n]+`: `\s*` first takes the whole run, then backtracks
    //    until `[\r\n]+` can match; it first can at the run's last newline,
    //    where `[\r\n]+` takes that one character (a newline after it would
    //    have been found first). So: up to and including the last newline.
    let ws = rest.get(..ws_end).unwrap_or(rest);
    if let Some(last_nl) = ws.rfind(['\r', '\n']) {
        return last_nl + 1;
    }
    // 6. `\s+(?!\S)`: the whole run if the text ends there; otherwise the
    //    run minus its last character, which stays to lead the next piece
    //    (" world"), provided that leaves at least one character.
    if ws_end == rest.len() {
        return ws_end;
    }
    let last_start = ws.char_indices().next_back().map_or(0, |(i, _)| i);
    if last_start > 0 {
        return last_start;
    }
    // 7. `\s+`: a lone whitespace character before a non-letter.
    ws_end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<&str> {
        Qwen2Splitter::new(s).collect()
    }

    #[test]
    fn each_branch() {
        // 1. contractions, any case, after a letter run.
        assert_eq!(split("don't"), ["don", "'t"]);
        assert_eq!(
            split("I'M WE'LL she'Re"),
            ["I", "'M", " WE", "'LL", " she", "'Re"]
        );
        assert_eq!(split("'llama"), ["'ll", "ama"]);
        assert_eq!(split("'x"), ["'x"]);
        // 2. letters with one optional leading non-letter, non-digit.
        assert_eq!(split("hello world"), ["hello", " world"]);
        assert_eq!(split("(hi\tthere"), ["(hi", "\tthere"]);
        assert_eq!(split("über 東京"), ["über", " 東京"]);
        // 3. digits one at a time.
        assert_eq!(split("a123"), ["a", "1", "2", "3"]);
        assert_eq!(split("x ²½"), ["x", " ", "²", "½"]);
        // 4. punctuation runs with one leading space and trailing newlines.
        assert_eq!(split("a !!\n\nb"), ["a", " !!\n\n", "b"]);
        assert_eq!(split("\"!?"), ["\"!?"]);
        // 5. whitespace up to its last newline.
        assert_eq!(split("a \n \n  b"), ["a", " \n \n", " ", " b"]);
        assert_eq!(split("\r\n"), ["\r\n"]);
        // 6. whitespace run not followed by non-whitespace, minus its last.
        assert_eq!(split("a   b"), ["a", "  ", " b"]);
        assert_eq!(split("a   "), ["a", "   "]);
        // 7. the remaining lone whitespace.
        assert_eq!(split("a 1"), ["a", " ", "1"]);
        assert_eq!(split(""), Vec::<&str>::new());
    }
}
