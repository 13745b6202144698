//! A `reproduce table1` profile (`configs/table1/<name>.toml`): environments, methods, the
//! backbone, data, every trainer's settings, evaluation and the ablations. Unknown keys are
//! errors naming the file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::agent::RolloutConfig;
use crate::envs::EnvKind;
use crate::error::{Error, Result};
use crate::grpo::GrpoConfig;
use crate::offline_rl::OfflineRlConfig;
use crate::online_rl::OnlineRlConfig;
use crate::react::PromptedSpec;
use hier_backbone::serde_skip::is_default;
use hier_rl_losses::Variant;
use hier_train::SharedErrors as _;
use hier_train::sft::SftSpec;
use hier_train::stages::BackboneSpec;

/// Expert data per environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    /// Training tasks played by the expert, spread over the train split.
    pub train_episodes: usize,
    /// Tokens per example at most (over-long prompts lose their middle: `roles::fit_prompt`).
    pub max_len: usize,
    /// Only tasks of these kinds (their [`Task::name`](hier_envs::Task::name): ScienceWorld's
    /// task types, e.g. `test-conductivity`), in every split the environment's stages play:
    /// the expert's training tasks, online RL's and GRPO's, and the evaluation's. Empty (the
    /// default, left out of stage keys): every task. Names are one environment's own, so it is
    /// set per environment (`per_env.<env>.data.task_types`); a name no training task carries
    /// is an error naming it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_types: Vec<String>,
}

/// Evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalSpec {
    /// Tasks per split at most, spread over the split.
    pub tasks_per_split: usize,
    /// One full pass over the tasks per seed.
    pub seeds: Vec<u64>,
    /// Environments stepped together.
    pub parallel: usize,
    pub rollout: RolloutConfig,
    /// Decoding: System 1 greedy; System 2 and the flat policy sampled.
    pub planner_max_tokens: usize,
    pub executor_max_tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
    /// Set by the pipeline, never by a profile: for the ablations, the main evaluation's
    /// `tasks_per_split` whose tasks theirs are spread over — their tasks depend on both
    /// counts, so both key their stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset_of: Option<usize>,
}

/// A `reproduce table1` profile (`configs/table1/<name>.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub seed: u64,
    pub envs: Vec<EnvKind>,
    /// Which of Table 1's methods run.
    pub methods: Vec<Method>,
    /// One environment's own settings, replacing the profile's there ([`EnvOverride`]):
    /// ScienceWorld's protocol (ETO) ends an episode at its task's limit of actions (15–120),
    /// so `scienceworld = { rollout = { max_steps = 120, task_turn_limits = true } }` plays each
    /// task to its own limit, where one cap of 40 would cut the long tasks short and let the
    /// short ones run on. Resolved per environment ([`Profile::for_env`]) before any stage is
    /// keyed: an environment without an entry keeps its keys.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_env: BTreeMap<EnvKind, EnvOverride>,
    pub backbone: BackboneSpec,
    pub data: DataSpec,
    pub sft: SftSpec,
    pub offline: OfflineRlConfig,
    pub online: OnlineRlConfig,
    /// The GRPO baseline (flat, from the flat SFT adapter) and Glider's online phase (GRPO on
    /// the planner's decisions of its shared adapter). `adapter`, `reference`, `max_len` and
    /// `seed` are set by the pipeline.
    pub grpo: GrpoConfig,
    pub glider_online: GrpoConfig,
    /// ReAct, Reflexion and ADaPT.
    pub prompted: PromptedSpec,
    pub eval: EvalSpec,
    /// The ablation study (absent: none).
    pub ablations: Option<AblationSpec>,
}

