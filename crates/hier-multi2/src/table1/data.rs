//! Each environment's expert data as the pipeline reads it back (System-1 records, System-2
//! transitions, flat trajectories), and the pre-training corpus made from it.

use std::path::Path;

use hier_data::batch::{executor_prompt, flat_prompt, planner_prompt};
use hier_data::io::read_all;
use hier_data::schema::{FlatTrajectory, Sys1Record, Sys2Transition};

use crate::error::Result;

/// One environment's expert data.
pub(crate) struct EnvData {
    pub(crate) sys1: Vec<Sys1Record>,
    pub(crate) sys2: Vec<Sys2Transition>,
    pub(crate) flat: Vec<FlatTrajectory>,
}

/// Reads a data stage's shards.
pub(crate) fn read_data(dir: &Path) -> Result<EnvData> {
    Ok(EnvData {
        sys1: read_all(dir.join("sys1.pcd"))?,
        sys2: read_all(dir.join("sys2.pcd"))?,
        flat: read_all(dir.join("flat.pcd"))?,
    })
}

/// The pre-training corpus: every prompt with its target, one document each.
pub(crate) fn corpus_text(data: &[EnvData]) -> String {
    let mut out = String::new();
    let mut doc = |s: String| {
        out.push_str(s.trim_end());
        out.push_str("\n\n");
    };
    for d in data {
        for r in &d.sys1 {
            doc(format!(
                "{}{}",
                planner_prompt(&r.task, &r.group_action, &r.observation),
                r.subgoal
            ));
        }
        for t in &d.sys2 {
            doc(format!(
                "{}{}",
                executor_prompt(&t.subgoal, &t.observation),
                t.target()
            ));
        }
        for f in &d.flat {
            for (k, a) in f.actions.iter().enumerate() {
                doc(format!(
                    "{}{a}",
                    flat_prompt(&f.task, &f.actions[..k], &f.observations[k])
                ));
            }
        }
    }
    out
}
