//! A `reproduce steering` profile (`configs/steering/<name>.toml`): the data (a synthetic
//! world or files), the retrieval environment, the backbone, the executors, steering training
//! and evaluation settings, and the methods compared. Unknown keys are errors naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hier_envs::qa::world::WorldConfig;
use hier_train::sft::SftSpec;
use hier_train::stages::BackboneSpec;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::search_agent::DriftConfig;
use crate::steer_agent::SteerConfig;
use crate::steer_train::{ExecutorSampling, SteerTrainConfig};
use hier_train::SharedErrors as _;

/// Questions and passages from files. Relative paths are read from the working directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QaFiles {
    /// Corpus rows (`{"id", "contents": "\"Title\"\ntext"}`): the in-process index's
    /// documents, and a pre-trained tiny backbone's text. Needed unless `retriever_url` is set
    /// and every backbone is an HF checkpoint.
    #[serde(default)]
    pub corpus: Option<PathBuf>,
    /// Keep the in-process BM25 index in this directory: built from `corpus` when it holds
    /// none, opened when it does (wiki-18's 21 M passages take a while to index). Absent: the
    /// index lives in memory.
    #[serde(default)]
    pub index: Option<PathBuf>,
    /// An ASearcher-compatible retrieval server (`POST /retrieve`, `POST /access`) to use
    /// instead of the in-process index.
    #[serde(default)]
    pub retriever_url: Option<String>,
    /// Seconds per request to `retriever_url`.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    /// Training questions: the state bank's and steering training's.
    pub train: PathBuf,
    /// Test sets by name (e.g. the seven benchmarks); evaluation spreads `eval.tasks`
    /// questions over each, and the report gives F1 per set.
    pub test: BTreeMap<String, PathBuf>,
}

fn default_timeout() -> f64 {
    30.0
}

impl QaFiles {
    pub fn check(&self) -> Result<()> {
        if self.test.is_empty() {
            return Err(Error::invalid("files.test names no question set".into()));
        }
        if self.corpus.is_none() && self.retriever_url.is_none() {
            return Err(Error::invalid(
                "files needs a `corpus` or a `retriever_url`".into(),
            ));
        }
        if self.index.is_some() && self.retriever_url.is_some() {
            return Err(Error::invalid(
                "files.index is the in-process index; it cannot go with retriever_url".into(),
            ));
        }
        if !self.timeout_s.is_finite() || self.timeout_s <= 0.0 {
            return Err(Error::invalid(format!(
                "files.timeout_s = {} must be positive",
                self.timeout_s
            )));
        }
        Ok(())
    }
}

/// The retrieval environment's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QaSpec {
    /// Passages per search.
    pub topk: usize,
    /// Turn limits in training (demonstrations, the bank, continuations) and evaluation
    /// (ASearcher: 32 / 64).
    pub train_max_turns: usize,
    pub eval_max_turns: usize,
}

/// A frozen executor: a backbone (the profile's, or its own: another size or family), and
/// optionally a LoRA SFT adapter on search demonstrations with drift — the synthetic world
/// only, since demonstrations follow its gold paths. Without `sft` the backbone plays as it is
/// (an instruct checkpoint, as in the paper).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSpec {
    /// Its name in tables and stage names: `main` for the training executor; transfer
    /// executors need their own (letters, digits, `-`, `_`, `.`).
    #[serde(default = "main_executor")]
    pub name: String,
    /// Its own backbone; absent: the profile's `backbone`, shared with the steering agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backbone: Option<BackboneSpec>,
    /// Training questions demonstrated (spread over the train split), with `sft` only.
    #[serde(default)]
    pub demos: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftConfig>,
    /// LoRA SFT on the demonstrations; absent: no adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sft: Option<SftSpec>,
    /// Prompt it as an instruct model: each prompt one user message in the chat template, a
    /// turn ending at its call's closing tag (`</search>`, `</access>`, `</answer>`) rather
    /// than at the end of a line.
    #[serde(default)]
    pub chat: bool,
    /// Show it a worked example and start its replies at a call
    /// ([`crate::search_agent::ExecutorPrompting`]): a small instruct model playing as it is
    /// otherwise writes prose. Only without `sft` (SFT executors learned the plain prompt).
    #[serde(default)]
    pub worked_example: bool,
    pub seed: u64,
}

