//! The chat prompt format: Qwen3's, recognised from the file.

use crate::gguf::Gguf;

use super::ModelError;

/// The metadata key holding the model's Jinja chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// A chat format this crate can apply without a template engine.
///
/// Qwen3 files carry a Jinja template (`tokenizer.chat_template`); every
/// Qwen3 template is ChatML (`<|im_start|>role\n...<|im_end|>`), which is
/// the one format implemented here. A file without a template gets
/// ChatML too, the format of the only architecture the crate runs; a file
/// whose template is something else is refused rather than prompted in a
/// format it was not trained on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChatTemplate {
    /// `<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n`.
    ChatMl,
}

impl ChatTemplate {
    /// The template of `gguf`, from [`CHAT_TEMPLATE_KEY`].
    ///
    /// # Errors
    ///
    /// [`ModelError::InvalidValue`] if the file's template is not ChatML
    /// (or not a string).
    pub fn from_gguf(gguf: &Gguf<'_>) -> Result<Self, ModelError> {
        if gguf.get(CHAT_TEMPLATE_KEY).is_none() {
            return Ok(ChatTemplate::ChatMl);
        }
        let template = gguf.get_str(CHAT_TEMPLATE_KEY)?;
        if template.contains("<|im_start|>") && template.contains("<|im_end|>") {
            Ok(ChatTemplate::ChatMl)
        } else {
            Err(ModelError::invalid(
                CHAT_TEMPLATE_KEY,
                "not a ChatML template (the only chat format supported)",
            ))
        }
    }

    /// The prompt for one user turn, ending where the assistant's reply
    /// begins. Encode it with special tokens recognised
    /// ([`Tokenizer::encode`](crate::tokenizer::Tokenizer::encode) with
    /// `special = true`).
    ///
    /// ```
    /// use inferno_cpu::model::ChatTemplate;
    /// assert_eq!(
    ///     ChatTemplate::ChatMl.user_turn("Hi"),
    ///     "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    /// );
    /// ```
    pub fn user_turn(&self, prompt: &str) -> String {
        match self {
            ChatTemplate::ChatMl => {
                format!("<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::Writer;

    fn with_template(t: Option<&str>) -> Vec<u8> {
        let mut w = Writer::new();
        if let Some(t) = t {
            w.add_str(CHAT_TEMPLATE_KEY, t).unwrap();
        }
        w.to_bytes().unwrap()
    }

    #[test]
    fn chatml_templates_are_recognised_and_others_refused() {
        let qwen = "{%- for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endfor %}";
        for (t, ok) in [
            (None, true),
            (Some(qwen), true),
            (Some("[INST] {{ x }} [/INST]"), false),
        ] {
            let bytes = with_template(t);
            let gguf = Gguf::parse(&bytes).unwrap();
            assert_eq!(ChatTemplate::from_gguf(&gguf).is_ok(), ok, "{t:?}");
        }
    }
}
