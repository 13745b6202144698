//! Tokenizers: Hugging Face `tokenizer.json` files, chat templates from `tokenizer_config.json`
//! rendered with `minijinja` the way `transformers.apply_chat_template` renders them with
//! Jinja2, and byte-level BPE training for the from-scratch tiny backbones.

use std::path::{Path, PathBuf};

use minijinja::{Environment, Error as JinjaError, ErrorKind, Value as JinjaValue};
use serde::Serialize;
use serde_json::Value;

use crate::error::{BackboneError, Result, read_json, write_atomic};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message of `role`.
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// A Jinja chat template with the special tokens `transformers` passes to it.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    source: String,
    /// Special tokens by name (`bos_token`, `eos_token`, `unk_token`, `pad_token`).
    pub special_tokens: Vec<(String, String)>,
    /// The template compiled once, with transformers' Jinja settings (rendering is per prompt).
    env: std::sync::Arc<Environment<'static>>,
}

/// Python's `json.dumps(v, ensure_ascii=False)` layout (`", "` and `": "` separators, or the
/// indented form), which HF's `tojson` filter produces and templates expect.
fn python_json(v: &Value, indent: Option<usize>, level: usize, out: &mut String) {
    let nl = |out: &mut String, lvl: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * lvl));
        }
    };
    match v {
        Value::Array(a) if !a.is_empty() => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                    if indent.is_none() {
                        out.push(' ');
                    }
                }
                nl(out, level + 1);
                python_json(x, indent, level + 1, out);
            }
            nl(out, level);
            out.push(']');
        }
        Value::Object(m) if !m.is_empty() => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                    if indent.is_none() {
                        out.push(' ');
                    }
                }
                nl(out, level + 1);
                out.push_str(&serde_json::to_string(k).expect("string"));
                out.push_str(": ");
                python_json(x, indent, level + 1, out);
            }
            nl(out, level);
            out.push('}');
        }
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().expect("f64");
            if f.fract() == 0.0 && f.abs() < 1e16 {
                out.push_str(&format!("{f:.1}"))
            } else {
                out.push_str(&n.to_string())
            }
        }
        other => out.push_str(&serde_json::to_string(other).expect("json")),
    }
}

fn tojson(
    value: JinjaValue,
    kwargs: minijinja::value::Kwargs,
) -> std::result::Result<String, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let v: Value = serde_json::to_value(&value)
        .map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let mut out = String::new();
    python_json(&v, indent, 0, &mut out);
    Ok(out)
}

/// `datetime.now().strftime(fmt)` in UTC for the directives templates use
/// (`%Y %m %d %e %b %B %H %M %S %%`); any other directive is an error rather than a guess.
fn strftime_now(fmt: String) -> std::result::Result<String, JinjaError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    format_time(secs, &fmt)
}

/// Formats a Unix time (UTC) with a strftime subset.
fn format_time(secs: i64, fmt: &str) -> std::result::Result<String, JinjaError> {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    // Days to civil date (Howard Hinnant's algorithm).
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('e') => out.push_str(&format!("{day:>2}")),
            Some('b') => out.push_str(&MONTHS[(month - 1) as usize][..3]),
            Some('B') => out.push_str(MONTHS[(month - 1) as usize]),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem % 3600 / 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('%') => out.push('%'),
            other => {
                return Err(JinjaError::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "strftime_now: unsupported directive %{}",
                        other.map_or(String::new(), String::from)
                    ),
                ));
            }
        }
    }
    Ok(out)
}

fn raise_exception(msg: String) -> std::result::Result<JinjaValue, JinjaError> {
    Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
}

impl ChatTemplate {
    /// A template from its Jinja source and special tokens.
    pub fn new(source: impl Into<String>, special_tokens: Vec<(String, String)>) -> Result<Self> {
        let source = source.into();
        let env = std::sync::Arc::new(Self::environment(source.clone())?);
        Ok(Self {
            source,
            special_tokens,
            env,
        })
    }

