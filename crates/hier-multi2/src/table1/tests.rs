//! Unit tests of the `reproduce table1` pipeline: stage keys, profiles, the ablations' settings.

use super::eval_stage::EvalPart;
use super::*;
use crate::react::PromptedSpec;

fn configs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/table1")
}

/// ScienceWorld's and ALFWorld's data keys are the keys written before text versions
/// existed (their stages stay valid); TextCraft's carries its version (3), so its stages
/// built on an older text are not reused.
#[test]
fn only_a_changed_environment_text_changes_its_data_key() {
    let p = Profile::from_file(&configs().join("small.toml")).unwrap();
    for env in [EnvKind::Scienceworld, EnvKind::Alfworld] {
        assert_eq!(
            data_key(&p, env),
            serde_json::json!({"env": env, "data": p.data, "seed": p.seed})
        );
    }
    let tc = data_key(&p, EnvKind::Textcraft);
    assert_eq!(tc["text_version"], 3);
    assert_ne!(
        tc,
        serde_json::json!({"env": EnvKind::Textcraft, "data": p.data, "seed": p.seed})
    );
}

#[test]
fn the_released_code_row_runs_the_released_behaviour() {
    use hier_rl_losses::{KlKind, OnlineCritic};
    let p = Profile::from_file(&configs().join("small.toml")).unwrap();
    let (base_off, base_on) = (&p.offline, &p.online);
    assert_eq!(base_on.critic_form, OnlineCritic::QAndV);
    assert!(base_on.offline_in_replay && base_off.lambda > 0.0);
    // Multi² runs the profile's settings untouched, in every environment.
    for env in [EnvKind::Scienceworld, EnvKind::Alfworld, EnvKind::Textcraft] {
        assert_eq!(&online_config(base_on, Variant::Multi2, env), base_on);
    }
    assert_eq!(&base_off.clone().under(Variant::Multi2), base_off);
    // The released code: SARSA critic with the trajectory-mean baseline, k1 KL, τ 0.5,
    // no anchor term offline; on ScienceWorld no offline data in the online buffer.
    let off = base_off.clone().under(Variant::ReleasedCode);
    assert_eq!((off.lambda, off.critic.tau), (0.0, 0.5));
    let sciw = online_config(base_on, Variant::ReleasedCode, EnvKind::Scienceworld);
    assert_eq!(sciw.critic_form, OnlineCritic::SarsaTrajectoryMean);
    assert_eq!((sciw.kl, sciw.critic.tau), (KlKind::K1, 0.5));
    assert!(!sciw.offline_in_replay);
    let alfw = online_config(base_on, Variant::ReleasedCode, EnvKind::Alfworld);
    assert!(
        alfw.offline_in_replay,
        "their ALFWorld trainer mixes offline data"
    );
    assert_eq!(alfw.critic_form, OnlineCritic::SarsaTrajectoryMean);
    // The other objective ablations change exactly their own setting.
    let awac = online_config(base_on, Variant::VanillaAwac, EnvKind::Scienceworld);
    assert_eq!(
        awac,
        OnlineRlConfig {
            eta: 0.0,
            ..base_on.clone()
        }
    );
    let iql = base_off.clone().under(Variant::VanillaIql);
    assert_eq!(
        iql,
        OfflineRlConfig {
            lambda: 0.0,
            ..base_off.clone()
        }
    );
}

/// The ablations evaluate a spread of the main evaluation's tasks, so their stages are
/// keyed by both counts; the main evaluation's key is as before (no `subset_of`).
#[test]
fn the_ablations_evaluation_is_keyed_by_the_tasks_it_is_drawn_from() {
    let p = Profile::from_file(&configs().join("small.toml")).unwrap();
    let ab = p.ablations.clone().expect("small has ablations");
    let key = |main: &EvalSpec| serde_json::to_value(ablation_eval(main, &ab)).unwrap();
    let more = EvalSpec {
        tasks_per_split: p.eval.tasks_per_split + 1,
        ..p.eval.clone()
    };
    assert_ne!(key(&p.eval), key(&more));
    assert_eq!(key(&p.eval)["subset_of"], p.eval.tasks_per_split);
    assert_eq!(key(&p.eval)["tasks_per_split"], ab.tasks_per_split);
    let main = serde_json::to_value(&p.eval).unwrap();
    assert!(main.get("subset_of").is_none(), "{main}");
    // A profile cannot set it.
    let mut bad = p.clone();
    bad.eval.subset_of = Some(3);
    let err = bad.check().unwrap_err().to_string();
    assert!(err.contains("eval.subset_of"), "{err}");
}

