//! Dataset files from outside — JSON lines and postcard shards — survive any damage: every
//! record reads or gives a typed error naming the file, never a panic, and a damaged length
//! field allocates no more than the file holds. Cases per property: `PROPTEST_CASES` (256).

use std::path::Path;

use hier_data::io::{JsonlWriter, ShardWriter, read};
use hier_data::schema::Sys1Record;
use proptest::prelude::*;

/// Proptest's defaults (256 cases, or `PROPTEST_CASES`), without writing regression files into
/// the source tree.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn records() -> Vec<Sys1Record> {
    (0..4)
        .map(|i| Sys1Record {
            source: format!("textcraft/craft#{i}"),
            task: "craft a stick".into(),
            group_action: vec!["get 1 oak log".into(); i],
            observation: format!("Inventory: [oak log] ({i})"),
            subgoal: "craft planks".into(),
            reward: i as f64 * 0.5,
            score: 0.0,
            done: i == 3,
        })
        .collect()
}

/// A valid file of `ext`, then damaged: cut at `cut`, `edits` overwritten.
fn damaged(dir: &Path, ext: &str, cut: f64, edits: &[(f64, u8)]) -> std::path::PathBuf {
    let path = dir.join(format!("data.{ext}"));
    if ext == "jsonl" {
        let mut w = JsonlWriter::<Sys1Record>::create(&path).unwrap();
        records().iter().for_each(|r| w.write(r).unwrap());
        w.finish().unwrap();
    } else {
        let mut w = ShardWriter::<Sys1Record>::create(&path).unwrap();
        records().iter().for_each(|r| w.write(r).unwrap());
        w.finish().unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(((bytes.len() as f64 * cut) as usize).max(1));
    for &(at, v) in edits {
        let i = ((bytes.len() as f64 * at) as usize).min(bytes.len() - 1);
        bytes[i] = v;
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn damaged_datasets_read_or_fail_naming_the_file(
        ext in prop_oneof![Just("jsonl"), Just("pcd")],
        cut in 0.0f64..=1.0,
        edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = damaged(dir.path(), ext, cut, &edits);
        match read::<Sys1Record>(&path) {
            Err(e) => prop_assert!(e.to_string().contains("data."), "{e}"),
            Ok(records) => {
                for r in records.take(100) {
                    if let Err(e) = r {
                        prop_assert!(e.to_string().contains("data."), "{e}");
                        break;
                    }
                }
            }
        }
    }
}

#[test]
fn a_huge_frame_length_is_refused_without_allocating_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = damaged(dir.path(), "pcd", 1.0, &[]);
    let mut bytes = std::fs::read(&path).unwrap();
    let header_len = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    // The first record's length field claims 4 GiB − 1.
    let at = 12 + header_len;
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let first = read::<Sys1Record>(&path).unwrap().next().unwrap();
    let e = first.unwrap_err().to_string();
    assert!(e.contains("truncated") && e.contains("4294967295"), "{e}");
}