    /// A template from its Jinja source, with the special tokens (`bos_token`, `eos_token`,
    /// `unk_token`, `pad_token`) that a `tokenizer_config.json` object `cfg` names — as a
    /// string or as an added-token object with `content`.
    pub(crate) fn with_config_tokens(source: impl Into<String>, cfg: &Value) -> Result<Self> {
        let special = ["bos_token", "eos_token", "unk_token", "pad_token"]
            .iter()
            .filter_map(|k| {
                cfg.get(*k)
                    .and_then(token_string)
                    .map(|v| (k.to_string(), v))
            })
            .collect();
        Self::new(source, special)
    }

    fn environment(source: String) -> Result<Environment<'static>> {
        let mut env = Environment::new();
        // transformers: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned("chat", source)
            .map_err(|e| BackboneError::Template(format!("{e:#}")))?;
        Ok(env)
    }

    /// Renders `messages`; with `add_generation_prompt` the assistant header is appended.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let tmpl = self
            .env
            .get_template("chat")
            .map_err(|e| BackboneError::Template(e.to_string()))?;
        let mut ctx: std::collections::BTreeMap<String, JinjaValue> = self
            .special_tokens
            .iter()
            .map(|(k, v)| (k.clone(), JinjaValue::from(v.clone())))
            .collect();
        ctx.insert("messages".into(), JinjaValue::from_serialize(messages));
        ctx.insert(
            "add_generation_prompt".into(),
            JinjaValue::from(add_generation_prompt),
        );
        tmpl.render(ctx)
            .map_err(|e| BackboneError::Template(format!("{e:#}")))
    }
}

/// A tokenizer with its optional chat template.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
    /// From `tokenizer_config.json`, when it has one.
    pub chat_template: Option<ChatTemplate>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("path", &self.path)
            .field("vocab", &self.vocab_size())
            .finish()
    }
}

fn token_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => m.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

impl Tokenizer {
    /// Loads `<dir>/tokenizer.json` (and `<dir>/tokenizer_config.json` if present), a
    /// `tokenizer.json` path, or the tokenizer inside a `.gguf` file.
    pub fn load(path: &Path) -> Result<Self> {
        if crate::gguf::is_gguf(path) {
            return crate::gguf::GgufFile::open(path)?.tokenizer();
        }
        let (file, dir) = if path.is_dir() {
            (path.join("tokenizer.json"), path.to_path_buf())
        } else {
            (
                path.to_path_buf(),
                path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            )
        };
        let inner =
            tokenizers::Tokenizer::from_file(&file).map_err(|e| BackboneError::Tokenizer {
                path: file.clone(),
                msg: e.to_string(),
            })?;
        let chat_template = Self::read_template(&dir)?;
        Ok(Self {
            inner,
            path: file,
            chat_template,
        })
    }