/// `per_env` changes the settings of its environments only: the others' view of the
/// profile (which keys their stages) is the profile without the map, unchanged.
#[test]
fn settings_per_environment_change_only_that_environments_stages() {
    let p = Profile::from_file(&configs().join("smollm.toml")).unwrap();
    let plain = Profile {
        per_env: BTreeMap::new(),
        ..p.clone()
    };
    assert_eq!(p.for_env(EnvKind::Alfworld), plain);
    assert_eq!(p.for_env(EnvKind::Alfworld).eval.rollout.max_steps, 40);
    // TextCraft: GRPO's update in micro-batches of 2 rows, nothing else (Glider's online phase
    // there keeps its key).
    let mut tc = p.for_env(EnvKind::Textcraft);
    assert_eq!(
        (tc.grpo.micro_batch, tc.glider_online.micro_batch),
        (Some(2), None)
    );
    tc.grpo.micro_batch = None;
    assert_eq!(tc, plain);
    // smollm plays ScienceWorld's tasks to ETO's limits (up to 120 actions), from 240 expert
    // episodes and 600 SFT steps.
    let sw = p.for_env(EnvKind::Scienceworld);
    assert_eq!((sw.data.train_episodes, sw.sft.steps), (240, 600));
    assert_eq!((plain.data.train_episodes, plain.sft.steps), (60, 200));
    assert!(sw.per_env.is_empty());
    let mut back = sw.clone();
    for r in [
        &mut back.eval.rollout,
        &mut back.online.rollout,
        &mut back.grpo.rollout,
        &mut back.glider_online.rollout,
    ] {
        assert_eq!((r.max_steps, r.task_turn_limits), (120, true), "{r:?}");
        (r.max_steps, r.task_turn_limits) = (40, false);
    }
    assert_eq!(
        (back.grpo.micro_batch, back.glider_online.micro_batch),
        (Some(2), Some(2))
    );
    (back.grpo.micro_batch, back.glider_online.micro_batch) = (None, None);
    (back.data, back.sft) = (plain.data.clone(), plain.sft.clone());
    assert_eq!(
        back, plain,
        "only the rollouts, the data, the SFT steps and the GRPO micro-batches differ"
    );
    // Unset, the micro-batch is left out of the GRPO sections' serialisation (and so of the
    // keys of the stages trained before it could be set per environment); set, it is in.
    let grpo = serde_json::to_value(&plain.grpo).unwrap();
    assert!(grpo.get("micro_batch").is_none(), "{grpo}");
    assert_eq!(serde_json::to_value(&sw.grpo).unwrap()["micro_batch"], 2);
    // Serialised without the map when it is empty, and without the flag when off (stage
    // keys and resolved profiles).
    let json = serde_json::to_value(&plain).unwrap();
    assert!(json.get("per_env").is_none(), "{json}");
    // The resolved profile names only the sections an environment sets (TextCraft: GRPO's
    // micro-batch), and reads back as the same profile.
    let resolved = toml::to_string(&p).unwrap();
    assert!(
        resolved.contains("[per_env.textcraft.grpo]\nmicro_batch = 2"),
        "{resolved}"
    );
    for unset in [
        "[per_env.textcraft.rollout]",
        "[per_env.textcraft.glider_online]",
    ] {
        assert!(!resolved.contains(unset), "{unset} in {resolved}");
    }
    assert_eq!(toml::from_str::<Profile>(&resolved).unwrap(), p);
    assert!(
        json["eval"]["rollout"].get("task_turn_limits").is_none(),
        "{json}"
    );
    assert_eq!(
        serde_json::to_value(&sw.eval.rollout).unwrap()["task_turn_limits"],
        true
    );
    // Data and SFT steps: only what the entry names changes.
    let mut q = plain.clone();
    q.per_env.insert(
        EnvKind::Alfworld,
        EnvOverride {
            data: DataOverride {
                train_episodes: Some(7),
                ..DataOverride::default()
            },
            sft: SftOverride { steps: Some(9) },
            ..EnvOverride::default()
        },
    );
    let alf = q.for_env(EnvKind::Alfworld);
    assert_eq!((alf.data.train_episodes, alf.sft.steps), (7, 9));
    assert_eq!(alf.data.max_len, plain.data.max_len);
    assert_eq!(alf.eval, plain.eval);
    assert_eq!(q.for_env(EnvKind::Textcraft), plain);
    /// Sets one of an override's counts to 0.
    type Zero = fn(&mut EnvOverride);
    let zeroed: [(&str, Zero); 5] = [
        ("rollout.max_steps", |o| o.rollout.max_steps = Some(0)),
        ("data.train_episodes", |o| o.data.train_episodes = Some(0)),
        ("sft.steps", |o| o.sft.steps = Some(0)),
        ("grpo.micro_batch", |o| o.grpo.micro_batch = Some(0)),
        ("glider_online.micro_batch", |o| {
            o.glider_online.micro_batch = Some(0)
        }),
    ];
    for (field, set) in zeroed {
        let mut o = EnvOverride::default();
        set(&mut o);
        let mut zero = p.clone();
        zero.per_env.insert(EnvKind::Alfworld, o);
        let err = zero.check().unwrap_err().to_string();
        assert!(
            err.contains(&format!("per_env.alfworld.{field} = 0")),
            "{err}"
        );
    }
    // A micro-batch larger than its batch is named with both numbers.
    let mut big = p.clone();
    big.per_env.insert(
        EnvKind::Alfworld,
        EnvOverride {
            grpo: GrpoOverride {
                micro_batch: Some(17),
            },
            ..EnvOverride::default()
        },
    );
    let err = big.check().unwrap_err().to_string();
    assert!(
        err.contains("per_env.alfworld.grpo.micro_batch = 17: more than grpo.batch_size 16"),
        "{err}"
    );
}

