//! Commands on a model alone: `convert`, `tokenize`, `generate`. Each takes an HF directory or a
//! `.gguf` file wherever it takes a model.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use hier_backbone::gguf::{GgufFile, is_gguf, write_hf_dir};
use hier_backbone::{CausalLm, GenerationRequest, Message, SamplingConfig, Tokenizer};

/// Whether `path` is something a model loads from: a `.gguf` file or an HF directory.
pub fn is_model(path: &Path) -> bool {
    (is_gguf(path) && path.is_file()) || path.join("config.json").is_file()
}

/// The tokenizer and the model of `path`, an HF directory or a `.gguf` file (read once: it
/// holds both).
pub fn load_model(
    path: &Path,
    device: &hier_backbone::burn::tensor::Device,
) -> Result<(Tokenizer, CausalLm)> {
    let loading = || format!("loading {}", path.display());
    Ok(if is_gguf(path) {
        let file = GgufFile::open(path).with_context(loading)?;
        (
            file.tokenizer().with_context(loading)?,
            CausalLm::from_gguf(&file, device).with_context(loading)?,
        )
    } else {
        (
            Tokenizer::load(path).with_context(loading)?,
            CausalLm::load(path, device).with_context(loading)?,
        )
    })
}

#[derive(Args)]
pub struct ConvertArgs {
    /// The GGUF file.
    #[arg(long)]
    gguf: PathBuf,
    /// The HF directory to write (created; files in it are replaced).
    #[arg(long)]
    out: PathBuf,
}

pub fn convert(a: &ConvertArgs) -> Result<()> {
    let t = std::time::Instant::now();
    let file = GgufFile::open(&a.gguf)?;
    write_hf_dir(&file, &a.out).with_context(|| format!("converting {}", a.gguf.display()))?;
    eprintln!(
        "wrote {} in {:.1} s",
        a.out.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

#[derive(Args)]
pub struct TokenizeArgs {
    /// HF model directory (or a tokenizer.json) or `.gguf` file.
    #[arg(long)]
    model: PathBuf,
    /// The text.
    #[arg(long)]
    text: String,
    /// Render the text as one user message through the model's chat template, with the
    /// generation prompt, and tokenise that.
    #[arg(long)]
    chat: bool,
}

/// The prompt text: `text` itself, or rendered as one user turn with the generation prompt.
fn prompt_text(tok: &Tokenizer, text: &str, chat: bool) -> Result<String> {
    if chat {
        Ok(tok.apply_chat_template(&[Message::new("user", text)], true)?)
    } else {
        Ok(text.to_string())
    }
}

pub fn tokenize(a: &TokenizeArgs) -> Result<()> {
    let tok =
        Tokenizer::load(&a.model).with_context(|| format!("loading {}", a.model.display()))?;
    let ids = tok.encode(&prompt_text(&tok, &a.text, a.chat)?, false)?;
    println!("{}", serde_json::json!({ "ids": ids }));
    Ok(())
}

#[derive(Args)]
pub struct GenerateArgs {
    /// HF model directory or `.gguf` file.
    #[arg(long)]
    model: PathBuf,
    /// The prompt.
    #[arg(long)]
    prompt: String,
    /// Send the prompt as one user message through the model's chat template.
    #[arg(long)]
    chat: bool,
    /// At most this many new tokens.
    #[arg(long, default_value_t = 128)]
    max_new_tokens: usize,
    /// 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Nucleus sampling threshold (with a temperature above 0).
    #[arg(long)]
    top_p: Option<f32>,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// A PEFT adapter directory to apply.
    #[arg(long)]
    adapter: Option<PathBuf>,
    /// cpu | cuda[:N] | wgpu[:N]
    #[arg(long, default_value = "cpu")]
    device: String,
}

pub fn generate(a: &GenerateArgs) -> Result<()> {
    if a.temperature < 0.0 || !a.temperature.is_finite() {
        bail!(
            "--temperature must be 0 (greedy) or positive, got {}",
            a.temperature
        );
    }
    let device = hier_backbone::parse_device(&a.device)?;
    let t = std::time::Instant::now();
    let (tok, mut lm) = load_model(&a.model, &device)?;
    let adapter = match &a.adapter {
        Some(dir) => Some(
            lm.load_adapter("adapter", dir)
                .with_context(|| format!("loading adapter {}", dir.display()))?,
        ),
        None => None,
    };
    let loaded = t.elapsed();
    let prompt = tok.encode(&prompt_text(&tok, &a.prompt, a.chat)?, false)?;
    if prompt.is_empty() {
        bail!("the prompt has no tokens");
    }
    let request = GenerationRequest {
        prompt,
        stop_tokens: lm.config.eos_token_ids.clone(),
        stop_strings: vec![],
    };
    let cfg = SamplingConfig {
        temperature: a.temperature,
        top_p: a.top_p,
        seed: a.seed,
        ..SamplingConfig::greedy(a.max_new_tokens)
    };
    let t = std::time::Instant::now();
    let out = lm
        .generate(std::slice::from_ref(&request), &cfg, adapter, None)?
        .remove(0);
    let text = tok.decode(&out.tokens, true)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", text.trim_end())?;
    eprintln!(
        "{} prompt + {} new tokens ({:?}); load {:.2} s, generation {:.2} s",
        out.prompt_tokens,
        out.tokens.len(),
        out.finish,
        loaded.as_secs_f64(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
