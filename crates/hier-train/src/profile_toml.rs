//! Reading a pipeline profile (TOML) that may extend another.
//!
//! A profile whose top level holds `extends = "<file>"` (a path relative to the profile's own
//! directory) is read as that file with this one's keys laid over it:
//!
//! - a table (`[eval]`, an inline `{ … }`) merges key by key, recursively;
//! - any other value (number, string, boolean, array) replaces the base's whole;
//! - a base may itself extend another; a cycle is an error naming the file that closes it.
//!
//! So a result profile says only what it changes (`[eval] tasks_per_split = 10`) and keeps
//! every other setting — and so every stage key — of the profile it names. A key cannot be
//! removed by an overlay (TOML has no null). A profile without `extends` is parsed directly,
//! so its errors keep their line and column; errors of a merged profile name the file read
//! and say that its base was laid under it.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::error::{Error, Result, SharedErrors as _};

/// The key naming the base profile.
pub const EXTENDS: &str = "extends";

/// Reads the profile at `path` (following `extends`) into `T`.
pub fn read_profile<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let top: toml::Table = parse(path, &text)?;
    if !top.contains_key(EXTENDS) {
        return toml::from_str(&text).map_err(|e| Error::profile(path, e.to_string()));
    }
    let mut chain = vec![canonical(path)?];
    let merged = resolve(path, top, &mut chain)?;
    T::deserialize(merged).map_err(|e| {
        Error::profile(
            path,
            format!(
                "{} (in the profile merged from {})",
                e.to_string().trim_end(),
                chain
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" over ")
            ),
        )
    })
}

/// Lays `top` (the parsed file at `path`) over its `extends` chain, recording each file read
/// in `chain` (canonical paths; `path` is already there).
fn resolve(path: &Path, mut top: toml::Table, chain: &mut Vec<PathBuf>) -> Result<toml::Table> {
    let Some(extends) = top.remove(EXTENDS) else {
        return Ok(top);
    };
    let toml::Value::String(rel) = extends else {
        return Err(Error::profile(
            path,
            format!(
                "`{EXTENDS}` must be a path (a string), found a {}",
                extends.type_str()
            ),
        ));
    };
    let base_path = path.parent().unwrap_or(Path::new(".")).join(&rel);
    let base_canonical = base_path.canonicalize().map_err(|e| {
        Error::profile(
            path,
            format!("`{EXTENDS} = {rel:?}`: {}: {e}", base_path.display()),
        )
    })?;
    if chain.contains(&base_canonical) {
        return Err(Error::profile(
            path,
            format!(
                "`{EXTENDS} = {rel:?}` closes a cycle ({} is already in the chain)",
                base_canonical.display()
            ),
        ));
    }
    chain.push(base_canonical);
    let text = std::fs::read_to_string(&base_path).map_err(|e| Error::io(&base_path, e))?;
    let base = parse(&base_path, &text)?;
    let mut merged = resolve(&base_path, base, chain)?;
    overlay(&mut merged, top);
    Ok(merged)
}

/// Merges `top` into `base`: tables key by key (recursively), every other value replaced.
pub fn overlay(base: &mut toml::Table, top: toml::Table) {
    for (key, value) in top {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => overlay(b, t),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn parse(path: &Path, text: &str) -> Result<toml::Table> {
    toml::from_str(text).map_err(|e| Error::profile(path, e.to_string()))
}

fn canonical(path: &Path) -> Result<PathBuf> {
    path.canonicalize().map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Eval {
        tasks: usize,
        seeds: Vec<u64>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct P {
        name: String,
        optim: toml::Table,
        eval: Eval,
    }

    const BASE: &str = "name = \"base\"\noptim = { lr = 1e-3, clip = 1.0 }\n[eval]\ntasks = 100\nseeds = [0, 1, 2]\n";

    fn files(entries: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in entries {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    #[test]
    fn an_overlay_merges_tables_and_replaces_everything_else() {
        let dir = files(&[
            ("configs/base.toml", BASE),
            (
                "results/probe.toml",
                "extends = \"../configs/base.toml\"\nname = \"probe\"\noptim = { lr = 1e-4 }\n[eval]\nseeds = [0]\n",
            ),
        ]);
        let p: P = read_profile(&dir.path().join("results/probe.toml")).unwrap();
        assert_eq!(p.name, "probe");
        // The inline table merged: lr replaced, clip kept.
        assert_eq!(p.optim["lr"].as_float(), Some(1e-4));
        assert_eq!(p.optim["clip"].as_float(), Some(1.0));
        // The array replaced whole, the untouched key kept.
        assert_eq!(
            p.eval,
            Eval {
                tasks: 100,
                seeds: vec![0]
            }
        );
        // The base alone reads as itself.
        let b: P = read_profile(&dir.path().join("configs/base.toml")).unwrap();
        assert_eq!((b.name.as_str(), b.eval.seeds.len()), ("base", 3));
    }

    #[test]
    fn chains_are_followed_in_order() {
        let dir = files(&[
            ("base.toml", BASE),
            (
                "mid.toml",
                "extends = \"base.toml\"\n[eval]\ntasks = 10\nseeds = [5]\n",
            ),
            (
                "top.toml",
                "extends = \"mid.toml\"\n[eval]\nseeds = [7, 8]\n",
            ),
        ]);
        let p: P = read_profile(&dir.path().join("top.toml")).unwrap();
        assert_eq!(
            p.eval,
            Eval {
                tasks: 10,
                seeds: vec![7, 8]
            }
        );
    }

    #[test]
    fn bad_extends_are_errors_naming_the_file() {
        let dir = files(&[
            ("a.toml", "extends = \"b.toml\"\nname = \"a\"\n"),
            ("b.toml", "extends = \"a.toml\"\n"),
            ("self.toml", "extends = \"self.toml\"\n"),
            ("missing.toml", "extends = \"nowhere.toml\"\n"),
            ("number.toml", "extends = 3\n"),
            ("typo.toml", "extends = \"base.toml\"\n[eval]\ntask = 3\n"),
            ("base.toml", BASE),
        ]);
        let err = |name: &str| {
            let e = read_profile::<P>(&dir.path().join(name)).unwrap_err();
            assert!(matches!(e, Error::Config { .. }), "{e:?}");
            e.to_string()
        };
        let cycle = err("a.toml");
        assert!(
            cycle.contains("b.toml") && cycle.contains("cycle"),
            "{cycle}"
        );
        assert!(err("self.toml").contains("cycle"));
        let missing = err("missing.toml");
        assert!(
            missing.contains("missing.toml") && missing.contains("nowhere.toml"),
            "{missing}"
        );
        assert!(err("number.toml").contains("must be a path"));
        let typo = err("typo.toml");
        assert!(
            typo.contains("typo.toml") && typo.contains("task") && typo.contains("base.toml"),
            "{typo}"
        );
        // Without `extends`, the parser's line and column survive.
        let dir = files(&[("plain.toml", "name = \"x\"\nbogus = 1\n")]);
        let plain = read_profile::<P>(&dir.path().join("plain.toml"))
            .unwrap_err()
            .to_string();
        assert!(plain.contains("line 2"), "{plain}");
    }
}
