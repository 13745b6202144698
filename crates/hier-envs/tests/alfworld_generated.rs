//! Generated ALFWorld games: reproducible by seed, on the right floor plans, and solved by
//! the expert — every ID and OOD evaluation game and a slice of the training pool.

use std::collections::BTreeMap;
use std::sync::Arc;

use hier_envs::Split;
use hier_envs::alfworld::data::AlfredData;
use hier_envs::alfworld::engine::{Engine, Grammar};
use hier_envs::alfworld::generate::{self, OOD_SCENES};
use hier_envs::alfworld::{TaskType, expert};
use hier_envs::assets::Assets;

fn data() -> AlfredData {
    let dir = Assets::locate().unwrap().alfworld().unwrap();
    AlfredData::load(&dir).unwrap()
}

#[test]
fn evaluation_games_are_solvable_and_reproducible() {
    let data = data();
    let mut types: BTreeMap<(Split, TaskType), usize> = BTreeMap::new();
    let mut lengths = Vec::new();
    for split in [Split::Id, Split::Ood] {
        for k in 0..generate::split_size(split) {
            let g = generate::generate(&data, split, k).unwrap();
            assert_eq!(
                OOD_SCENES.contains(&g.scene),
                split == Split::Ood,
                "{split:?} {k}: FloorPlan{}",
                g.scene
            );
            *types.entry((split, g.spec.task_type)).or_default() += 1;
            let engine = Engine::new(Arc::new(g.game().unwrap()), Grammar::V03);
            assert!(!engine.won(), "{split:?} {k}: won at the start");
            let plan = expert::plan(&engine, &g.spec).unwrap();
            let mut play = engine.clone();
            for (i, cmd) in plan.iter().enumerate() {
                assert!(play.admissible().contains(cmd), "{split:?} {k}: `{cmd}`");
                let out = play.step(cmd);
                assert_eq!(out.won, i + 1 == plan.len(), "{split:?} {k} step {i}");
            }
            lengths.push(plan.len());
            if k % 37 == 0 {
                let again = generate::generate(&data, split, k).unwrap();
                assert_eq!(again.problem, g.problem);
                assert_eq!(again.task, g.task);
            }
        }
    }
    eprintln!("task types: {types:?}");
    let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
    eprintln!(
        "expert plan length: mean {mean:.1}, max {}",
        lengths.iter().max().unwrap()
    );
    assert_eq!(lengths.len(), 274);
}