/// `per_env.<env>.data.task_types` keeps that environment's stages to those kinds of task; left
/// out, the data settings serialise (and so key every stage) as before the setting existed;
/// an empty list, a profile-wide list and a name no training task carries are errors that say so.
#[test]
fn task_types_narrow_one_environments_tasks_and_name_what_is_wrong() {
    let p = Profile::from_file(&configs().join("smollm.toml")).unwrap();
    let json = serde_json::to_value(&p.data).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"train_episodes": 60, "max_len": 1024}),
        "a profile without task types keeps its data key"
    );
    let only = |types: Option<Vec<String>>| EnvOverride {
        data: DataOverride {
            task_types: types,
            ..DataOverride::default()
        },
        ..EnvOverride::default()
    };
    let mut q = p.clone();
    let kinds = vec!["test-conductivity".to_owned(), "find-plant".to_owned()];
    q.per_env
        .insert(EnvKind::Scienceworld, only(Some(kinds.clone())));
    q.check().unwrap();
    assert_eq!(q.for_env(EnvKind::Scienceworld).data.task_types, kinds);
    assert!(q.for_env(EnvKind::Alfworld).data.task_types.is_empty());

    let mut empty = p.clone();
    empty
        .per_env
        .insert(EnvKind::Scienceworld, only(Some(Vec::new())));
    let err = empty.check().unwrap_err().to_string();
    assert!(
        err.contains("per_env.scienceworld.data.task_types = []"),
        "{err}"
    );
    let mut everywhere = p.clone();
    everywhere.data.task_types = kinds.clone();
    let err = everywhere.check().unwrap_err().to_string();
    assert!(err.contains("set per environment"), "{err}");

    // The filter itself, on tasks named as ScienceWorld names them.
    let tasks = vec![
        Task::new("boil", 0),
        Task::new("find-plant", 3),
        Task::new("test-conductivity", 1),
        Task::new("find-plant", 4),
    ];
    assert_eq!(
        of_types(tasks.clone(), &kinds),
        vec![tasks[1].clone(), tasks[2].clone(), tasks[3].clone()]
    );
    assert_eq!(of_types(tasks.clone(), &[]), tasks);

    // Against a real environment's training split: TextCraft names every task `craft`.
    let env = hier_envs::textcraft::TextCraft::from_assets().unwrap();
    let mut data = p.data.clone();
    data.task_types = vec!["craft".to_owned()];
    let all = env.tasks(Split::Train).unwrap();
    assert_eq!(train_tasks(&env, &data).unwrap(), all);
    data.task_types = vec!["craft".to_owned(), "boil".to_owned()];
    let err = train_tasks(&env, &data).unwrap_err().to_string();
    assert!(
        err.contains("`boil`") && err.contains("textcraft") && err.contains("1 task names: craft"),
        "{err}"
    );
}

