//! What a stage was made from, by content: the digests of its upstream stages' adapters.
//!
//! A stage's key names its upstream stages by their *settings*
//! ([`Stages::upstream`](crate::stages::Stages::upstream)), so an upstream stage trained again
//! under the same settings but by other code (or after its run directory was lost) keeps its
//! name while its adapter changes. A stage that reads adapters therefore writes
//! [`UPSTREAM_DIGESTS`] — `{"<upstream stage directory>": "<sha256 of its adapter>"}` — and,
//! when it is found done later, [`check`] compares that record with the adapters there now:
//! a difference is [`Error::UpstreamChanged`], so one adapter's evaluation is never reported
//! under another's. A stage played piece by piece records them before its first piece and
//! checks them on every resume ([`begin`]), so that its journal never mixes two adapters.
//! Upstream stages absent from the run (a report read from restored evaluation stages alone)
//! are not compared.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::stages::{read_json, write_json};

/// Upstream stage directory name → sha256 (hex) of its adapter weights.
pub type Digests = BTreeMap<String, String>;

/// The file in which a stage records its upstream [`Digests`].
pub const UPSTREAM_DIGESTS: &str = "UPSTREAM_DIGESTS.json";

/// The adapter weights of a training stage, relative to its directory.
pub const ADAPTER_WEIGHTS: &str = "adapter/adapter_model.safetensors";

/// sha256 (hex) of the adapter of every stage in `upstream` (directory names under
/// `stages_root`) that holds one; stages without an adapter file are left out.
pub fn adapter_digests(stages_root: &Path, upstream: &[String]) -> Result<Digests> {
    let mut out = Digests::new();
    for name in upstream {
        let path = stages_root.join(name).join(ADAPTER_WEIGHTS);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let hex = Sha256::digest(&bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                out.insert(name.clone(), hex);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    Ok(out)
}

/// Writes `digests` as `<dir>/`[`UPSTREAM_DIGESTS`] (atomically; nothing when empty).
pub fn record(dir: &Path, digests: &Digests) -> Result<()> {
    if digests.is_empty() {
        return Ok(());
    }
    write_json(&dir.join(UPSTREAM_DIGESTS), digests)
}

/// What [`check`] found for a done stage.
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    /// Every recorded upstream adapter present now has its recorded digest (or none is
    /// present to compare).
    Same,
    /// The stage predates the record: nothing to compare with.
    Unrecorded,
}

/// Compares the record in the done stage `dir` with `now` ([`adapter_digests`] of its upstream
/// stages as they are): [`Error::UpstreamChanged`] for the first upstream adapter whose digest
/// differs from the one recorded.
pub fn check(dir: &Path, now: &Digests) -> Result<Checked> {
    let recorded: Digests = match read_json(&dir.join(UPSTREAM_DIGESTS)) {
        Ok(r) => r,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Checked::Unrecorded);
        }
        Err(e) => return Err(e),
    };
    for (name, was) in &recorded {
        if let Some(is) = now.get(name)
            && is != was
        {
            return Err(Error::UpstreamChanged {
                dir: dir.into(),
                upstream: name.clone(),
                recorded: was.clone(),
                now: is.clone(),
            });
        }
    }
    Ok(Checked::Same)
}