fn main_executor() -> String {
    "main".into()
}

impl ExecutorSpec {
    /// The adapter (and stage) name of its SFT.
    pub fn adapter(&self) -> String {
        self.tagged("executor")
    }

    /// `what` for the training executor, `what-<name>` for the others: its stage names.
    pub(crate) fn tagged(&self, what: &str) -> String {
        match self.name.as_str() {
            "main" => what.to_owned(),
            name => format!("{what}-{name}"),
        }
    }

    fn check(&self, what: &str, synthetic: bool) -> Result<()> {
        let ok_name = !self.name.is_empty()
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok_name {
            return Err(Error::invalid(format!(
                "{what}.name = `{}`: use letters, digits, `-`, `_` and `.`",
                self.name
            )));
        }
        if self.worked_example && self.sft.is_some() {
            return Err(Error::invalid(format!(
                "{what}.worked_example is for an executor playing as it is: with {what}.sft it \
                 learned the plain prompt; leave one of them out"
            )));
        }
        match (&self.sft, &self.drift) {
            (Some(_), Some(_)) if !synthetic => Err(Error::invalid(format!(
                "{what}.sft trains on demonstrations along gold paths, which only the synthetic \
                 [world] has; with [files], leave it out (the backbone plays as it is)"
            ))),
            (Some(_), Some(_)) if self.demos == 0 => Err(Error::invalid(format!(
                "{what}.demos must be positive with {what}.sft"
            ))),
            (Some(_), None) => Err(Error::invalid(format!("{what}.sft needs {what}.drift"))),
            (None, _) if self.demos > 0 || self.drift.is_some() => Err(Error::invalid(format!(
                "{what}.demos and {what}.drift only apply with {what}.sft"
            ))),
            _ => Ok(()),
        }
    }
}

/// Evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerEvalSpec {
    /// Test questions (spread over the test split).
    pub tasks: usize,
    /// One pass over the questions per seed (executor and steering sampling).
    pub seeds: Vec<u64>,
    /// Episodes played together.
    pub parallel: usize,
    /// The τ sweep of the trained agent (no retraining); `steer.tau` is the main table's τ.
    pub taus: Vec<f64>,
}

/// A `reproduce steering` profile (`configs/steering/<name>.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteeringProfile {
    pub name: String,
    pub seed: u64,
    /// The data: the synthetic world, or files (exactly one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<WorldConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<QaFiles>,
    pub qa: QaSpec,
    pub backbone: BackboneSpec,
    /// Tokens per training sequence at most.
    pub max_len: usize,
    /// The executor the steering agent is trained with, and those it transfers to without
    /// retraining (`[[transfer]]`).
    pub executor: ExecutorSpec,
    #[serde(default)]
    pub transfer: Vec<ExecutorSpec>,
    pub executor_sampling: ExecutorSampling,
    /// The steering agent at deployment.
    pub steer: SteerConfig,
    /// The format-only ("zero-shot") adapter: SFT on random decisions in the protocol.
    pub format_sft: SftSpec,
    /// Training questions whose no-intervention rollouts fill the state bank.
    pub bank_tasks: usize,
    /// `adapter`, `reference`, `executor`, `steer`, `executor_sampling`, `max_len` and `seed`
    /// are set by the pipeline.
    pub train: SteerTrainConfig,
    /// Filtered behaviour cloning (SFT on the training run's outputs that beat no
    /// intervention).
    pub bc: SftSpec,
    pub eval: SteerEvalSpec,
}

