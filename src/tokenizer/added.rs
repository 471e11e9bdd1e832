//! Step 1 of `encode`: finding added tokens (`<|im_start|>`, `<think>`)
//! whole in the raw text, leftmost-longest first, before anything else
//! looks at it.

use aho_corasick::{AhoCorasick, MatchKind};

use super::vocab::{Vocab, KEY_TOKENS};
use super::{TokenType, TokenizerError};

/// Added tokens of one matching mode: an automaton and the id of each of its
/// patterns.
struct AddedMatcher {
    automaton: AhoCorasick,
    ids: Vec<u32>,
}

/// A stretch of text between added tokens, or an added token.
pub(super) enum Part<'s> {
    /// Text without added tokens, possibly empty.
    Text(&'s str),
    /// An added token's id and its text.
    Added(u32, &'s str),
}

/// The two matchers: which one runs depends on `special`.
pub(super) struct AddedTokens {
    /// Control and user-defined tokens (`special = true`).
    all: Option<AddedMatcher>,
    /// User-defined tokens only (`special = false`).
    user: Option<AddedMatcher>,
}

impl AddedTokens {
    /// The matchers over the vocabulary's control and user-defined tokens.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::TooLarge`] past the automaton's own size limits.
    pub(super) fn new(vocab: &Vocab) -> Result<Self, TokenizerError> {
        let mut all = Vec::new();
        let mut user = Vec::new();
        for (text, &id) in &vocab.added_ids {
            all.push((text.as_str(), id));
            if vocab.types.get(id as usize) == Some(&TokenType::UserDefined) {
                user.push((text.as_str(), id));
            }
        }
        // Id order, so the automata do not depend on hash order.
        all.sort_unstable_by_key(|&(_, id)| id);
        user.sort_unstable_by_key(|&(_, id)| id);
        Ok(AddedTokens {
            all: build_matcher(all)?,
            user: build_matcher(user)?,
        })
    }

    fn matcher(&self, special: bool) -> Option<&AddedMatcher> {
        if special {
            self.all.as_ref()
        } else {
            self.user.as_ref()
        }
    }

    /// Calls `f` on each stretch of `text` between added tokens and on each
    /// added token found, in order.
    pub(super) fn split<'s>(&self, text: &'s str, special: bool, mut f: impl FnMut(Part<'s>)) {
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
