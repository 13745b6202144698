//! From demonstrations to datasets: an [`Episode`] (what an environment and a policy
//! produced) plus its [`Segment`]s become System-1 records, System-2 transitions and a flat
//! trajectory. Pure and deterministic: the same episode gives the same records.

use serde::{Deserialize, Serialize};

use crate::schema::{FlatTrajectory, Sys1Record, Sys2Transition};
use crate::segment::{Segment, check_tiling};

/// One played episode: `observations[t]` is what the agent saw before `actions[t]`;
/// `observations` has one more entry than `actions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// `textcraft/craft#3`, `alfworld/gen-train#17`, …
    pub source: String,
    pub task: String,
    pub observations: Vec<String>,
    pub actions: Vec<String>,
    pub rewards: Vec<f64>,
    /// Score after each action.
    pub scores: Vec<f64>,
    /// The environment ended the episode.
    pub done: bool,
    pub success: bool,
    /// How the actions were chosen (`expert`, `noisy-expert(eps=0.2)`, …).
    pub origin: String,
}

impl Episode {
    /// Lengths agree; errors name the field.
    pub fn check(&self) -> crate::error::Result<()> {
        let n = self.actions.len();
        for (field, len, want) in [
            ("observations", self.observations.len(), n + 1),
            ("rewards", self.rewards.len(), n),
            ("scores", self.scores.len(), n),
        ] {
            if len != want {
                return Err(crate::error::DataError::Invalid(format!(
                    "{}: `{field}` has {len} entries, expected {want}",
                    self.source
                )));
            }
        }
        Ok(())
    }

    pub fn final_score(&self) -> f64 {
        self.scores.last().copied().unwrap_or(0.0)
    }
}

/// The three datasets of one episode.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Built {
    pub sys1: Vec<Sys1Record>,
    pub sys2: Vec<Sys2Transition>,
    pub flat: Vec<FlatTrajectory>,
}

impl Built {
    pub fn extend(&mut self, other: Built) {
        self.sys1.extend(other.sys1);
        self.sys2.extend(other.sys2);
        self.flat.extend(other.flat);
    }
}

/// Builds the records of one segmented episode.
///
/// - System 1: one record per segment `h`: context = the previous segment's actions and
///   `o` at the segment's start; target = `g_h`; reward = environment reward summed over the
///   segment; done on the last segment of a finished episode.
/// - System 2: one transition per action, with the intrinsic reward (1 on the segment's last
///   action, else 0) and `terminal` at a segment's end (or the episode's).
pub fn build(ep: &Episode, segments: &[Segment]) -> crate::error::Result<Built> {
    ep.check()?;
    check_tiling(segments, ep.actions.len())
        .map_err(|m| crate::error::DataError::Invalid(format!("{}: {m}", ep.source)))?;
    let mut out = Built::default();
    let last_seg = segments.len().saturating_sub(1);
    for (h, seg) in segments.iter().enumerate() {
        let group_action = if h == 0 {
            Vec::new()
        } else {
            let prev = &segments[h - 1];
            ep.actions[prev.start..prev.end].to_vec()
        };
        out.sys1.push(Sys1Record {
            source: ep.source.clone(),
            task: ep.task.clone(),
            group_action,
            observation: ep.observations[seg.start].clone(),
            subgoal: seg.subgoal.clone(),
            reward: ep.rewards[seg.start..seg.end].iter().sum(),
            score: ep.scores[seg.end - 1],
            done: h == last_seg && ep.done,
        });
        // System 2 is shown the subgoal with the commands it needs (TextCraft), as when acting.
        let subtask = crate::subtask::executor_subtask(&ep.task, &seg.subgoal);
        for t in seg.start..seg.end {
            let last = t + 1 == seg.end;
            out.sys2.push(Sys2Transition {
                source: ep.source.clone(),
                subgoal: subtask.clone(),
                observation: ep.observations[t].clone(),
                action: ep.actions[t].clone(),
                subgoal_done: last,
                reward: if last { 1.0 } else { 0.0 },
                env_reward: ep.rewards[t],
                next_observation: ep.observations[t + 1].clone(),
                terminal: last || (ep.done && t + 1 == ep.actions.len()),
                segment: h as u32,
                step: (t - seg.start) as u32,
            });
        }
    }
    out.flat.push(FlatTrajectory {
        source: ep.source.clone(),
        task: ep.task.clone(),
        observations: ep.observations.clone(),
        actions: ep.actions.clone(),
        rewards: ep.rewards.clone(),
        score: ep.final_score(),
        success: ep.success,
        origin: ep.origin.clone(),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn episode() -> Episode {
        Episode {
            source: "textcraft/craft#0".into(),
            task: "craft stick".into(),
            observations: vec!["o0".into(), "o1".into(), "o2".into(), "o3".into()],
            actions: vec![
                "get 2 bamboo".into(),
                "inventory".into(),
                "craft 1 stick using 2 bamboo".into(),
            ],
            rewards: vec![0.0, 0.0, 1.0],
            scores: vec![0.0, 0.0, 1.0],
            done: true,
            success: true,
            origin: "expert".into(),
        }
    }

    #[test]
    fn records_follow_the_segments() {
        let ep = episode();
        let segs = crate::segment::textcraft(&ep.actions);
        let b = build(&ep, &segs).unwrap();
        assert_eq!(b.sys1.len(), 2);
        assert_eq!(b.sys1[0].subgoal, "gather base items: 2 bamboo");
        assert_eq!(
            b.sys1[0].context(),
            "Group action: []. Current observation: o0"
        );
        // `inventory` between the runs joins the craft it precedes.
        assert_eq!(b.sys1[1].group_action, vec!["get 2 bamboo"]);
        assert_eq!(b.sys1[1].observation, "o1");
        assert_eq!((b.sys1[1].reward, b.sys1[1].done), (1.0, true));
        assert!(!b.sys1[0].done);
        let r: Vec<f64> = b.sys2.iter().map(|t| t.reward).collect();
        assert_eq!(r, [1.0, 0.0, 1.0]);
        assert_eq!(b.sys2[0].target(), "get 2 bamboo; True");
        assert_eq!(b.sys2[1].target(), "inventory; False");
        assert_eq!(b.sys2[2].next_observation, "o3");
        assert_eq!(
            (b.sys2[1].segment, b.sys2[1].step, b.sys2[2].step),
            (1, 0, 1)
        );
        assert!(b.sys2[2].terminal && b.sys2[0].terminal && !b.sys2[1].terminal);
        assert_eq!(b.flat[0].discounted_return(0.5), 0.25);
    }

    #[test]
    fn inconsistent_episodes_are_refused() {
        let mut ep = episode();
        ep.rewards.pop();
        let segs = crate::segment::textcraft(&ep.actions);
        let err = build(&ep, &segs).unwrap_err().to_string();
        assert!(
            err.contains("rewards") && err.contains("textcraft/craft#0"),
            "{err}"
        );
    }
}