impl SteeringProfile {
    /// Reads and checks the profile at `path`, following `extends` ([`hier_train::profile_toml`]).
    pub fn from_file(path: &Path) -> Result<Self> {
        let p: Self = hier_train::profile_toml::read_profile(path)?;
        p.check().map_err(|e| Error::profile(path, e.to_string()))?;
        Ok(p)
    }

    pub fn check(&self) -> Result<()> {
        check_shared(&Shared {
            world: self.world.as_ref(),
            files: self.files.as_ref(),
            qa: &self.qa,
            steer: &self.steer,
            eval: &self.eval,
            bank_tasks: self.bank_tasks,
            pretrains: self.pretrains(),
        })?;
        let synthetic = self.world.is_some();
        if self.executor.name != "main" {
            return Err(Error::invalid(format!(
                "executor.name = `{}`: the training executor is `main`",
                self.executor.name
            )));
        }
        self.executor.check("executor", synthetic)?;
        let mut names = std::collections::BTreeSet::from(["main"]);
        for (i, t) in self.transfer.iter().enumerate() {
            t.check(&format!("transfer[{i}]"), synthetic)?;
            if !names.insert(&t.name) {
                return Err(Error::invalid(format!(
                    "two executors are named `{}`",
                    t.name
                )));
            }
        }
        Ok(())
    }

    /// Whether any backbone of the run is pre-trained from scratch (on the corpus's text).
    pub fn pretrains(&self) -> bool {
        std::iter::once(&self.backbone)
            .chain(self.executors().filter_map(|e| e.backbone.as_ref()))
            .any(|b| matches!(b, BackboneSpec::Pretrain { .. }))
    }

    /// The training executor, then the transfer executors.
    pub fn executors(&self) -> impl Iterator<Item = &ExecutorSpec> {
        std::iter::once(&self.executor).chain(&self.transfer)
    }
}

/// What both steering profiles (`reproduce steering`, `reproduce steering-mas`) hold alike,
/// for [`check_shared`].
pub(crate) struct Shared<'a> {
    pub world: Option<&'a WorldConfig>,
    pub files: Option<&'a QaFiles>,
    pub qa: &'a QaSpec,
    pub steer: &'a SteerConfig,
    pub eval: &'a SteerEvalSpec,
    pub bank_tasks: usize,
    pub pretrains: bool,
}

/// The checks both steering profiles share: evaluation, τ, turn limits, the bank, and
/// exactly one of `[world]` and `[files]` (a pre-trained backbone needs a corpus).
pub(crate) fn check_shared(p: &Shared<'_>) -> Result<()> {
    if p.eval.seeds.is_empty() || p.eval.tasks == 0 || p.eval.parallel == 0 {
        return Err(Error::invalid(
            "eval needs seeds, tasks > 0 and parallel > 0".into(),
        ));
    }
    let tau_ok = |t: f64| t > 0.0 && t < 1.0;
    if !tau_ok(p.steer.tau) {
        return Err(Error::invalid(format!(
            "steer.tau = {} is outside (0, 1)",
            p.steer.tau
        )));
    }
    if let Some(t) = p.eval.taus.iter().find(|t| !tau_ok(**t)) {
        return Err(Error::invalid(format!(
            "eval.taus holds {t}, outside (0, 1)"
        )));
    }
    if p.qa.train_max_turns == 0 || p.qa.eval_max_turns == 0 || p.qa.topk == 0 {
        return Err(Error::invalid(
            "qa: topk and turn limits must be positive".into(),
        ));
    }
    if p.bank_tasks == 0 {
        return Err(Error::invalid("bank_tasks must be positive".into()));
    }
    match (p.world, p.files) {
        (Some(_), None) => {}
        (None, Some(f)) => {
            f.check()?;
            if f.corpus.is_none() && p.pretrains {
                return Err(Error::invalid(
                    "a pre-trained (`kind = \"pretrain\"`) backbone needs files.corpus for its text"
                        .into(),
                ));
            }
        }
        _ => {
            return Err(Error::invalid(
                "give exactly one of [world] and [files]".into(),
            ));
        }
    }
    Ok(())
}