/// An evaluation of three seeds is three stages of one seed each, each with the settings
/// of an evaluation of that seed alone (so a one-seed profile's stage is one of them);
/// Reflexion's seeds are the prompted agents' own.
#[test]
fn an_evaluation_is_one_part_per_seed_of_its_agent() {
    let p = Profile::from_file(&configs().join("smollm.toml")).unwrap();
    let whole = EvalPart {
        spec: EvalSpec {
            seeds: vec![0, 1, 2],
            ..p.eval.clone()
        },
        prompted: PromptedSpec {
            reflexion_seeds: vec![4, 5],
            ..p.prompted.clone()
        },
    };
    let parts = whole.per_seed(&Agent::React);
    assert_eq!(parts.len(), 3);
    for (part, seed) in parts.iter().zip([0, 1, 2]) {
        assert_eq!(part.spec.seeds, vec![seed]);
        let alone = EvalSpec {
            seeds: vec![seed],
            ..whole.spec.clone()
        };
        assert_eq!((&part.spec, &part.prompted), (&alone, &whole.prompted));
    }
    let reflexion = whole.per_seed(&Agent::Reflexion);
    let seeds: Vec<_> = reflexion
        .iter()
        .map(|r| (r.prompted.reflexion_seeds.clone(), r.spec.seeds.clone()))
        .collect();
    assert_eq!(
        seeds,
        vec![(vec![4], vec![0, 1, 2]), (vec![5], vec![0, 1, 2])]
    );
}

/// A prompted agent's evaluation key covers the settings it plays by: a Reflexion seed added,
/// or ADaPT's depth changed, leaves ReAct's evaluations where they are; what every prompted
/// agent reads changes every key.
#[test]
fn a_prompted_evaluation_is_keyed_by_its_own_settings() {
    use super::eval_stage::prompted_settings as key;
    let p = Profile::from_file(&configs().join("smollm.toml")).unwrap();
    let base = p.prompted.clone();
    let more_seeds = PromptedSpec {
        reflexion_seeds: vec![0, 1],
        reflexion_trials: base.reflexion_trials + 1,
        ..base.clone()
    };
    let deeper = PromptedSpec {
        adapt_max_depth: base.adapt_max_depth + 1,
        ..base.clone()
    };
    let no_loop_rule = PromptedSpec {
        reflexion_loop_cycles: 0,
        ..base.clone()
    };
    let hotter = PromptedSpec {
        temperature: base.temperature + 0.1,
        ..base.clone()
    };
    let (react, reflexion, adapt) = (Agent::React, Agent::Reflexion, Agent::Adapt);
    assert_eq!(key(&react, &base), key(&react, &more_seeds));
    assert_eq!(key(&react, &base), key(&react, &deeper));
    assert_eq!(key(&adapt, &base), key(&adapt, &more_seeds));
    assert_ne!(key(&adapt, &base), key(&adapt, &deeper));
    assert_eq!(key(&reflexion, &base), key(&reflexion, &deeper));
    assert_ne!(key(&reflexion, &base), key(&reflexion, &more_seeds));
    assert_ne!(key(&reflexion, &base), key(&reflexion, &no_loop_rule));
    assert_eq!(key(&react, &base), key(&react, &no_loop_rule));
    assert_eq!(key(&adapt, &base), key(&adapt, &no_loop_rule));
    for agent in [&react, &reflexion, &adapt] {
        assert_ne!(key(agent, &base), key(agent, &hotter));
    }
    // Every name left out is a field of the section (a renamed field fails here).
    let whole = serde_json::to_value(&base).unwrap();
    let fields = |v: &serde_json::Value| v.as_object().unwrap().len();
    assert_eq!(fields(&key(&react, &base)), fields(&whole) - 6);
    assert_eq!(fields(&key(&reflexion, &base)), fields(&whole) - 2);
    assert_eq!(fields(&key(&adapt, &base)), fields(&whole) - 4);
}

