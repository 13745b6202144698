//! The outputs of `reproduce table1`: `table1.md` (ours, then the paper's numbers in a
//! separate, labelled table, then the ablations), `table1.json` (everything), `table1.csv` (one
//! row per cell), `ablations.csv` (one row per variant, seed and split), the figures and
//! `traces/` (sample episodes, [`crate::table1::traces`]).

use std::collections::BTreeMap;

use hier_envs::Split;
use serde::Serialize;

use crate::envs::{EnvKind, split_label};
use crate::error::Result;
use crate::online_rl::CurvePoint;
use crate::table1::profile::{Ablation, Method, Profile};
use crate::table1::results::{AblationCell, AblationRow, Cell, ablation_rows, success_points};
use crate::table1::traces::MethodTraces;
use hier_train::eval::EpisodeResult;
use hier_train::metrics::token_efficiency;
use hier_train::metrics::{
    PairedDifference, estimate, paired_by_key, paired_on_shared_keys, show_paired,
};
use hier_train::stages::write_json;
use hier_train::stages::{RunConfig, StageRecord};

/// The paper's Table 1 (success %, Llama-3.1 8B Instruct; METHODS.md A.2): `(method, SciW ID,
/// SciW OOD, ALFW ID, ALFW OOD, TextCraft)`. Shown beside ours, never mixed into our columns.
pub const PAPER_LLAMA_8B: [(&str, [f64; 5]); 6] = [
    ("ReAct", [23.23, 10.30, 6.72, 7.46, 9.00]),
    ("Reflexion", [23.20, 6.97, 35.71, 29.29, 11.00]),
    ("ADaPT", [26.20, 12.27, 11.54, 6.41, 5.00]),
    ("GRPO", [25.79, 4.61, 8.57, 7.50, 5.50]),
    ("Glider", [60.48, 34.36, 43.57, 37.86, 9.50]),
    ("Multi²", [67.61, 30.68, 57.86, 56.43, 35.60]),
];

#[derive(Serialize)]
struct Json<'a> {
    profile: &'a Profile,
    commit: Option<String>,
    wall_seconds: f64,
    cells: &'a [Cell],
    /// Success per token relative to ReAct on the same column (absent where undefined, e.g.
    /// when ReAct solves nothing).
    token_efficiency_vs_react: BTreeMap<String, f64>,
    ablations: Vec<AblationRow>,
    ablation_cells: &'a [AblationCell],
    learning_curves: &'a BTreeMap<String, Vec<CurvePoint>>,
    stages: &'a [StageRecord],
    paper_llama_3_1_8b: Vec<(&'static str, [f64; 5])>,
    /// The paper's claims read against this run ([`crate::table1::claims`]).
    claims: &'a [crate::table1::claims::Claim],
}

