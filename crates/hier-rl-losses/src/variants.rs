//! The named settings of the paper and of its ablations.

use crate::actor::{OfflineActorConfig, OnlineActorConfig};

/// Which KL estimator the online actor uses (`exact`, `k1`, `k3` in configs, with the
/// `serde` feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum KlKind {
    /// Exact over the vocabulary from both logits (default).
    Exact,
    /// `log π_on − log π_off` at taken tokens.
    K1,
    /// `exp(r) − r − 1`, `r = log π_off − log π_on`.
    K3,
}

/// The online critic's form (`q-and-v`, `sarsa-trajectory-mean` in configs, with the `serde`
/// feature).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum OnlineCritic {
    /// Q by TD against V̄, V by expectile; `A = Q − V` (the paper).
    #[default]
    QAndV,
    /// Q alone by SARSA, `A = Q − mean of Q over the trajectory` (the authors' released code).
    SarsaTrajectoryMean,
}

/// Every setting of System 2's objectives that differs between the paper and its ablations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Multi2Objectives {
    /// Discount per environment step.
    pub gamma: f32,
    /// Expectile τ of the value loss.
    pub tau: f32,
    /// Offline actor.
    pub offline: OfflineActorConfig,
    /// Online actor.
    pub online: OnlineActorConfig,
    /// KL estimator online.
    pub kl: KlKind,
    /// Online critic form.
    pub online_critic: OnlineCritic,
    /// Polyak rate of the target heads.
    pub polyak: f32,
}

/// The named variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The paper: τ = 0.7, λ = 7, η = 0.02, exact KL, Q+V critic.
    Multi2,
    /// No policy-anchored term (λ = 0): what the released code's offline actor actually runs.
    VanillaIql,
    /// No KL anchor online (η = 0).
    VanillaAwac,
    /// The authors' released behaviour: expectile 0.5 (a plain MSE), no anchor term, Q-only
    /// SARSA critic online with a trajectory-mean baseline.
    ReleasedCode,
}

impl Variant {
    /// Parses `multi2`, `vanilla-iql`, `vanilla-awac`, `released-code`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "multi2" => Self::Multi2,
            "vanilla-iql" => Self::VanillaIql,
            "vanilla-awac" => Self::VanillaAwac,
            "released-code" => Self::ReleasedCode,
            _ => return None,
        })
    }

    /// The name used in configs and tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Multi2 => "multi2",
            Self::VanillaIql => "vanilla-iql",
            Self::VanillaAwac => "vanilla-awac",
            Self::ReleasedCode => "released-code",
        }
    }

    /// The settings of this variant: its departures applied to the paper's settings.
    pub fn objectives(self) -> Multi2Objectives {
        self.apply(Multi2Objectives::paper())
    }

    /// This variant's departures from Multi², applied to `multi2` — Multi²'s settings of a run
    /// (e.g. a profile's, scaled down): every setting the variant does not name is kept, so the
    /// variants of one run differ from its Multi² row in exactly what defines them.
    ///
    /// | variant | departures |
    /// |---|---|
    /// | `multi2` | none |
    /// | `vanilla-iql` | λ = 0 |
    /// | `vanilla-awac` | η = 0 |
    /// | `released-code` | τ = 0.5, λ = 0, KL k1, SARSA critic with a trajectory-mean baseline |
    ///
    /// (The released code's ScienceWorld online phase also never samples the offline buffer;
    /// that is a property of the data pipeline, not of the objectives — see `hier-multi2`.)
    pub fn apply(self, multi2: Multi2Objectives) -> Multi2Objectives {
        match self {
            Self::Multi2 => multi2,
            Self::VanillaIql => Multi2Objectives {
                offline: OfflineActorConfig {
                    lambda: 0.0,
                    ..multi2.offline
                },
                ..multi2
            },
            Self::VanillaAwac => Multi2Objectives {
                online: OnlineActorConfig {
                    eta: 0.0,
                    ..multi2.online
                },
                ..multi2
            },
            Self::ReleasedCode => Multi2Objectives {
                tau: 0.5,
                offline: OfflineActorConfig {
                    lambda: 0.0,
                    ..multi2.offline
                },
                kl: KlKind::K1,
                online_critic: OnlineCritic::SarsaTrajectoryMean,
                ..multi2
            },
        }
    }
}

impl Multi2Objectives {
    /// The paper's settings: γ 0.99, τ 0.7, the actors' defaults (λ 7, η 0.02), exact KL, the
    /// Q+V critic, Polyak 0.2.
    pub fn paper() -> Self {
        Self {
            gamma: 0.99,
            tau: 0.7,
            offline: OfflineActorConfig::default(),
            online: OnlineActorConfig::default(),
            kl: KlKind::Exact,
            online_critic: OnlineCritic::QAndV,
            polyak: 0.2,
        }
    }
}