/// A legacy key of a prompted evaluation is, to the byte, the key an earlier binary stamped
/// into a committed stage's `DONE` (ReAct on TextCraft, `docs/results/table1-smollm`), so that
/// the stages written under it are found and moved — also by a profile that has added
/// Reflexion's second seed since; the new key is the same less the settings ReAct does not
/// read.
#[test]
fn a_committed_react_stage_is_found_under_its_legacy_key() {
    use super::eval_stage::{legacy_prompted_keys, prompted_key};
    let done = configs()
        .join("../../docs/results/table1-smollm/stages/eval-react-textcraft-331910556860/DONE");
    let stamp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&done).unwrap()).unwrap();
    let stored = &stamp["key"];
    let part = EvalPart {
        spec: serde_json::from_value(stored["eval"].clone()).unwrap(),
        prompted: serde_json::from_value(stored["prompted"].clone()).unwrap(),
    };
    let legacy = legacy_prompted_keys(&stored["base"], "react", &Agent::React, &part);
    assert_eq!(legacy.len(), 1);
    assert_eq!(legacy[0].to_string(), stored.to_string());
    let two_seeds = EvalPart {
        prompted: PromptedSpec {
            reflexion_seeds: vec![0, 1],
            ..part.prompted.clone()
        },
        ..part.clone()
    };
    let legacy = legacy_prompted_keys(&stored["base"], "react", &Agent::React, &two_seeds);
    assert_eq!(legacy.len(), 2);
    assert_eq!(legacy[1].to_string(), stored.to_string());
    let mut expected = stored.clone();
    let prompted = expected["prompted"].as_object_mut().unwrap();
    for field in [
        "reflexion_trials",
        "reflexion_memory",
        "reflexion_seeds",
        "adapt_max_depth",
        "adapt_executor_turns",
    ] {
        assert!(prompted.shift_remove(field).is_some(), "{field}");
    }
    let key = prompted_key(&stored["base"], "react", &Agent::React, &part);
    assert_eq!(key.to_string(), expected.to_string());
    let key = prompted_key(&stored["base"], "react", &Agent::React, &two_seeds);
    assert_eq!(key.to_string(), expected.to_string());
}

#[test]
fn every_profile_parses_and_bad_keys_name_the_file() {
    for name in ["smoke", "small", "smollm", "quick", "paper"] {
        let p = Profile::from_file(&configs().join(format!("{name}.toml"))).unwrap();
        assert_eq!(p.name, name);
    }
    // The default profile is smollm's flat SFT on fewer tasks, one seed, no ablations (its
    // empty list of variants), and ScienceWorld's short task types: every other setting — and
    // so ALFWorld's and TextCraft's training stages — smollm's own.
    let smollm = Profile::from_file(&configs().join("smollm.toml")).unwrap();
    let quick = Profile::from_file(&configs().join("quick.toml")).unwrap();
    assert_eq!(quick.methods, vec![Method::FlatSft]);
    assert!(quick.ablations.is_none() && smollm.ablations.is_some());
    assert_eq!(quick.eval.seeds, vec![0]);
    for env in [EnvKind::Alfworld, EnvKind::Textcraft] {
        let (q, s) = (quick.for_env(env), smollm.for_env(env));
        assert_eq!(
            (&q.data, &q.sft, &q.backbone),
            (&s.data, &s.sft, &s.backbone)
        );
    }
    let (qs, ss) = (
        quick.for_env(EnvKind::Scienceworld),
        smollm.for_env(EnvKind::Scienceworld),
    );
    assert_eq!(qs.data.task_types.len(), 17);
    assert!(
        qs.data.task_types.iter().all(|t| {
            hier_envs::scienceworld::splits::eto_step_limit(t).is_some_and(|n| n <= 30)
        })
    );
    assert_eq!((qs.data.train_episodes, qs.sft.steps), (170, 400));
    assert_eq!(qs.eval.rollout, ss.eval.rollout);
    assert_eq!(
        (
            qs.eval.tasks_per_split,
            quick.for_env(EnvKind::Alfworld).eval.tasks_per_split
        ),
        (90, 32)
    );
    // SmolLM2 from the set-up step's GGUF, LoRA with the authors' dropout.
    assert!(
        matches!(&smollm.backbone, BackboneSpec::Hf { path } if path.ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"))
    );
    assert_eq!(
        (smollm.sft.lora.dropout, smollm.offline.lora.dropout),
        (0.05, 0.05)
    );
    let paper = Profile::from_file(&configs().join("paper.toml")).unwrap();
    assert!(matches!(paper.backbone, BackboneSpec::Hf { .. }));
    assert_eq!(
        (paper.offline.actor_optim.lr, paper.offline.critic_optim.lr),
        (1e-4, 1e-5)
    );
    assert_eq!(
        (paper.online.actor_optim.lr, paper.online.eta),
        (1e-5, 0.02)
    );
    assert_eq!(paper.offline.critic.tau, 0.7);

    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(configs().join("smoke.toml")).unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        text.replace("lambda = 7.0", "lambda = 7.0\nlamda = 1.0"),
    )
    .unwrap();
    let err = Profile::from_file(&bad).unwrap_err().to_string();
    assert!(err.contains("bad.toml") && err.contains("lamda"), "{err}");
    std::fs::write(
        &bad,
        text.replace("\"flat-sft\"]", "\"flat-sft\", \"ppo\"]"),
    )
    .unwrap();
    let err = Profile::from_file(&bad).unwrap_err().to_string();
    assert!(
        err.contains("bad.toml") && err.contains("`ppo`") && err.contains("flat-sft"),
        "{err}"
    );
    std::fs::write(&bad, text.replace("\"only-sft\",", "\"only-sfts\",")).unwrap();
    let err = Profile::from_file(&bad).unwrap_err().to_string();
    assert!(
        err.contains("unknown variant `only-sfts`") && err.contains("paradigm-swap"),
        "{err}"
    );
}

