//! Profiles are outside input: a damaged `table1` profile (lines dropped, values replaced by
//! other values or other types) is read or refused with an error naming the file — never a
//! panic. Cases: `PROPTEST_CASES` (default 256).

use std::path::Path;

use hier_multi2::table1::Profile;
use proptest::prelude::*;

/// Proptest's defaults (256 cases, or `PROPTEST_CASES`), without writing regression files into
/// the source tree.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn damaged_profiles_are_read_or_refused_naming_the_file(
        drop_lines in proptest::collection::vec(0.0f64..1.0, 0..3),
        replace in proptest::collection::vec((0.0f64..1.0, prop_oneof![
            Just("0"), Just("-1"), Just("1e400"), Just("nan"), Just("\"x\""), Just("[]"),
            Just("{}"), Just("true"), Just("18446744073709551615"), Just("0.0"),
        ]), 0..3),
    ) {
        let smoke = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/table1/smoke.toml");
        let mut lines: Vec<String> =
            std::fs::read_to_string(smoke).unwrap().lines().map(str::to_owned).collect();
        for at in drop_lines {
            let i = (lines.len() as f64 * at) as usize;
            lines.remove(i.min(lines.len() - 1));
        }
        for (at, value) in replace {
            let i = ((lines.len() as f64 * at) as usize).min(lines.len() - 1);
            if let Some((key, _)) = lines[i].split_once(" = ") {
                lines[i] = format!("{key} = {value}");
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("damaged.toml");
        std::fs::write(&path, lines.join("\n")).unwrap();
        if let Err(e) = Profile::from_file(&path) {
            prop_assert!(e.to_string().contains("damaged.toml"), "{e}");
        }
    }
}
