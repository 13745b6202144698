//! How a frozen instruct model's prompts reach it: a prompt with the start of its reply
//! ([`RolePrompt`]), rendered as raw text or as one user message in the tokenizer's chat
//! template ([`Render`]). Shared by the pipeline's roles ([`crate::mas`]) and the search
//! executor ([`crate::search_agent`]).

use hier_backbone::Tokenizer;

use crate::error::Result;

/// A role's prompt: what it is told, and the start of its reply, which the model continues
/// (the searcher's `<search>`, the summariser's `<answer>`: a small model asked for a call
/// otherwise answers in prose).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolePrompt {
    pub text: String,
    pub reply_prefix: &'static str,
}

/// How role prompts reach the model: raw text (the prompt, then the reply's prefix), or one
/// user message in the tokenizer's chat template with the assistant's reply started by the
/// prefix. Chat-rendered roles stop at the template's end-of-turn token
/// ([`Tokenizer::end_of_turn`]).
#[derive(Clone, Copy)]
pub enum Render<'a> {
    Raw,
    Chat(&'a Tokenizer),
}

impl Render<'_> {
    pub fn render(&self, p: &RolePrompt) -> Result<String> {
        Ok(match self {
            Render::Raw => format!("{}{}", p.text, p.reply_prefix),
            Render::Chat(tok) => {
                let user = [hier_backbone::Message::new("user", &p.text)];
                format!(
                    "{}{}",
                    tok.apply_chat_template(&user, true)?,
                    p.reply_prefix
                )
            }
        })
    }
}