/// The committed result profiles load; `probe10-loo` (which `extends` probe10) is probe10
/// with its name and the anchor's baseline changed, nothing else — so every other stage key
/// of the probe holds, and probe10 itself keeps the plain estimator it was run with; and
/// `loo-norm` is the smollm profile on ALFWorld.
#[test]
fn result_profiles_load_and_an_extending_one_changes_only_its_keys() {
    use hier_rl_losses::AnchorBaseline;
    let results =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/table1-smollm");
    let mut found = 0;
    for entry in std::fs::read_dir(&results).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".profile.toml") {
            Profile::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            found += 1;
        }
    }
    assert!(found >= 4, "{found} result profiles");
    let base = Profile::from_file(&results.join("probe10.profile.toml")).unwrap();
    let loo = Profile::from_file(&results.join("probe10-loo.profile.toml")).unwrap();
    assert_eq!(base.offline.anchor_baseline, AnchorBaseline::None);
    assert_eq!(loo.offline.anchor_baseline, AnchorBaseline::LeaveOneOut);
    let mut same = loo.clone();
    same.name = base.name.clone();
    same.offline.anchor_baseline = AnchorBaseline::None;
    assert_eq!(same, base);
    // `loo-norm` is smollm's ALFWorld column as smollm now sets it (the leave-one-out
    // baseline, normalised weights): its committed evaluation stages are smollm's.
    let smollm = Profile::from_file(&configs().join("smollm.toml")).unwrap();
    let loo_norm = Profile::from_file(&results.join("loo-norm.profile.toml")).unwrap();
    let mut alfworld = loo_norm.for_env(EnvKind::Alfworld);
    alfworld.name = smollm.name.clone();
    // It ran Multi² only: smollm's GRPO budget (GRPO's and Glider's online phase) was raised
    // after it and keys none of its stages.
    assert_ne!(alfworld.grpo, smollm.grpo);
    alfworld.grpo = smollm.grpo.clone();
    alfworld.glider_online = smollm.glider_online.clone();
    // Reflexion's second seed came later still and keys only Reflexion's evaluations.
    assert_ne!(alfworld.prompted, smollm.prompted);
    alfworld.prompted.reflexion_seeds = smollm.prompted.reflexion_seeds.clone();
    // So did Reflexion's loop heuristic, which keys only Reflexion's evaluations too.
    alfworld.prompted.reflexion_loop_cycles = smollm.prompted.reflexion_loop_cycles;
    // The ablations' evaluation grew to 75 tasks per split later too; they run on
    // ScienceWorld, and their count keys only their own evaluations.
    let (ran, now) = (
        alfworld.ablations.as_mut().unwrap(),
        smollm.ablations.as_ref().unwrap(),
    );
    assert_eq!((ran.tasks_per_split, now.tasks_per_split), (5, 75));
    ran.tasks_per_split = now.tasks_per_split;
    assert_eq!(alfworld, smollm.for_env(EnvKind::Alfworld));
}
