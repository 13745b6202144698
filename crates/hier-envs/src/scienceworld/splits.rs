//! ScienceWorld task splits: the simulator's own train/dev/test variation ranges for all 30
//! tasks, and the 24-task agent protocol of ETO/WKM/GLIDER on top of them.
//!
//! - Excluded from the protocol: `measure-melting-point-unknown-substance`, the three
//!   inclined-plane tasks and the two Mendelian-genetics tasks.
//! - **ID ("seen")**: up to 10 dev variations per task, `random.sample(dev, min(10, |dev|))`
//!   with CPython's generator seeded with [`ID_SEED`] afresh for every task, then sorted.
//! - **OOD ("unseen")**: the first ≤ 10 test variations per task.
//! - **Train**: every train variation of the 24 tasks.
//! - Step limits per task (ETO's): boil 100, the other changes of state 80, melting point 120,
//!   thermometer 30, power 20 / renewable power 30, conductivity 30, find 15, grow fruit 60,
//!   grow plant 30, chemistry mix 60, paint 15 (secondary) / 30 (tertiary), lifespan 10 /
//!   12 / 10 (longest / shortest / longest-then-shortest), life stages 30.
//!
//! The file `data/scienceworld_splits.json` is generated from the jar by [`Splits::generate`]
//! and committed; a test regenerates it and compares (`HIER_WRITE_SPLITS=1` rewrites it).
//! Multi²'s own evaluation labels variations seen/unseen by whether their goal appeared in
//! training; tables say which definition they use.

use serde::{Deserialize, Serialize};

use super::ScienceWorld;
use crate::error::{EnvError, Result};
use crate::pyrand::PyRandom;
use crate::{Split, Task};

/// Seed of the ID draw.
pub const ID_SEED: u64 = 0;
/// Variations per task in the ID and OOD sets.
pub const PER_TASK: usize = 10;

const COMMITTED: &str = include_str!("../../data/scienceworld_splits.json");

/// Tasks the agent papers leave out.
pub const EXCLUDED: &[&str] = &[
    "measure-melting-point-unknown-substance",
    "inclined-plane-determine-angle",
    "inclined-plane-friction-named-surfaces",
    "inclined-plane-friction-unnamed-surfaces",
    "mendelian-genetics-known-plant",
    "mendelian-genetics-unknown-plant",
];

/// ETO's step limit of a protocol task.
pub fn eto_step_limit(task: &str) -> Option<u64> {
    Some(match task {
        "boil" => 100,
        "melt" | "freeze" | "change-the-state-of-matter-of" => 80,
        "measure-melting-point-known-substance" => 120,
        "use-thermometer" => 30,
        "power-component" => 20,
        "power-component-renewable-vs-nonrenewable-energy" => 30,
        "test-conductivity" | "test-conductivity-of-unknown-substances" => 30,
        "find-living-thing" | "find-non-living-thing" | "find-plant" | "find-animal" => 15,
        "grow-fruit" => 60,
        "grow-plant" => 30,
        "chemistry-mix" => 60,
        "chemistry-mix-paint-secondary-color" => 15,
        "chemistry-mix-paint-tertiary-color" => 30,
        "lifespan-longest-lived" => 10,
        "lifespan-shortest-lived" => 12,
        "lifespan-longest-lived-then-shortest-lived" => 10,
        "identify-life-stages-1" | "identify-life-stages-2" => 30,
        _ => return None,
    })
}

/// Variations of one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSplits {
    pub name: String,
    /// In the 24-task protocol.
    pub protocol: bool,
    pub step_limit: Option<u64>,
    pub train: Vec<[i64; 2]>,
    pub dev: Vec<[i64; 2]>,
    pub test: Vec<[i64; 2]>,
    pub id: Vec<i64>,
    pub ood: Vec<i64>,
}

/// The split file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Splits {
    pub source: String,
    pub id_seed: u64,
    pub tasks: Vec<TaskSplits>,
}

impl Splits {
    /// The committed split file.
    pub fn committed() -> Result<Self> {
        serde_json::from_str(COMMITTED).map_err(|e| {
            EnvError::file(
                "crates/hier-envs/data/scienceworld_splits.json",
                e.to_string(),
            )
        })
    }