/// One environment's own settings ([`Profile::per_env`]), each a section of the profile
/// with the fields it may change; what it leaves out is the profile's (and a section it leaves
/// out is not written back, so `profile.resolved.toml` shows only what is set).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvOverride {
    /// Every rollout there: evaluation, online RL, GRPO, Glider's online phase (and so the
    /// prompted agents' steps, which follow the evaluation's).
    #[serde(default, skip_serializing_if = "is_default")]
    pub rollout: RolloutOverride,
    /// The expert data there.
    #[serde(default, skip_serializing_if = "is_default")]
    pub data: DataOverride,
    /// Every SFT stage there (flat, System 1, System 2, Glider's).
    #[serde(default, skip_serializing_if = "is_default")]
    pub sft: SftOverride,
    /// The evaluation there (and so the ablations' tasks, a subset of it).
    #[serde(default, skip_serializing_if = "is_default")]
    pub eval: EvalOverride,
    /// GRPO's update there.
    #[serde(default, skip_serializing_if = "is_default")]
    pub grpo: GrpoOverride,
    /// Glider's online update there.
    #[serde(default, skip_serializing_if = "is_default")]
    pub glider_online: GrpoOverride,
}

/// [`EnvOverride::rollout`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutOverride {
    /// [`RolloutConfig::max_steps`].
    pub max_steps: Option<usize>,
    /// [`RolloutConfig::task_turn_limits`].
    pub task_turn_limits: Option<bool>,
}

impl RolloutOverride {
    fn apply(&self, to: &mut RolloutConfig) {
        if let Some(n) = self.max_steps {
            to.max_steps = n;
        }
        if let Some(on) = self.task_turn_limits {
            to.task_turn_limits = on;
        }
    }
}

/// [`EnvOverride::data`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataOverride {
    /// [`DataSpec::train_episodes`].
    pub train_episodes: Option<usize>,
    /// [`DataSpec::task_types`].
    pub task_types: Option<Vec<String>>,
}

/// [`EnvOverride::eval`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalOverride {
    /// [`EvalSpec::tasks_per_split`]: environments whose episodes cost differently (an
    /// ALFWorld game ≈ 3 × a short ScienceWorld task here) need not share one count.
    pub tasks_per_split: Option<usize>,
}

/// [`EnvOverride::grpo`], [`EnvOverride::glider_online`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpoOverride {
    /// [`GrpoConfig::micro_batch`]: the update's memory grows with its rows × the sequences'
    /// length, and environments' prompts differ in length (TextCraft's carry its crafting
    /// commands): 16 rows of 1,024 tokens outgrew 24 GB, where ALFWorld's fit in ≈ 15 GB. Set
    /// per environment, so that the stages of an environment that fits keep their keys.
    pub micro_batch: Option<usize>,
}

/// [`EnvOverride::sft`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SftOverride {
    /// [`SftSpec::steps`].
    pub steps: Option<usize>,
}

impl EnvOverride {
    /// `profile` as this environment's stages see it (the map itself is the caller's).
    fn apply(&self, p: &mut Profile) {
        for rollout in [
            &mut p.eval.rollout,
            &mut p.online.rollout,
            &mut p.grpo.rollout,
            &mut p.glider_online.rollout,
        ] {
            self.rollout.apply(rollout);
        }
        if let Some(n) = self.data.train_episodes {
            p.data.train_episodes = n;
        }
        if let Some(types) = &self.data.task_types {
            p.data.task_types.clone_from(types);
        }
        if let Some(n) = self.sft.steps {
            p.sft.steps = n;
        }
        if let Some(n) = self.eval.tasks_per_split {
            p.eval.tasks_per_split = n;
        }
        p.grpo.micro_batch = self.grpo.micro_batch.or(p.grpo.micro_batch);
        p.glider_online.micro_batch = self
            .glider_online
            .micro_batch
            .or(p.glider_online.micro_batch);
    }
}

/// The ablations of METHODS.md A.2, on one environment, each variant trained once per seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AblationSpec {
    pub env: EnvKind,
    /// Training seeds (the profile's seed reuses the main table's stages).
    pub seeds: Vec<u64>,
    /// Empty: no ablations — how a profile that extends another leaves the base's out (TOML
    /// cannot remove a key; [`Profile::from_file`] reads it as no `[ablations]`).
    pub variants: Vec<Ablation>,
    /// Evaluation: tasks per split (a spread subset of the main table's) and sampling seeds.
    pub tasks_per_split: usize,
    pub eval_seeds: Vec<u64>,
}

