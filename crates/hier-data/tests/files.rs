//! Dataset files and the importer: round trips between JSONL and postcard, byte-identical
//! rewrites, and clear errors for malformed input.

use std::path::{Path, PathBuf};

use hier_data::io::{JsonlReader, JsonlWriter, ShardReader, ShardWriter, read_all, write_both};
use hier_data::schema::{FlatTrajectory, Sys1Record, Sys2Transition};
use hier_data::{import, stats};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hier-data-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn transitions() -> Vec<Sys2Transition> {
    (0..5)
        .map(|t| Sys2Transition {
            source: format!("alfworld/gen-train#{}", t / 3),
            subgoal: "heat mug 1 with microwave 1".into(),
            observation: format!(
                "You arrive at loc {t}. The microwave 1 is closed.\n\"quoted\" ünïcode"
            ),
            action: format!("go to microwave {t}"),
            subgoal_done: t % 3 == 2,
            reward: if t % 3 == 2 { 1.0 } else { 0.0 },
            env_reward: 0.1 * t as f64,
            next_observation: "o'".into(),
            terminal: t % 3 == 2,
            segment: 0,
            step: t as u32,
        })
        .collect()
}

#[test]
fn jsonl_and_postcard_round_trip_byte_identically() {
    let d = tmp("roundtrip");
    let recs = transitions();
    assert_eq!(write_both(&d.join("a"), &recs).unwrap(), 5);
    let from_jsonl: Vec<Sys2Transition> = read_all(d.join("a.jsonl")).unwrap();
    let from_pcd: Vec<Sys2Transition> = read_all(d.join("a.pcd")).unwrap();
    assert_eq!(from_jsonl, recs);
    assert_eq!(from_pcd, recs);
    // JSONL → postcard → JSONL gives the same bytes.
    write_both(&d.join("b"), &from_pcd).unwrap();
    let read = |p: &Path| std::fs::read(p).unwrap();
    assert_eq!(read(&d.join("a.jsonl")), read(&d.join("b.jsonl")));
    assert_eq!(read(&d.join("a.pcd")), read(&d.join("b.pcd")));
    // Postcard is the compact one.
    assert!(read(&d.join("a.pcd")).len() < read(&d.join("a.jsonl")).len());
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn malformed_lines_name_file_and_line() {
    let d = tmp("malformed");
    let p = d.join("sys2.jsonl");
    let good = serde_json::to_string(&transitions()[0]).unwrap();
    let cases = [
        (
            "{\"hier_data\": \"sys2\", \"version\": 1}\n".to_owned() + &good + "\n{not json\n",
            3,
            "sys2",
        ),
        (
            "{\"hier_data\": \"sys2\", \"version\": 1}\n".to_owned()
                + &good.replace("\"action\"", "\"acton\""),
            2,
            "acton",
        ),
        (
            "{\"hier_data\": \"sys2\", \"version\": 1}\n\n".to_owned()
                + &good.replace("\"reward\":0.0", "\"reward\":\"x\""),
            3,
            "sys2",
        ),
    ];
    for (text, line, needle) in cases {
        std::fs::write(&p, text).unwrap();
        let err = read_all::<Sys2Transition>(&p).unwrap_err().to_string();
        assert!(
            err.contains(&format!("sys2.jsonl:{line}:")) && err.contains(needle),
            "{err}"
        );
    }
    // Header problems.
    std::fs::write(&p, good.clone() + "\n").unwrap();
    let err = JsonlReader::<Sys2Transition>::open(&p)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("sys2.jsonl:1:") && err.contains("header"),
        "{err}"
    );
    std::fs::write(&p, "{\"hier_data\": \"sys1\", \"version\": 1}\n").unwrap();
    let err = JsonlReader::<Sys2Transition>::open(&p)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("`sys1` records, expected `sys2`"), "{err}");
    std::fs::write(&p, "{\"hier_data\": \"sys2\", \"version\": 9}\n").unwrap();
    let err = JsonlReader::<Sys2Transition>::open(&p)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("version 9"), "{err}");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn broken_shards_name_the_record() {
    let d = tmp("shards");
    let p = d.join("x.pcd");
    let mut w = ShardWriter::<Sys2Transition>::create(&p).unwrap();
    for r in transitions() {
        w.write(&r).unwrap();
    }
    w.finish().unwrap();
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 7]).unwrap();
    let got: Vec<_> = ShardReader::<Sys2Transition>::open(&p).unwrap().collect();
    assert_eq!(got.len(), 5);
    assert!(got[..4].iter().all(Result::is_ok));
    let err = got[4].as_ref().unwrap_err().to_string();
    assert!(
        err.contains("x.pcd") && err.contains("record 4") && err.contains("truncated"),
        "{err}"
    );
    std::fs::write(&p, b"not a shard at all").unwrap();
    let err = ShardReader::<Sys2Transition>::open(&p)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("HIERDATA"), "{err}");
    // A shard of another kind.
    let q = d.join("y.pcd");
    ShardWriter::<FlatTrajectory>::create(&q)
        .unwrap()
        .finish()
        .unwrap();
    let err = ShardReader::<Sys2Transition>::open(&q)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("`flat` records"), "{err}");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn unfinished_writers_leave_nothing_behind() {
    let d = tmp("atomic");
    let p = d.join("sys2.jsonl");
    std::fs::write(&p, "old contents\n").unwrap();
    {
        let mut w = JsonlWriter::<Sys2Transition>::create(&p).unwrap();
        w.write(&transitions()[0]).unwrap();
        // dropped without finish, e.g. an error half way
    }
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "old contents\n");
    assert_eq!(
        std::fs::read_dir(&d).unwrap().count(),
        1,
        "temp file left behind"
    );
    std::fs::remove_dir_all(d).unwrap();
}