/// Starts (or resumes) a stage that plays the adapters of `now` piece by piece into `journal`:
/// a record left by an earlier piece is [`check`]ed first (a journal resumed over adapters
/// trained again since — same stage names, other weights — would mix two policies' episodes in
/// one cell: [`Error::UpstreamChanged`]), then `now` is [`record`]ed before the first piece, so
/// that the next resume can be checked. A journal begun before stages kept this record cannot
/// be checked; it is resumed with a warning on stderr naming it.
pub fn begin(dir: &Path, now: &Digests, journal: &Path) -> Result<()> {
    if check(dir, now)? == Checked::Unrecorded && journal.exists() && !now.is_empty() {
        eprintln!(
            "warning: {} was begun before evaluations recorded their adapters' digests: its \
             episodes so far cannot be checked against {}",
            journal.display(),
            now.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    record(dir, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(root: &Path, stage: &str, bytes: &[u8]) {
        let path = root.join(stage).join(ADAPTER_WEIGHTS);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn digests_are_sha256_of_the_adapter_and_skip_stages_without_one() {
        let tmp = tempfile::tempdir().unwrap();
        adapter(tmp.path(), "sft-a", b"abc");
        std::fs::create_dir_all(tmp.path().join("data-b")).unwrap();
        let d = adapter_digests(
            tmp.path(),
            &["sft-a".into(), "data-b".into(), "gone".into()],
        )
        .unwrap();
        // FIPS 180-2's test vector for "abc".
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(d, BTreeMap::from([("sft-a".to_string(), abc.to_string())]));
    }

    #[test]
    fn a_journal_resumed_over_another_adapter_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, eval) = (tmp.path().join("stages"), tmp.path().join("stages/eval-x"));
        let journal = eval.join("batches.jsonl");
        std::fs::create_dir_all(&eval).unwrap();
        let up = vec!["grpo-a".to_string()];
        adapter(&root, "grpo-a", b"first training");
        let first = adapter_digests(&root, &up).unwrap();
        // The first piece records its adapter before it plays anything.
        begin(&eval, &first, &journal).unwrap();
        assert_eq!(
            read_json::<Digests>(&eval.join(UPSTREAM_DIGESTS)).unwrap(),
            first
        );
        std::fs::write(&journal, "{\"seed\":0}\n").unwrap();
        // Resumed over the same adapter: on.
        begin(&eval, &first, &journal).unwrap();
        // Resumed over the adapter trained again (its run directory lost): refused, and the
        // record still names the adapter the journal's episodes came from.
        adapter(&root, "grpo-a", b"trained again");
        let again = adapter_digests(&root, &up).unwrap();
        match begin(&eval, &again, &journal) {
            Err(Error::UpstreamChanged { upstream, .. }) => assert_eq!(upstream, "grpo-a"),
            other => panic!("expected UpstreamChanged, got {other:?}"),
        }
        assert_eq!(
            read_json::<Digests>(&eval.join(UPSTREAM_DIGESTS)).unwrap(),
            first
        );
        // A journal from before the record: resumed (with a warning), and recorded from now on.
        std::fs::remove_file(eval.join(UPSTREAM_DIGESTS)).unwrap();
        begin(&eval, &again, &journal).unwrap();
        assert_eq!(
            read_json::<Digests>(&eval.join(UPSTREAM_DIGESTS)).unwrap(),
            again
        );
    }

    #[test]
    fn a_done_stage_made_from_another_adapter_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, eval) = (tmp.path().join("stages"), tmp.path().join("stages/eval-x"));
        std::fs::create_dir_all(&eval).unwrap();
        let up = vec!["sft-a".to_string(), "online-b".to_string()];
        assert_eq!(check(&eval, &BTreeMap::new()).unwrap(), Checked::Unrecorded);

        adapter(&root, "sft-a", b"planner");
        adapter(&root, "online-b", b"executor, first training");
        record(&eval, &adapter_digests(&root, &up).unwrap()).unwrap();
        assert_eq!(
            check(&eval, &adapter_digests(&root, &up).unwrap()).unwrap(),
            Checked::Same
        );

        // The upstream stages gone (a report read from restored evaluations): nothing to compare.
        let absent = adapter_digests(&tmp.path().join("elsewhere"), &up).unwrap();
        assert_eq!(check(&eval, &absent).unwrap(), Checked::Same);

        adapter(&root, "online-b", b"executor, trained again");
        let err = check(&eval, &adapter_digests(&root, &up).unwrap()).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, Error::UpstreamChanged { ref upstream, .. } if upstream == "online-b")
        );
        assert!(msg.contains("eval-x") && msg.contains("online-b"), "{msg}");
    }

    #[test]
    fn a_damaged_record_names_its_file() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(UPSTREAM_DIGESTS), "{not json").unwrap();
        let msg = check(tmp.path(), &BTreeMap::new()).unwrap_err().to_string();
        assert!(msg.contains(UPSTREAM_DIGESTS), "{msg}");
    }
}