/// An ablation of METHODS.md A.2. Serialised (profiles, stage names, tables) as its
/// [`name`](Self::name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ablation {
    /// Multi² itself.
    Multi2,
    /// Multi² before its online phase.
    Multi2Offline,
    /// System 1 by (offline) RL, System 2 by SFT.
    ParadigmSwap,
    /// Both roles by SFT.
    OnlySft,
    /// Both roles by RL.
    OnlyRl,
    /// One flat model (flat SFT).
    Flat,
    /// One adapter for both roles.
    SharedAdapter,
    /// [`Variant::VanillaIql`]: no policy-anchored term (λ = 0).
    VanillaIql,
    /// [`Variant::VanillaAwac`]: no KL anchor (η = 0).
    VanillaAwac,
    /// [`Variant::ReleasedCode`]: the authors' released behaviour (τ 0.5, λ 0, KL k1, SARSA
    /// critic with a trajectory-mean baseline), and on ScienceWorld an online phase that never
    /// samples the offline buffer.
    ReleasedCode,
}

impl Ablation {
    /// Every ablation, in the order of the paper's figures.
    pub const ALL: [Ablation; 10] = [
        Ablation::Multi2,
        Ablation::Multi2Offline,
        Ablation::ParadigmSwap,
        Ablation::OnlySft,
        Ablation::OnlyRl,
        Ablation::Flat,
        Ablation::SharedAdapter,
        Ablation::VanillaIql,
        Ablation::VanillaAwac,
        Ablation::ReleasedCode,
    ];

    /// Its name in profiles, stage names and tables (`paradigm-swap`).
    pub fn name(self) -> &'static str {
        match self {
            Ablation::Multi2 => "multi2",
            Ablation::Multi2Offline => "multi2-offline",
            Ablation::ParadigmSwap => "paradigm-swap",
            Ablation::OnlySft => "only-sft",
            Ablation::OnlyRl => "only-rl",
            Ablation::Flat => "flat",
            Ablation::SharedAdapter => "shared-adapter",
            Ablation::VanillaIql => "vanilla-iql",
            Ablation::VanillaAwac => "vanilla-awac",
            Ablation::ReleasedCode => "released-code",
        }
    }

    /// The objectives variant of System 2's RL this ablation trains under, for those that
    /// differ from Multi² in their objectives only (`hier_rl_losses::Variant`, the one
    /// definition of what each changes).
    pub fn objectives(self) -> Option<Variant> {
        match self {
            Ablation::VanillaIql => Some(Variant::VanillaIql),
            Ablation::VanillaAwac => Some(Variant::VanillaAwac),
            Ablation::ReleasedCode => Some(Variant::ReleasedCode),
            _ => None,
        }
    }
}

impl std::fmt::Display for Ablation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A method of Table 1. Serialised (profiles, stage keys, tables) as its [`name`](Self::name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// System-1 SFT, System-2 offline then online RL.
    Multi2,
    /// One shared adapter: SFT on both levels, offline RL, online GRPO of its high level.
    Glider,
    /// Outcome-reward GRPO from flat SFT.
    Grpo,
    /// ReAct, prompted.
    React,
    /// Reflexion, prompted (pass@trials, with pass@1 beside it).
    Reflexion,
    /// ADaPT, prompted.
    Adapt,
    /// Flat SFT on expert trajectories.
    FlatSft,
}

impl Method {
    /// Every method, in the paper's table order.
    pub const ALL: [Method; 7] = [
        Method::Multi2,
        Method::Glider,
        Method::Grpo,
        Method::React,
        Method::Reflexion,
        Method::Adapt,
        Method::FlatSft,
    ];