fn commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The `Pairs | Δ success (points) | Δ final score` columns of a paired row (`–` where nothing
/// paired).
fn paired_columns(success: &Option<PairedDifference>, score: &Option<PairedDifference>) -> String {
    format!(
        "{} | {} | {}",
        success.map_or("–".into(), |d| d.n.to_string()),
        show_paired(success, 1),
        show_paired(score, 3),
    )
}

/// Multi² against every other method, per column, on the same (task, seed) pairs: the paired
/// differences of success (percentage points) and final score (Multi² − the method) with 95 %
/// bootstrap intervals, on the pairs both played (Reflexion's two evaluation seeds against
/// Multi²'s three: the `Pairs` column says how many); `–` where they share none.
fn paired_section(profile: &Profile, cells: &[Cell]) -> String {
    let mut md = String::from(
        "\n## Multi² against each method, paired on the same tasks and seeds (Multi² − method; 95 % bootstrap interval)\n\n| Column | Method | Pairs | Δ success (points) | Δ final score |\n|---|---|---|---|---|\n",
    );
    let mut any = false;
    for (env, split) in crate::envs::columns() {
        let Some(m2) = cells
            .iter()
            .find(|c| c.method == Method::Multi2 && c.env == env && c.split == split)
        else {
            continue;
        };
        let success = |c: &Cell| c.keyed(success_points);
        let score = |c: &Cell| c.keyed(|r| r.score);
        for m in profile.methods.iter().filter(|m| **m != Method::Multi2) {
            let Some(other) = cells
                .iter()
                .find(|c| c.method == *m && c.env == env && c.split == split)
            else {
                continue;
            };
            let ds = paired_on_shared_keys(&success(other), &success(m2));
            let dv = paired_on_shared_keys(&score(other), &score(m2));
            any = true;
            md.push_str(&format!(
                "| {} | {} | {} |\n",
                env.column_label(split),
                m.label(),
                paired_columns(&ds, &dv),
            ));
        }
    }
    if any { md } else { String::new() }
}

/// Each ablation variant against Multi², per split, on the episodes both played — the same
/// (training seed, task, evaluation seed) — pooled over the training seeds both ran: the paired
/// differences of success (points) and final score (variant − Multi²) with 95 % bootstrap
/// intervals. Like Table 1's pairs it holds the trained adapters fixed; the claims' (e)
/// verdicts read the spread over training seeds instead.
fn ablation_paired_section(variants: &[Ablation], cells: &[AblationCell]) -> String {
    let mut md = String::from(
        "\n### Each variant against Multi², paired on the same training seed, task and evaluation seed (variant − Multi²; 95 % bootstrap interval)\n\n| Split | Variant | Training seeds | Pairs | Δ success (points) | Δ final score |\n|---|---|---|---|---|---|\n",
    );
    let mut any = false;
    for split in [Split::Id, Split::Ood] {
        let of = |v: Ablation| -> Vec<&AblationCell> {
            cells
                .iter()
                .filter(|c| c.variant == v && c.split == split)
                .collect()
        };
        let m2 = of(Ablation::Multi2);
        for &v in variants.iter().filter(|v| **v != Ablation::Multi2) {
            let ours = of(v);
            let seeds: Vec<u64> = ours
                .iter()
                .map(|c| c.seed)
                .filter(|s| m2.iter().any(|c| c.seed == *s))
                .collect();
            if seeds.is_empty() {
                continue;
            }
            // Variant − Multi² of `f` over the episodes of the shared training seeds.
            let paired = |f: &dyn Fn(&EpisodeResult) -> f64| {
                let pooled = |cs: &[&AblationCell]| -> BTreeMap<_, _> {
                    cs.iter()
                        .filter(|c| seeds.contains(&c.seed))
                        .flat_map(|c| c.keyed(f))
                        .collect()
                };
                paired_by_key(&pooled(&m2), &pooled(&ours))
            };
            let ds = paired(&success_points);
            let dv = paired(&|r| r.score);
            any = true;
            md.push_str(&format!(
                "| {} | {v} | {seeds:?} | {} |\n",
                split_label(split),
                paired_columns(&ds, &dv),
            ));
        }
    }
    if any { md } else { String::new() }
}

/// What a run measured, as the report reads it.
pub struct Measured<'a> {
    /// The main table's cells (method × column).
    pub cells: &'a [Cell],
    /// The ablations' cells (variant × training seed × split).
    pub ablation_cells: &'a [AblationCell],
    /// Multi²'s offline → online learning curve per environment.
    pub curves: &'a BTreeMap<String, Vec<CurvePoint>>,
    /// Sample episodes per method and environment.
    pub traces: &'a [MethodTraces],
}