    /// The chat template as transformers finds it: `chat_template.jinja` (5.x), else
    /// `chat_template.json`, else `tokenizer_config.json`'s `chat_template`; the special tokens
    /// come from `tokenizer_config.json`.
    fn read_template(dir: &Path) -> Result<Option<ChatTemplate>> {
        let cfg_file = dir.join("tokenizer_config.json");
        let cfg = if cfg_file.exists() {
            read_json(&cfg_file)?
        } else {
            Value::Object(Default::default())
        };
        let cfg_path = cfg_file.as_path();
        let jinja = dir.join("chat_template.jinja");
        let json_file = dir.join("chat_template.json");
        let from_file = if jinja.exists() {
            Some(Value::String(
                std::fs::read_to_string(&jinja).map_err(|e| BackboneError::io(&jinja, e))?,
            ))
        } else if json_file.exists() {
            read_json(&json_file)?.get("chat_template").cloned()
        } else {
            None
        };
        let source = match from_file.as_ref().or(cfg.get("chat_template")) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(list)) => list
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                .and_then(|t| t.get("template").and_then(Value::as_str))
                .ok_or_else(|| {
                    BackboneError::config(
                        cfg_path,
                        "chat_template",
                        "a list without a `default` template",
                    )
                })?
                .to_string(),
            Some(v) => {
                return Err(BackboneError::config(
                    cfg_path,
                    "chat_template",
                    format!("expected a string, got {v}"),
                ));
            }
        };
        ChatTemplate::with_config_tokens(source, &cfg).map(Some)
    }

    /// Wraps an in-memory tokenizer.
    pub fn from_inner(inner: tokenizers::Tokenizer) -> Self {
        Self {
            inner,
            path: PathBuf::from("<memory>"),
            chat_template: None,
        }
    }

    /// The same tokenizer, labelled with `path` in errors.
    pub fn with_path(mut self, path: PathBuf) -> Self {
        self.path = path;
        self
    }

    /// The underlying `tokenizers` object.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    /// Token ids of `text` (with the tokenizer's special tokens when `add_special_tokens`).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        self.inner
            .encode(text, add_special_tokens)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| BackboneError::Tokenizer {
                path: self.path.clone(),
                msg: e.to_string(),
            })
    }

    /// Text of `ids`.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| BackboneError::Tokenizer {
                path: self.path.clone(),
                msg: e.to_string(),
            })
    }

    /// The id of a token string.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The token that ends an assistant turn in the chat template (its `eos_token`, e.g.
    /// SmolLM2's `<|im_end|>`): where a chat-prompted reply stops. An error without a
    /// template or an `eos_token` in the vocabulary.
    pub fn end_of_turn(&self) -> Result<u32> {
        let eos = self.chat_template.as_ref().and_then(|t| {
            t.special_tokens
                .iter()
                .find(|(k, _)| k == "eos_token")
                .map(|(_, v)| v.clone())
        });
        eos.as_deref()
            .and_then(|e| self.token_id(e))
            .ok_or_else(|| BackboneError::Tokenizer {
                path: self.path.clone(),
                msg: format!(
                    "no end-of-turn token: the chat template's eos_token is {eos:?}, and it \
                     must be one token of the vocabulary"
                ),
            })
    }

    /// Renders a conversation with the chat template.
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String> {
        self.chat_template
            .as_ref()
            .ok_or_else(|| BackboneError::Tokenizer {
                path: self.path.clone(),
                msg: "no chat_template in tokenizer_config.json".into(),
            })?
            .render(messages, add_generation_prompt)
    }

    /// Writes `tokenizer.json` (and `tokenizer_config.json` with the chat template, if any)
    /// into `dir`, atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let json = self
            .inner
            .to_string(true)
            .map_err(|e| BackboneError::Tokenizer {
                path: dir.join("tokenizer.json"),
                msg: e.to_string(),
            })?;
        write_atomic(&dir.join("tokenizer.json"), json.as_bytes())?;
        if let Some(t) = &self.chat_template {
            let mut cfg = serde_json::Map::new();
            cfg.insert(
                "tokenizer_class".into(),
                Value::from("PreTrainedTokenizerFast"),
            );
            cfg.insert("chat_template".into(), Value::from(t.source.clone()));
            for (k, v) in &t.special_tokens {
                cfg.insert(k.clone(), Value::from(v.clone()));
            }
            let text = serde_json::to_string_pretty(&Value::Object(cfg)).expect("json");
            write_atomic(&dir.join("tokenizer_config.json"), text.as_bytes())?;
        }
        Ok(())
    }
}

/// Special tokens of the tiny backbones' tokenizers, in id order (ids 0, 1, 2, ...).
pub const TINY_SPECIAL_TOKENS: [&str; 4] = ["<|pad|>", "<|bos|>", "<|eos|>", "<|sep|>"];

/// A ChatML-style template for the tiny backbones (`<|sep|>role\ncontent<|eos|>`).
pub const TINY_CHAT_TEMPLATE: &str = "{% for message in messages %}{{ '<|sep|>' + message['role'] + '\n' + message['content'] + '<|eos|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|sep|>assistant\n' }}{% endif %}";