    /// Its name in profiles, stage names and tables (`flat-sft`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Multi2 => "multi2",
            Method::Glider => "glider",
            Method::Grpo => "grpo",
            Method::React => "react",
            Method::Reflexion => "reflexion",
            Method::Adapt => "adapt",
            Method::FlatSft => "flat-sft",
        }
    }

    /// How tables and figures name it (`Flat SFT`).
    pub fn label(self) -> &'static str {
        match self {
            Method::Multi2 => "Multi²",
            Method::Glider => "Glider",
            Method::Grpo => "GRPO",
            Method::React => "ReAct",
            Method::Reflexion => "Reflexion",
            Method::Adapt => "ADaPT",
            Method::FlatSft => "Flat SFT",
        }
    }

    /// The method named `name`, or an error listing them.
    pub fn parse(name: &str) -> Result<Self> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown method `{name}`: expected one of {:?}",
                    Method::ALL.map(Method::name)
                ))
            })
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Profile {
    /// Reads and checks the profile at `path`, following `extends` ([`hier_train::profile_toml`]).
    pub fn from_file(path: &Path) -> Result<Self> {
        let mut p: Self = hier_train::profile_toml::read_profile(path)?;
        p.ablations.take_if(|a| a.variants.is_empty());
        p.check().map_err(|e| Error::profile(path, e.to_string()))?;
        Ok(p)
    }

    /// The profile as `env`'s stages see it: under `per_env[env]` where there is an entry,
    /// and the map itself emptied, so that no stage key depends on another environment's
    /// settings.
    pub fn for_env(&self, env: EnvKind) -> Profile {
        let mut p = self.clone();
        if let Some(o) = self.per_env.get(&env) {
            o.apply(&mut p);
        }
        p.per_env.clear();
        p
    }

    pub fn check(&self) -> Result<()> {
        if self.envs.is_empty() || self.methods.is_empty() {
            return Err(Error::invalid("no environments or no methods".into()));
        }
        for (env, o) in &self.per_env {
            let zero = [
                ("rollout.max_steps", o.rollout.max_steps),
                ("data.train_episodes", o.data.train_episodes),
                ("sft.steps", o.sft.steps),
                ("eval.tasks_per_split", o.eval.tasks_per_split),
                ("grpo.micro_batch", o.grpo.micro_batch),
                ("glider_online.micro_batch", o.glider_online.micro_batch),
            ];
            if let Some((field, _)) = zero.iter().find(|(_, n)| *n == Some(0)) {
                return Err(Error::invalid(format!(
                    "per_env.{env}.{field} = 0: it must be at least 1"
                )));
            }
            for (field, micro, batch) in [
                ("grpo", o.grpo.micro_batch, self.grpo.batch_size),
                (
                    "glider_online",
                    o.glider_online.micro_batch,
                    self.glider_online.batch_size,
                ),
            ] {
                if let Some(m) = micro
                    && m > batch
                {
                    return Err(Error::invalid(format!(
                        "per_env.{env}.{field}.micro_batch = {m}: more than {field}.batch_size \
                         {batch}"
                    )));
                }
            }
            if o.data.task_types.as_ref().is_some_and(Vec::is_empty) {
                return Err(Error::invalid(format!(
                    "per_env.{env}.data.task_types = []: leave it out to keep every task"
                )));
            }
        }
        if !self.data.task_types.is_empty() {
            return Err(Error::invalid(format!(
                "data.task_types = {:?}: task names are one environment's own, so they are set \
                 per environment (per_env.<env>.data.task_types)",
                self.data.task_types
            )));
        }
        if self.eval.seeds.is_empty() || self.eval.parallel == 0 || self.eval.tasks_per_split == 0 {
            return Err(Error::invalid(
                "eval needs seeds, parallel > 0 and tasks_per_split > 0".into(),
            ));
        }
        if self.eval.subset_of.is_some() {
            return Err(Error::invalid(
                "eval.subset_of is set by the pipeline (for the ablations), not by a profile"
                    .into(),
            ));
        }
        if self.prompted.history_stride > self.prompted.history {
            return Err(Error::invalid(format!(
                "prompted: history_stride {} is more than history {} (the window would skip turns)",
                self.prompted.history_stride, self.prompted.history
            )));
        }
        if self.prompted.reflexion_seeds.is_empty() || self.prompted.reflexion_trials == 0 {
            return Err(Error::invalid(
                "prompted: reflexion needs seeds and at least one trial".into(),
            ));
        }
        if let Some(a) = &self.ablations {
            if !self.envs.contains(&a.env) {
                return Err(Error::invalid(format!(
                    "ablations.env = `{}` is not among envs {:?}",
                    a.env,
                    self.envs.iter().map(|e| e.name()).collect::<Vec<_>>()
                )));
            }
            if a.seeds.is_empty() || a.eval_seeds.is_empty() || a.tasks_per_split == 0 {
                return Err(Error::invalid(
                    "ablations need seeds, eval_seeds and tasks_per_split > 0".into(),
                ));
            }
        }
        Ok(())
    }
}