    /// Queries the jar for every task's variation sets and derives the protocol splits.
    pub fn generate(env: &mut ScienceWorld) -> Result<Self> {
        let mut tasks = Vec::new();
        for name in env.task_names()? {
            env.load(&Task::new(name.clone(), 0), false)?;
            let train = env.variations("train")?;
            let dev = env.variations("dev")?;
            let test = env.variations("test")?;
            let protocol = !EXCLUDED.contains(&name.as_str());
            let (id, ood) = if protocol {
                let mut id = PyRandom::new(ID_SEED).sample(&dev, dev.len().min(PER_TASK));
                id.sort_unstable();
                (id, test.iter().take(PER_TASK).copied().collect())
            } else {
                (Vec::new(), Vec::new())
            };
            tasks.push(TaskSplits {
                step_limit: if protocol {
                    eto_step_limit(&name)
                } else {
                    None
                },
                name,
                protocol,
                train: ranges(&train),
                dev: ranges(&dev),
                test: ranges(&test),
                id,
                ood,
            });
        }
        Ok(Self {
            source: "scienceworld==1.2.3 jar: getTaskNames, getVariationsTrain/Dev/Test".into(),
            id_seed: ID_SEED,
            tasks,
        })
    }

    pub fn step_limit(&self, task: &str) -> Option<u64> {
        self.tasks
            .iter()
            .find(|t| t.name == task)
            .and_then(|t| t.step_limit)
    }

    /// Number of variations of a task (train + dev + test), 0 for an unknown task.
    pub fn variation_count(&self, task: &str) -> u64 {
        self.tasks
            .iter()
            .find(|t| t.name == task)
            .map(|t| {
                t.train
                    .iter()
                    .chain(&t.dev)
                    .chain(&t.test)
                    .map(|[a, b]| (b - a) as u64)
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Tasks of a protocol split, task by task in simulator order.
    pub fn tasks(&self, split: Split) -> Vec<Task> {
        let mut out = Vec::new();
        for t in self.tasks.iter().filter(|t| t.protocol) {
            let vars: Vec<i64> = match split {
                Split::Id => t.id.clone(),
                Split::Ood => t.ood.clone(),
                Split::Train => expand(&t.train),
            };
            out.extend(
                vars.into_iter()
                    .map(|v| Task::new(t.name.clone(), v as u64)),
            );
        }
        out
    }

    /// All variations of a simulator set (`train`, `dev`, `test`) of the protocol tasks, or of
    /// every task with `all_tasks`.
    pub fn variations(&self, set: &str, all_tasks: bool) -> Result<Vec<Task>> {
        let mut out = Vec::new();
        for t in self.tasks.iter().filter(|t| all_tasks || t.protocol) {
            let r = match set {
                "train" => &t.train,
                "dev" => &t.dev,
                "test" => &t.test,
                other => {
                    return Err(EnvError::InvalidArgument(format!(
                        "variation set `{other}`: expected train, dev or test"
                    )));
                }
            };
            out.extend(
                expand(r)
                    .into_iter()
                    .map(|v| Task::new(t.name.clone(), v as u64)),
            );
        }
        Ok(out)
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("serialisable");
        s.push('\n');
        s
    }
}

/// Sorted integers → inclusive-exclusive ranges `[start, end)`.
fn ranges(v: &[i64]) -> Vec<[i64; 2]> {
    let mut sorted = v.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<[i64; 2]> = Vec::new();
    for x in sorted {
        match out.last_mut() {
            Some(r) if r[1] == x => r[1] = x + 1,
            _ => out.push([x, x + 1]),
        }
    }
    out
}

fn expand(r: &[[i64; 2]]) -> Vec<i64> {
    r.iter().flat_map(|[a, b]| *a..*b).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_round_trip() {
        let v = vec![5, 1, 2, 3, 9, 10];
        assert_eq!(ranges(&v), vec![[1, 4], [5, 6], [9, 11]]);
        assert_eq!(expand(&ranges(&v)), vec![1, 2, 3, 5, 9, 10]);
    }

    #[test]
    fn committed_file_has_the_protocol() {
        let s = Splits::committed().unwrap();
        assert_eq!(s.tasks.len(), 30);
        assert_eq!(s.tasks.iter().filter(|t| t.protocol).count(), 24);
        let ood = s.tasks(Split::Ood);
        let id = s.tasks(Split::Id);
        assert_eq!(ood.len(), 211, "ENVIRONMENTS.md: 211 unseen variations");
        assert!(
            (190..=200).contains(&id.len()),
            "{} seen variations",
            id.len()
        );
        for t in s.tasks.iter().filter(|t| t.protocol) {
            assert!(t.step_limit.is_some(), "{} has no step limit", t.name);
            let dev = expand(&t.dev);
            assert!(
                t.id.iter().all(|v| dev.contains(v)),
                "{}: ID outside dev",
                t.name
            );
            let test = expand(&t.test);
            assert_eq!(t.ood, test.iter().take(10).copied().collect::<Vec<_>>());
        }
    }
}
