//! Parsing the slow path's output:
//! `<think>…</think><action>pass | stop | guide: … | reject: …</action>`.

use crate::error::{Result, SteerError};

/// What the steering agent decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intervention {
    /// Do nothing.
    Pass,
    /// Inject a guidance note into the executor's next prompt.
    Guide(String),
    /// Reject the current message (pipeline handoff) and ask for a retry, with the reason.
    Reject(String),
    /// Stop the executor's search and have it answer now (retrieval QA's stop-and-answer).
    Stop,
}

/// A parsed slow-path output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowPathOutput {
    /// The reasoning inside `<think>…</think>` (empty if absent).
    pub reasoning: String,
    /// The decision.
    pub intervention: Intervention,
}

fn err(reason: impl Into<String>, text: &str) -> SteerError {
    SteerError::Parse {
        reason: reason.into(),
        excerpt: text.chars().take(80).collect(),
    }
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Result<Option<&'a str>> {
    match text.find(open) {
        None => Ok(None),
        Some(s) => {
            let rest = &text[s + open.len()..];
            let e = rest
                .find(close)
                .ok_or_else(|| err(format!("`{open}` is never closed by `{close}`"), text))?;
            if rest[e + close.len()..].contains(open) {
                return Err(err(format!("more than one `{open}`"), text));
            }
            Ok(Some(&rest[..e]))
        }
    }
}

/// Parses one slow-path output. `<think>` is optional; exactly one `<action>` is required, and its
/// content is `pass`, `stop`, `guide: <note>` or `reject: <reason>` (case-insensitive keyword,
/// non-empty note or reason). Anything else is an error naming what is wrong.
pub fn parse_slow_path(text: &str) -> Result<SlowPathOutput> {
    let reasoning = between(text, "<think>", "</think>")?
        .unwrap_or("")
        .trim()
        .to_string();
    let action = between(text, "<action>", "</action>")?
        .ok_or_else(|| err("no <action>…</action>", text))?
        .trim();
    let lower = action.to_ascii_lowercase();
    let intervention = if lower == "pass" {
        Intervention::Pass
    } else if lower == "stop" {
        Intervention::Stop
    } else if let Some((kw, rest)) = action.split_once(':') {
        let body = rest.trim().to_string();
        match kw.trim().to_ascii_lowercase().as_str() {
            "guide" | "reject" if body.is_empty() => {
                return Err(err(format!("`{}` has an empty text", kw.trim()), text));
            }
            "guide" => Intervention::Guide(body),
            "reject" => Intervention::Reject(body),
            other => {
                return Err(err(
                    format!("unknown action `{other}` (expected pass, stop, guide: or reject:)"),
                    text,
                ));
            }
        }
    } else {
        return Err(err(
            format!("unknown action `{action}` (expected pass, stop, guide: or reject:)"),
            text,
        ));
    };
    Ok(SlowPathOutput {
        reasoning,
        intervention,
    })
}