/// Writes `table1.{md,json,csv}`, the figures and `traces/` into `cfg.out`.
pub fn write(
    profile: &Profile,
    cfg: &RunConfig,
    measured: Measured<'_>,
    stages: &[StageRecord],
    wall_seconds: f64,
) -> Result<()> {
    let Measured {
        cells,
        ablation_cells,
        curves,
        traces: sample_traces,
    } = measured;
    let find = |m: Method, env: EnvKind, split: Split| {
        cells
            .iter()
            .find(|c| c.method == m && c.env == env && c.split == split)
    };
    // Token efficiency (success per token) relative to ReAct on the same column.
    let mut eff = BTreeMap::new();
    for c in cells {
        if let Some(r) = find(Method::React, c.env, c.split) {
            let e = token_efficiency(
                c.summary.success.mean,
                c.summary.mean_tokens,
                r.summary.success.mean,
                r.summary.mean_tokens,
            );
            if e.is_finite() {
                eff.insert(format!("{}/{}/{:?}", c.method, c.env, c.split), e);
            }
        }
    }
    let commit = commit();
    let mut md = String::new();
    // Environments may evaluate on their own number of tasks (`per_env.<env>.eval`).
    // Each environment's view of the profile, resolved once for both notes below.
    let per_env: Vec<(EnvKind, Profile)> = (profile.envs.iter())
        .map(|e| (*e, profile.for_env(*e)))
        .collect();
    let per_env_tasks: Vec<String> = (per_env.iter())
        .filter(|(_, p)| p.eval.tasks_per_split != profile.eval.tasks_per_split)
        .map(|(e, p)| format!("{} on {e}", p.eval.tasks_per_split))
        .collect();
    let tasks = if per_env_tasks.is_empty() {
        format!("at most {} tasks per split", profile.eval.tasks_per_split)
    } else {
        format!(
            "at most {} tasks per split ({})",
            profile.eval.tasks_per_split,
            per_env_tasks.join(", ")
        )
    };
    md.push_str(&format!(
        "# Table 1 — profile `{}`\n\nCommit `{}`, wall time {:.1} min (stages done before this run count as 0), evaluation seeds {:?}, {tasks}.\n\n",
        profile.name,
        commit.as_deref().unwrap_or("unknown"),
        wall_seconds / 60.0,
        profile.eval.seeds,
    ));
    // A column kept to some kinds of task is not the benchmark's column: say so above the table.
    for (e, p) in &per_env {
        let types = &p.data.task_types;
        if !types.is_empty() {
            md.push_str(&format!(
                "**{e} is kept to {} task types** (`per_env.{e}.data.task_types`; training and evaluation): {}.\n\n",
                types.len(),
                types.join(", ")
            ));
        }
    }
    if cfg.report_only {
        md.push_str("Report only (`--report-only`): assembled from the stages done in this directory, nothing trained or played; a cell whose evaluation is not done reads *not done*.\n\n");
    }
    md.push_str("## Ours: success % (mean over seeds ± 95 % t-interval half-width; ᵉ: one evaluation seed, the t-interval over the cell's episodes)\n\n");
    let columns: Vec<(EnvKind, Split, String)> = crate::envs::columns()
        .map(|(e, s)| (e, s, e.column_label(s)))
        .collect();
    md.push_str("| Method |");
    for (_, _, label) in &columns {
        md.push_str(&format!(" {label} |"));
    }
    md.push_str(&format!("\n|---|{}\n", "---|".repeat(columns.len())));
    for m in &profile.methods {
        md.push_str(&format!("| {} |", m.label()));
        for &(env, split, _) in &columns {
            let cell = if !profile.envs.contains(&env) {
                "not run".to_owned()
            } else {
                match find(*m, env, split) {
                    Some(c) => {
                        let (e, over_episodes) = c.success_interval();
                        match e.half_width {
                            Some(h) if over_episodes => format!("{:.1} ± {h:.1}ᵉ", e.mean),
                            Some(h) => format!("{:.1} ± {h:.1}", e.mean),
                            None => format!("{:.1}", e.mean),
                        }
                    }
                    None if cfg.report_only => "not done".to_owned(),
                    None => "—".to_owned(),
                }
            };
            md.push_str(&format!(" {cell} |"));
        }
        md.push('\n');
    }
    md.push_str("\nReflexion's cells are pass@{trials} (its first trial alone, pass@1, is in the next table); ReAct, Reflexion and ADaPT prompt the backbone without fine-tuning.\n".replace("{trials}", &profile.prompted.reflexion_trials.to_string()).as_str());
    md.push_str("\n## Tokens per episode and token efficiency (success per token, ReAct = 1; — where undefined, e.g. ReAct at 0 %)\n\n| Method | Column | Episodes | Mean final score | Tokens/episode | Steps/episode | Efficiency | Easy / Medium / Hard success % | pass@1 |\n|---|---|---|---|---|---|---|---|---|\n");
    for c in cells {
        let label = c.env.column_label(c.split);
        let diff: Vec<String> = ["Easy", "Medium", "Hard"]
            .iter()
            .map(|d| {
                c.summary
                    .by_difficulty
                    .get(*d)
                    .map_or("—".into(), |v| format!("{v:.0}"))
            })
            .collect();
        md.push_str(&format!(
            "| {} | {label} | {} | {:.3} | {:.0} | {:.1} | {} | {} | {} |\n",
            c.method.label(),
            c.summary.episodes,
            c.summary.mean_score,
            c.summary.mean_tokens,
            c.summary.mean_steps,
            eff.get(&format!("{}/{}/{:?}", c.method, c.env, c.split))
                .filter(|v| v.is_finite())
                .map_or("—".into(), |v| format!("{v:.2}")),
            diff.join(" / "),
            c.summary.pass1.map_or("".into(), |p| format!("{p:.1}"))
        ));
    }
    md.push_str(&paired_section(profile, cells));
    let claims = crate::table1::claims::claims(cells, ablation_cells);
    md.push_str(&crate::table1::claims::section(&claims));
    if !curves.is_empty() {
        md.push_str("\n## Offline → online learning curve (Multi², success % / mean final score of the training rollouts; iteration 0 = the offline policy)\n\n| Env | ");
        let n = curves.values().map(Vec::len).max().unwrap_or(0);
        md.push_str(
            &(0..n)
                .map(|i| format!("it {i}"))
                .collect::<Vec<_>>()
                .join(" | "),
        );
        md.push_str(" |\n|---|");
        md.push_str(&"---|".repeat(n));
        md.push('\n');
        for (env, c) in curves {
            md.push_str(&format!("| {env} | "));
            md.push_str(
                &c.iter()
                    .map(|p| format!("{:.0} / {:.3}", 100.0 * p.success_rate, p.mean_score))
                    .collect::<Vec<_>>()
                    .join(" | "),
            );
            md.push_str(" |\n");
        }
    }
    md.push_str("\n## The paper's numbers (Llama-3.1 8B Instruct backbone; not ours)\n\n| Method | SciW ID | SciW OOD | ALFW ID | ALFW OOD | TextCraft |\n|---|---|---|---|---|---|\n");
    for (m, v) in PAPER_LLAMA_8B {
        md.push_str(&format!(
            "| {m} (paper) | {} |\n",
            v.map(|x| format!("{x:.2}")).join(" | ")
        ));
    }
    // A stage several methods read is recorded once per reader; it ran once.
    let distinct = hier_train::stages::distinct_stages(stages);
    md.push_str(&format!(
        "\nStage compute time as recorded when each stage ran: {:.1} min over {} stages ({} without a recorded time).\n\nOur backbone: {}. Glider: one shared adapter, SFT on both levels, advantage-weighted offline RL of the low level, then online GRPO on its high-level decisions only. GRPO: outcome-reward GRPO on whole episodes from the flat SFT adapter. Stages: {} ({} reused from an earlier run).\n",
        distinct.iter().filter_map(|s| s.ran_seconds).sum::<f64>() / 60.0,
        distinct.len(),
        distinct.iter().filter(|s| s.ran_seconds.is_none()).count(),
        match &profile.backbone {
            hier_train::stages::BackboneSpec::Pretrain { model, .. } => format!(
                "a {}-layer, {}-wide Llama-style model pre-trained from scratch on the environments' expert text",
                model.num_hidden_layers, model.hidden_size
            ),
            hier_train::stages::BackboneSpec::Hf { path } => format!("the checkpoint at `{}`", path.display()),
        },
        distinct.len(),
        distinct.iter().filter(|s| s.cached).count()
    ));
    let rows = ablation_rows(profile, ablation_cells);
    if let Some(ab) = &profile.ablations {
        md.push_str(&format!(
            "\n## Ablations ({}, training seeds {:?}, {} tasks per split, evaluation seeds {:?})\n\nSuccess % and mean final score: mean over training seeds ± 95 % t-interval half-width, then the per-seed values.\n\n| Variant | Split | Success % | Mean final score | Per seed: success % / score |\n|---|---|---|---|---|\n",
            ab.env, ab.seeds, ab.tasks_per_split, ab.eval_seeds
        ));
        let pm = |xs: &[f64], digits: usize| {
            let e = estimate(xs);
            match e.half_width {
                Some(h) => format!("{:.*} ± {:.*}", digits, e.mean, digits, h),
                None => format!("{:.*}", digits, e.mean),
            }
        };
        for r in &rows {
            let per: Vec<String> = r
                .seeds
                .iter()
                .zip(r.success.iter().zip(&r.mean_score))
                .map(|(s, (a, b))| format!("s{s}: {a:.0} / {b:.3}"))
                .collect();
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                r.variant,
                split_label(r.split),
                pm(&r.success, 1),
                pm(&r.mean_score, 3),
                per.join(", ")
            ));
        }
        let mut csv =
            String::from("variant,seed,env,split,success,mean_score,mean_tokens,episodes\n");
        for c in ablation_cells {
            csv.push_str(&format!(
                "{},{},{},{:?},{:.4},{:.4},{:.1},{}\n",
                c.variant,
                c.seed,
                c.env,
                c.split,
                c.summary.success.mean,
                c.summary.mean_score,
                c.summary.mean_tokens,
                c.summary.episodes
            ));
        }
        hier_backbone::write_atomic(&cfg.out.join("ablations.csv"), csv.as_bytes())?;
        md.push_str(&ablation_paired_section(&ab.variants, ablation_cells));
    }
    if !sample_traces.is_empty() {
        md.push_str(&format!(
            "\nSample episodes, step by step (per method and environment, the first solved and the first failed episode of each split): {}.\n",
            sample_traces
                .iter()
                .map(|t| format!("[{0}-{1}](traces/{0}-{1}.md)", t.env.name(), t.method.name()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    hier_backbone::write_atomic(&cfg.out.join("table1.md"), md.as_bytes())?;
    crate::table1::traces::write(&cfg.out, &profile.name, sample_traces)?;

    let mut csv = String::from(
        "method,env,split,success_mean,success_half_width,seeds,episodes,mean_score,mean_tokens,mean_steps\n",
    );
    for c in cells {
        csv.push_str(&format!(
            "{},{},{:?},{:.4},{},{},{},{:.4},{:.1},{:.2}\n",
            c.method,
            c.env,
            c.split,
            c.summary.success.mean,
            c.summary
                .success
                .half_width
                .map_or(String::new(), |h| format!("{h:.4}")),
            c.summary.success.n,
            c.summary.episodes,
            c.summary.mean_score,
            c.summary.mean_tokens,
            c.summary.mean_steps
        ));
    }
    hier_backbone::write_atomic(&cfg.out.join("table1.csv"), csv.as_bytes())?;
    write_json(
        &cfg.out.join("table1.json"),
        &Json {
            profile,
            commit,
            wall_seconds,
            cells,
            token_efficiency_vs_react: eff.clone(),
            ablations: rows.clone(),
            ablation_cells,
            learning_curves: curves,
            stages,
            paper_llama_3_1_8b: PAPER_LLAMA_8B.to_vec(),
            claims: &claims,
        },
    )?;
    crate::table1::figures::draw_all(&cfg.out, profile, cells, curves, &eff, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(method: Method, seeds: &[u64], success: impl Fn(u64, u64) -> bool) -> Cell {
        let results: Vec<EpisodeResult> = seeds
            .iter()
            .flat_map(|&seed| {
                let success = &success;
                (0..4u64).map(move |t| EpisodeResult {
                    task: hier_envs::Task::new("id", t),
                    seed,
                    success: success(t, seed),
                    score: if success(t, seed) { 1.0 } else { 0.25 },
                    steps: 5,
                    tokens: 100,
                    sys1_calls: 1,
                    expert_steps: Some(5),
                    pass1: None,
                })
            })
            .collect();
        Cell::new(method, EnvKind::Textcraft, Split::Id, results)
    }

    /// By hand: Multi² solves every (task, seed) pair and ReAct none, so every paired
    /// difference is +100 points (+0.75 in score) and the interval has zero width; Reflexion
    /// played other seeds, so nothing pairs.
    #[test]
    fn multi2_is_paired_with_each_method_on_the_same_tasks_and_seeds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let profile = Profile::from_file(&root.join("configs/table1/smoke.toml")).unwrap();
        assert!(profile.methods.contains(&Method::React));
        let cells = [
            cell(Method::Multi2, &[0, 1], |_, _| true),
            cell(Method::React, &[0, 1], |_, _| false),
            cell(Method::Reflexion, &[7], |t, _| t == 0),
        ];
        let md = paired_section(&profile, &cells);
        assert!(
            md.contains(
                "| TextCraft | ReAct | 8 | +100.0 [+100.0, +100.0] | +0.750 [+0.750, +0.750] |"
            ),
            "{md}"
        );
        assert!(md.contains("| TextCraft | Reflexion | – | – | – |"), "{md}");
        assert_eq!(paired_section(&profile, &cells[1..]), "");
    }

    /// An ablation cell of training seed `seed` over the four tasks of [`cell`], played with
    /// evaluation seed `eval_seed`.
    fn ablation(
        variant: Ablation,
        seed: u64,
        eval_seed: u64,
        success: impl Fn(u64) -> bool,
    ) -> AblationCell {
        let results = cell(Method::Multi2, &[eval_seed], |t, _| success(t)).results;
        AblationCell::new(variant, seed, EnvKind::Scienceworld, Split::Id, results)
    }

    /// By hand: Multi² solves every episode of training seeds 0 and 1; released code none of
    /// either (8 pairs, every difference −100 points and −0.75 in score: a zero-width
    /// interval); the swap ran seed 0 alone, solving tasks 0 and 1 (4 pairs: 0, 0, −100, −100,
    /// mean −50); only-SFT played another evaluation seed (nothing pairs); vanilla-AWAC ran a
    /// training seed Multi² did not (no row); OOD has no cells (no rows).
    #[test]
    fn ablations_are_paired_with_multi2_on_the_same_seeds_and_tasks() {
        let cells = [
            ablation(Ablation::Multi2, 0, 0, |_| true),
            ablation(Ablation::Multi2, 1, 0, |_| true),
            ablation(Ablation::ReleasedCode, 0, 0, |_| false),
            ablation(Ablation::ReleasedCode, 1, 0, |_| false),
            ablation(Ablation::ParadigmSwap, 0, 0, |t| t < 2),
            ablation(Ablation::OnlySft, 0, 5, |_| true),
            ablation(Ablation::VanillaAwac, 2, 0, |_| false),
        ];
        let variants = [
            Ablation::Multi2,
            Ablation::ParadigmSwap,
            Ablation::OnlySft,
            Ablation::VanillaAwac,
            Ablation::ReleasedCode,
        ];
        let md = ablation_paired_section(&variants, &cells);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ID ")).collect();
        assert_eq!(rows.len(), 3, "{md}");
        assert!(
            rows[0].starts_with("| ID | paradigm-swap | [0] | 4 | -50.0 ["),
            "{md}"
        );
        assert_eq!(rows[1], "| ID | only-sft | [0] | – | – | – |", "{md}");
        assert_eq!(
            rows[2],
            "| ID | released-code | [0, 1] | 8 | -100.0 [-100.0, -100.0] | -0.750 [-0.750, -0.750] |",
            "{md}"
        );
        assert!(!md.contains("| OOD "), "{md}");
        assert_eq!(ablation_paired_section(&variants, &cells[2..]), "");
    }
}