/// Trains a byte-level BPE tokenizer (GPT-2 style: every byte is a base symbol, so any text
/// encodes) with `vocab_size` entries including [`TINY_SPECIAL_TOKENS`], deterministically.
pub fn train_bpe<I, S>(texts: I, vocab_size: usize) -> Result<Tokenizer>
where
    I: Iterator<Item = S> + Send,
    S: AsRef<str> + Send,
{
    use tokenizers::AddedToken;
    use tokenizers::models::TrainerWrapper;
    use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    let err = |msg: String| BackboneError::Tokenizer {
        path: PathBuf::from("<training>"),
        msg,
    };
    let specials: Vec<AddedToken> = TINY_SPECIAL_TOKENS
        .iter()
        .map(|t| AddedToken::from(*t, true))
        .collect();
    let base = ByteLevel::alphabet().len() + specials.len();
    if vocab_size < base {
        return Err(err(format!(
            "vocab_size {vocab_size} is below the {base} base symbols"
        )));
    }
    let trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(specials)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut trainer: TrainerWrapper = trainer.into();
    let mut tk = tokenizers::Tokenizer::new(BPE::default());
    tk.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tk.with_decoder(Some(ByteLevel::default()));
    tk.with_post_processor(Some(ByteLevel::default()));
    tk.train(&mut trainer, texts)
        .map_err(|e| err(e.to_string()))?;
    let mut out = Tokenizer::from_inner(tk);
    out.chat_template = Some(ChatTemplate::new(
        TINY_CHAT_TEMPLATE,
        vec![
            ("bos_token".into(), "<|bos|>".into()),
            ("eos_token".into(), "<|eos|>".into()),
            ("pad_token".into(), "<|pad|>".into()),
        ],
    )?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strftime_subset_matches_python() {
        // python: datetime.utcfromtimestamp(1721952000).strftime("%d %b %Y %H:%M") == "26 Jul 2024 00:00"
        assert_eq!(
            format_time(1_721_952_000, "%d %b %Y %H:%M").unwrap(),
            "26 Jul 2024 00:00"
        );
        assert_eq!(
            format_time(951_825_600 + 3_723, "%Y-%m-%d %H:%M:%S %B").unwrap(),
            "2000-02-29 13:02:03 February"
        );
        assert!(format_time(0, "%j").is_err());
    }

    #[test]
    fn python_json_layout() {
        let v: Value = serde_json::from_str(r#"{"a": [1, 2.0, "é"], "b": {}}"#).unwrap();
        let mut s = String::new();
        python_json(&v, None, 0, &mut s);
        assert_eq!(s, r#"{"a": [1, 2.0, "é"], "b": {}}"#);
        let mut s = String::new();
        python_json(&v, Some(2), 0, &mut s);
        assert_eq!(
            s,
            "{\n  \"a\": [\n    1,\n    2.0,\n    \"é\"\n  ],\n  \"b\": {}\n}"
        );
    }

    #[test]
    fn bpe_trains_round_trips_and_is_deterministic() {
        let corpus: Vec<String> = (0..200)
            .map(|i| format!("you craft {i} oak planks from oak logs. go to kitchen"))
            .collect();
        let a = train_bpe(corpus.iter(), 300).unwrap();
        let b = train_bpe(corpus.iter(), 300).unwrap();
        assert_eq!(
            a.inner().to_string(false).unwrap(),
            b.inner().to_string(false).unwrap()
        );
        let ids = a.encode("craft 4 oak planks, ünïcode!", false).unwrap();
        assert_eq!(
            a.decode(&ids, false).unwrap(),
            "craft 4 oak planks, ünïcode!"
        );
        assert_eq!(a.token_id("<|pad|>"), Some(0));
        assert_eq!(a.token_id("<|eos|>"), Some(2));
        let chat = a
            .apply_chat_template(&[Message::new("user", "hi")], true)
            .unwrap();
        assert_eq!(chat, "<|sep|>user\nhi<|eos|><|sep|>assistant\n");
        assert_eq!(a.end_of_turn().unwrap(), 2);
    }
}
