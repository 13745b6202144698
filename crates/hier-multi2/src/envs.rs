//! The environments of Table 1, in one typed registry. The pipeline, the demonstrations, the
//! report, the figures and xtask all read [`EnvKind`] and its [`EnvSpec`]; nothing else
//! matches environment names.
//!
//! Adding an environment: its module in `hier-envs` (an [`Env`]), its segmentation rule
//! (`hier_data::segment`), and here a [`Segmenter`] variant, an [`EnvKind`] variant and its
//! row in [`REGISTRY`]. Profiles then accept its name in `envs = [...]`.

use hier_envs::{Env, Split};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use hier_data::build::Episode;
use hier_data::segment::{self, Segment};
use hier_train::SharedErrors as _;

/// How an environment's demonstrations are cut into subgoals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Segmenter {
    /// [`segment::textcraft`]: gather base items, then one subgoal per crafted item.
    Textcraft,
    /// [`segment::textcraft_templates`]: the authors' two template subgoals.
    TextcraftTemplates,
    /// [`segment::scienceworld`].
    Scienceworld,
    /// [`segment::alfworld`].
    Alfworld,
}

impl Segmenter {
    pub fn segment(self, ep: &Episode) -> Vec<Segment> {
        match self {
            Segmenter::Textcraft => segment::textcraft(&ep.actions),
            Segmenter::TextcraftTemplates => {
                // The goal line of the description (the commands follow it).
                let goal = hier_envs::headline(&ep.task);
                let target = goal.strip_prefix("craft ").unwrap_or(goal);
                segment::textcraft_templates(&ep.actions, target)
            }
            Segmenter::Scienceworld => segment::scienceworld(&ep.actions),
            Segmenter::Alfworld => segment::alfworld(&ep.actions),
        }
    }
}

/// An environment of Table 1. Serialised (profiles, stage keys, tables) as its [`name`](Self::name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
// Variants in the alphabetical order of their names: the derived `Ord` then orders maps keyed
// by `EnvKind` as they were ordered by name, which stage keys (hashes of the upstream stages'
// names) depend on.
pub enum EnvKind {
    /// ALFWorld's household tasks (`hier_envs::alfworld`).
    Alfworld,
    /// The ScienceWorld simulator (`hier_envs::scienceworld`).
    Scienceworld,
    /// Minecraft-style crafting (`hier_envs::textcraft`).
    Textcraft,
}

/// What the pipeline and its outputs need to know of an environment.
#[derive(Debug)]
pub struct EnvSpec {
    /// Which one.
    pub kind: EnvKind,
    /// Its name in profiles, stage names, tables (`textcraft`); equal to [`Env::name`].
    pub name: &'static str,
    /// Its short label in tables and figures (`SciW`).
    pub label: &'static str,
    /// Its columns in Table 1: the evaluation splits, in the paper's order.
    pub splits: &'static [Split],
    /// How its expert demonstrations are cut into subgoals.
    pub segmenter: Segmenter,
    /// Whether a noisy demonstration replans from the current state after a deviation (the
    /// expert plans from any state) rather than recovering the deviation first.
    pub replans: bool,
    /// Version of the text it shows agents (task description, observations): the data stage's
    /// key carries it from 2 on, so stages built on an older text are recomputed, not reused.
    /// TextCraft 2: the task description carries the crafting commands; 3: System 2's subtasks
    /// carry the commands that make their items (`hier_data::subtask::executor_subtask`).
    pub text_version: u32,
    /// Opens it from the assets `cargo xtask setup` fetched.
    pub open: fn() -> hier_envs::Result<Box<dyn Env>>,
}

fn open_textcraft() -> hier_envs::Result<Box<dyn Env>> {
    Ok(Box::new(hier_envs::textcraft::TextCraft::from_assets()?))
}

fn open_scienceworld() -> hier_envs::Result<Box<dyn Env>> {
    use hier_envs::scienceworld::{Config, ScienceWorld};
    Ok(Box::new(ScienceWorld::new(Config::from_assets()?)?))
}

fn open_alfworld() -> hier_envs::Result<Box<dyn Env>> {
    let assets = hier_envs::assets::Assets::locate()?;
    Ok(Box::new(hier_envs::alfworld::AlfWorld::locate(&assets)?))
}