/// A comparison method of METHODS.md B. Serialised (stage names and keys, evaluations, tables)
/// as its [`name`](Self::name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SteerMethod {
    /// The executor alone.
    None,
    /// The steering agent's base (its untrained adapter), gated by its fast path.
    ZeroShot,
    /// A supervisor that writes a plan before the first turn.
    Planning,
    /// A supervisor that checks every answer before it is accepted.
    Verification,
    /// The steering agent trained by filtered behaviour cloning of its best samples.
    FilteredBc,
    /// The steering agent trained by GRPO + RankNet (the paper's method).
    Rl,
}

impl SteerMethod {
    /// Every method, in table order.
    pub const ALL: [SteerMethod; 6] = [
        SteerMethod::None,
        SteerMethod::ZeroShot,
        SteerMethod::Planning,
        SteerMethod::Verification,
        SteerMethod::FilteredBc,
        SteerMethod::Rl,
    ];

    /// Its name in stage names, evaluations and tables (`filtered-bc`).
    pub fn name(self) -> &'static str {
        match self {
            SteerMethod::None => "none",
            SteerMethod::ZeroShot => "zero-shot",
            SteerMethod::Planning => "planning",
            SteerMethod::Verification => "verification",
            SteerMethod::FilteredBc => "filtered-bc",
            SteerMethod::Rl => "rl",
        }
    }

    /// How tables and figures name it.
    pub fn label(self) -> &'static str {
        match self {
            SteerMethod::None => "No steering",
            SteerMethod::ZeroShot => "Zero-shot steering",
            SteerMethod::Planning => "Planning supervisor",
            SteerMethod::Verification => "Verification supervisor",
            SteerMethod::FilteredBc => "Filtered BC steering",
            SteerMethod::Rl => "RL steering (ours)",
        }
    }

    /// The steering adapter it runs (`None`: no steering agent).
    pub fn adapter(self) -> Option<&'static str> {
        match self {
            SteerMethod::None => None,
            SteerMethod::Rl => Some("steer-rl"),
            SteerMethod::FilteredBc => Some("steer-bc"),
            SteerMethod::ZeroShot | SteerMethod::Planning | SteerMethod::Verification => {
                Some("steer-zero")
            }
        }
    }

    /// Whether its interventions are gated by the fast path (so it runs at a threshold τ).
    pub fn gated(self) -> bool {
        matches!(
            self,
            SteerMethod::ZeroShot | SteerMethod::FilteredBc | SteerMethod::Rl
        )
    }
}

impl std::fmt::Display for SteerMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `configs/steering/<name>.toml` under the workspace root `root`.
pub fn profile_path(root: &Path, name: &str) -> PathBuf {
    root.join("configs")
        .join("steering")
        .join(format!("{name}.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_serialise_as_their_names_and_run_the_adapter_they_say() {
        let names = SteerMethod::ALL.map(SteerMethod::name);
        assert_eq!(
            names,
            [
                "none",
                "zero-shot",
                "planning",
                "verification",
                "filtered-bc",
                "rl"
            ]
        );
        for m in SteerMethod::ALL {
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<SteerMethod>(&json).unwrap(), m);
        }
        let err = serde_json::from_str::<SteerMethod>("\"ppo\"").unwrap_err();
        assert!(err.to_string().contains("filtered-bc"), "{err}");
        // Only the no-steering row runs without the steering agent; the supervisors use the
        // untrained adapter on a fixed schedule, the gated methods their own adapters at τ.
        let runs: Vec<_> = SteerMethod::ALL
            .iter()
            .map(|m| (m.adapter(), m.gated()))
            .collect();
        assert_eq!(
            runs,
            [
                (None, false),
                (Some("steer-zero"), true),
                (Some("steer-zero"), false),
                (Some("steer-zero"), false),
                (Some("steer-bc"), true),
                (Some("steer-rl"), true),
            ]
        );
    }
}