fn authors(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/authors")
        .join(name)
}

#[test]
fn imports_the_authors_format() {
    let high = import::high_level(&authors("high_data/expert.json")).unwrap();
    assert_eq!(high.len(), 5);
    assert_eq!(high[0].task, "craft 1 cyan banner");
    assert_eq!(high[1].subgoal, "craft target: cyan banner");
    // The authors' context string comes back exactly.
    assert_eq!(
        high[1].context(),
        "Group action: [get 6 cyan wool, get 1 stick]. Current observation: Got 1 stick"
    );
    assert_eq!(
        high[0].context(),
        "Group action: []. Current observation: Crafting commands:\ncraft 1 cyan banner using 6 \
         cyan wool, 1 stick\nGoal: craft cyan banner."
    );
    assert!(high[0].group_action.is_empty());
    assert_eq!(
        (high[4].reward, high[4].score, high[4].done),
        (1.0, 1.0, true)
    );

    let low = import::low_level(&authors("low_data/expert.json")).unwrap();
    assert_eq!(low.len(), 3);
    assert_eq!(low[0].subgoal, "acquire needed items for cyan banner");
    assert_eq!(low[0].action, "get 6 cyan wool");
    assert_eq!(
        low[0].observation,
        "Crafting commands:\ncraft 1 cyan banner using 6 cyan wool, 1 stick"
    );
    assert_eq!(low[1].next_observation, "Got 1 stick");
    assert!(low[1].subgoal_done && low[1].terminal && !low[0].subgoal_done);
    assert_eq!(
        low[2].target(),
        "craft 1 cyan banner using 6 cyan wool, 1 stick; True"
    );
    assert_eq!(
        low.iter().map(|t| t.reward).collect::<Vec<_>>(),
        [0.0, 1.0, 1.0]
    );

    // Imported data is ordinary data: it writes, reads and summarises.
    let d = tmp("import");
    write_both(&d.join("sys1"), &high).unwrap();
    let back: Vec<Sys1Record> = read_all(d.join("sys1.pcd")).unwrap();
    assert_eq!(back, high);
    let s = stats::stats(&d.join("sys1.jsonl"), 4).unwrap();
    assert_eq!((s.records, s.episodes), (5, 2));
    assert!(s.render().contains("sys1 v1: 5 records from 2 episodes"));
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn importer_errors_name_the_list_and_index() {
    let d = tmp("import-bad");
    let p = d.join("expert.json");
    let text = std::fs::read_to_string(authors("low_data/expert.json")).unwrap();
    std::fs::write(&p, text.replace("[[0, 1], [1]]", "[[0, 1], []]")).unwrap();
    let err = import::low_level(&p).unwrap_err().to_string();
    assert!(
        err.contains("expert.json") && err.contains("`reward[1]`"),
        "{err}"
    );
    std::fs::write(
        &p,
        text.replace("\"Obs: Got 1 stick\"]", "\"Obs: Got 1 stick\", \"extra\"]"),
    )
    .unwrap();
    let err = import::low_level(&p).unwrap_err().to_string();
    assert!(err.contains("`obs[0]`"), "{err}");
    std::fs::write(&p, "{\"subtask\": [").unwrap();
    let err = import::low_level(&p).unwrap_err().to_string();
    assert!(err.contains("expert.json:1:"), "{err}");
    let high = std::fs::read_to_string(authors("high_data/expert.json")).unwrap();
    std::fs::write(&p, high.replace("\"done\"", "\"finished\"")).unwrap();
    let err = import::high_level(&p).unwrap_err().to_string();
    assert!(err.contains("no list `done`"), "{err}");
    std::fs::remove_dir_all(d).unwrap();
}