/// Every environment, in the paper's column order (ScienceWorld, ALFWorld, TextCraft).
pub const REGISTRY: [EnvSpec; 3] = [
    EnvSpec {
        kind: EnvKind::Scienceworld,
        name: "scienceworld",
        label: "SciW",
        splits: &[Split::Id, Split::Ood],
        segmenter: Segmenter::Scienceworld,
        replans: false,
        text_version: 1,
        open: open_scienceworld,
    },
    EnvSpec {
        kind: EnvKind::Alfworld,
        name: "alfworld",
        label: "ALFW",
        splits: &[Split::Id, Split::Ood],
        segmenter: Segmenter::Alfworld,
        replans: true,
        text_version: 1,
        open: open_alfworld,
    },
    EnvSpec {
        kind: EnvKind::Textcraft,
        name: "textcraft",
        label: "TextCraft",
        splits: &[Split::Id],
        segmenter: Segmenter::Textcraft,
        replans: false,
        text_version: 3,
        open: open_textcraft,
    },
];

impl EnvKind {
    /// Its registry row.
    pub fn spec(self) -> &'static EnvSpec {
        REGISTRY
            .iter()
            .find(|s| s.kind == self)
            .expect("every EnvKind has a REGISTRY row (tested)")
    }

    /// The values an episode's final score can take: ScienceWorld's falls to −1 when the agent
    /// commits to a wrong answer, ALFWorld's and TextCraft's are 1 when solved, else 0.
    pub fn score_range(self) -> (f64, f64) {
        match self {
            EnvKind::Scienceworld => (-1.0, 1.0),
            EnvKind::Alfworld | EnvKind::Textcraft => (0.0, 1.0),
        }
    }

    /// Its name (`textcraft`, `scienceworld`, `alfworld`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The environment named `name`, or an error listing the known ones.
    pub fn parse(name: &str) -> Result<Self> {
        REGISTRY
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.kind)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown environment `{name}`: expected one of {:?}",
                    REGISTRY.iter().map(|s| s.name).collect::<Vec<_>>()
                ))
            })
    }

    /// Opens it from the assets.
    pub fn open(self) -> Result<Box<dyn Env>> {
        Ok((self.spec().open)()?)
    }

    /// The label of one of its columns: `SciW ID`, `ALFW OOD`, or `TextCraft` (one column).
    pub fn column_label(self, split: Split) -> String {
        let s = self.spec();
        if s.splits.len() == 1 {
            return s.label.into();
        }
        format!("{} {}", s.label, split_label(split))
    }
}

/// How reports name a split: `ID`, `OOD` (the papers' words), `train`.
pub fn split_label(split: Split) -> &'static str {
    match split {
        Split::Id => "ID",
        Split::Ood => "OOD",
        Split::Train => "train",
    }
}

impl std::fmt::Display for EnvKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EnvKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Table 1's columns in the paper's order: every environment's splits.
pub fn columns() -> impl Iterator<Item = (EnvKind, Split)> {
    REGISTRY
        .iter()
        .flat_map(|s| s.splits.iter().map(move |&split| (s.kind, split)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_row_whose_name_round_trips() {
        let mut names = Vec::new();
        for k in [EnvKind::Alfworld, EnvKind::Scienceworld, EnvKind::Textcraft] {
            names.push(k.name());
            assert_eq!(REGISTRY.iter().filter(|s| s.kind == k).count(), 1);
            assert_eq!(EnvKind::parse(k.name()).unwrap(), k);
            // serde and Display agree with the registry's name (profiles, stage keys).
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
            assert_eq!(k.to_string(), k.name());
        }
        // The derived order is the names' order (stage keys rely on it).
        assert!(names.is_sorted());
        let e = EnvKind::parse("webshop").unwrap_err().to_string();
        assert!(e.contains("webshop") && e.contains("alfworld"), "{e}");
    }

    #[test]
    fn columns_are_the_papers() {
        let labels: Vec<String> = columns().map(|(k, s)| k.column_label(s)).collect();
        assert_eq!(
            labels,
            ["SciW ID", "SciW OOD", "ALFW ID", "ALFW OOD", "TextCraft"]
        );
    }
}
