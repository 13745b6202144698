//! `cargo xtask data …`: build datasets from expert demonstrations, summarise dataset files,
//! import the authors' released data.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

use hier_envs::Split;
use hier_multi2::demos::{self, BuildOptions, Segmenter};

#[derive(Subcommand, Debug)]
pub enum DataCmd {
    /// Play an environment's expert on a split and write sys1/sys2/flat datasets
    /// (`.jsonl` and `.pcd`) plus manifest.json.
    Build {
        /// textcraft | scienceworld | alfworld
        #[arg(long)]
        env: String,
        /// train | id | ood
        #[arg(long, default_value = "train")]
        split: String,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Deviation probability per step ("medium" data); 0 = the expert.
        #[arg(long, default_value_t = 0.0)]
        noise: f64,
        /// Probability that an expert able to re-plan (ALFWorld) does so after a deviation.
        #[arg(long, default_value_t = 0.5)]
        recover: f64,
        /// Only the first N tasks of the split.
        #[arg(long)]
        limit: Option<usize>,
        /// textcraft | textcraft-templates | scienceworld | alfworld (default: the env's).
        #[arg(long)]
        segmenter: Option<String>,
    },
    /// Print counts, lengths and reward histograms of a dataset file (.jsonl or .pcd).
    Stats {
        path: PathBuf,
        /// Histogram bins.
        #[arg(long, default_value_t = 10)]
        bins: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Convert the authors' high_data/expert.json and low_data/expert.json into our format.
    Import {
        /// The authors' dataset folder (holding high_data/ and low_data/).
        #[arg(long)]
        from: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
}

pub fn run(cmd: DataCmd) -> Result<()> {
    match cmd {
        DataCmd::Build {
            env,
            split,
            out,
            seed,
            noise,
            recover,
            limit,
            segmenter,
        } => {
            let parsed: Split = split.parse()?;
            let mut e = hier_multi2::EnvKind::parse(&env)?.open()?;
            let segmenter = segmenter
                .map(|s| {
                    serde_json::from_value::<Segmenter>(serde_json::Value::String(s.clone()))
                        .with_context(|| format!("unknown segmenter `{s}`"))
                })
                .transpose()?;
            let tasks = e.tasks(parsed)?;
            if tasks.is_empty() {
                bail!("{env} has no {split} tasks");
            }
            let opts = BuildOptions {
                seed,
                noise,
                recover,
                limit,
                segmenter,
                progress: true,
                ..BuildOptions::default()
            };
            let m = demos::build_dataset(e.as_mut(), &tasks, &split, &out, &opts)
                .with_context(|| format!("building {env} {split} data into {}", out.display()))?;
            println!("{}", serde_json::to_string(&m)?);
            Ok(())
        }
        DataCmd::Stats { path, bins, json } => {
            let s = hier_data::stats::stats(&path, bins)?;
            if json {
                println!("{}", serde_json::to_string(&s)?);
            } else {
                print!("{}", s.render());
            }
            Ok(())
        }
        DataCmd::Import { from, out } => {
            let high = hier_data::import::high_level(&from.join("high_data/expert.json"))?;
            let low = hier_data::import::low_level(&from.join("low_data/expert.json"))?;
            let n1 = hier_data::io::write_both(&out.join("sys1"), &high)?;
            let n2 = hier_data::io::write_both(&out.join("sys2"), &low)?;
            println!(
                "{}",
                serde_json::json!({"sys1": n1, "sys2": n2, "out": out})
            );
            Ok(())
        }
    }
}
