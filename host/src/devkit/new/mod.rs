//! `emseepea new NAME --lang rust|python|javascript [--dir D]`: scaffold a
//! guest project that builds with one command, lists and reads a small
//! per-user dataset through the SDK's helpers, and passes `emseepea
//! test-source` as generated.
//!
//! - [`name`]: which names are accepted (one name is the crate or package,
//!   the template name, the URI scheme and the scope prefix);
//! - [`files`]: each language's files (templates in `templates/`, the SDK
//!   and the WIT as compiled into this binary).
//!
//! The SDK and the WIT are vendored into the project rather than referenced
//! by path: the project then builds anywhere (no checkout of this
//! repository at a path baked into the binary), and always against the
//! contract of the server that generated it.

pub mod files;
pub mod name;
mod write;

pub use name::{Name, NameError};

use std::path::{Path, PathBuf};

/// The guest's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Javascript,
}

impl Lang {
    /// What to install once, before the build command works.
    pub fn setup(self) -> &'static str {
        match self {
            Lang::Rust => {
                "`rustup toolchain install` (the release and the wasm32-wasip2 target that rust-toolchain.toml pins)"
            }
            Lang::Python => "`pip install -r requirements.txt` (componentize-py)",
            Lang::Javascript => "`npm install` (componentize-js and esbuild)",
        }
    }

    /// The one build command, run in the project directory.
    pub fn build_command(self, name: &Name) -> String {
        match self {
            Lang::Rust => "cargo build --release --target wasm32-wasip2".into(),
            Lang::Python => format!(
                "componentize-py -d wit -w inventory-source-json componentize guest -p . -o {}.wasm",
                name.as_str()
            ),
            Lang::Javascript => "npm run build".into(),
        }
    }

    /// The component the build command writes, relative to the project.
    pub fn wasm(self, name: &Name) -> String {
        match self {
            Lang::Rust => format!("target/wasm32-wasip2/release/{}.wasm", name.crate_name()),
            Lang::Python | Lang::Javascript => format!("{}.wasm", name.as_str()),
        }
    }

    fn language(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Javascript => "JavaScript",
        }
    }

    fn source_file(self) -> &'static str {
        match self {
            Lang::Rust => "src/lib.rs",
            Lang::Python => "guest.py",
            Lang::Javascript => "src/guest.js",
        }
    }

    fn sdk(self) -> &'static str {
        match self {
            Lang::Rust => "sdk/rust",
            Lang::Python => "emseepea_guest.py",
            Lang::Javascript => "src/emseepea-guest.js",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NewError {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("{} exists and is not empty: choose another --dir or NAME", .0.display())]
    NotEmpty(PathBuf),
    #[error(
        "{} is a symbolic link or not a directory: give the path of a directory (new or empty) itself",
        .0.display()
    )]
    NotADirectory(PathBuf),
    #[error(
        "{}: something appeared there while the project was being written (planted by another user of the directory?); nothing was written through it: remove the project directory and run again where only you can write",
        .0.display()
    )]
    Planted(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What `new` made: where, and how to build and check it.
#[derive(Debug)]
pub struct Created {
    pub dir: PathBuf,
    pub lang: Lang,
    pub name: Name,
}

impl Created {
    /// The lines `emseepea new` prints: the build command is the README's.
    pub fn summary(&self) -> String {
        let (lang, name) = (self.lang, &self.name);
        format!(
            "Created {} ({}) in {}\n\n  once:   {}\n  build:  {}\n  check:  emseepea test-source {} --manifest manifest.toml\n\n(run them in {}; README.md there says how to deploy)\n",
            name.as_str(),
            lang.language(),
            self.dir.display(),
            lang.setup(),
            lang.build_command(name),
            lang.wasm(name),
            self.dir.display(),
        )
    }
}

/// Fill a template's placeholders (`{{name}}` and friends).
fn fill(template: &str, lang: Lang, name: &Name) -> String {
    template
        .replace("{{build_script}}", files::JS_BUILD_SCRIPT)
        .replace("{{language}}", lang.language())
        .replace("{{source_file}}", lang.source_file())
        .replace("{{sdk}}", lang.sdk())
        .replace("{{setup}}", lang.setup())
        .replace("{{build}}", &lang.build_command(name))
        .replace("{{wasm}}", &lang.wasm(name))
        .replace("{{name}}", name.as_str())
}

/// Scaffold `name` in `lang` into `dir` (default: `./NAME`), which must not
/// exist or be empty.
pub fn create(name: &str, lang: Lang, dir: Option<&Path>) -> Result<Created, NewError> {
    create_with(name, lang, dir, |_| {})
}

/// `create`, calling `before_writing` between the emptiness check and the
/// first write: the window in which another user of a shared directory
/// could plant a link (the tests plant one there).
///
/// Nothing is written through a link planted there or anywhere below:
/// every file is opened relative to a descriptor of its directory with
/// `O_CREAT | O_EXCL | O_NOFOLLOW`, every subdirectory is made by this
/// call (`mkdirat`; one that already exists was planted) and opened with
/// `O_NOFOLLOW | O_DIRECTORY`, and the project directory itself must not be
/// a symbolic link. Anything in the way is an error naming it.
fn create_with(
    name: &str,
    lang: Lang,
    dir: Option<&Path>,
    before_writing: impl FnOnce(&Path),
) -> Result<Created, NewError> {
    let name = Name::parse(name)?;
    let dir = dir.map_or_else(|| PathBuf::from(name.as_str()), Path::to_owned);
    let root = write::open_project_dir(&dir)?;
    before_writing(&dir);
    let mut tree = write::Tree::new(&dir, root);
    for file in files::of(lang) {
        let contents = match file.kind {
            files::Kind::Template => fill(file.contents, lang, &name),
            files::Kind::Verbatim => file.contents.to_owned(),
        };
        tree.create_file(file.path, contents.as_bytes())?;
    }
    Ok(Created { dir, lang, name })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Lang; 3] = [Lang::Rust, Lang::Python, Lang::Javascript];

    #[test]
    fn every_placeholder_is_filled() {
        let name = Name::parse("my-notes").unwrap();
        for lang in ALL {
            for file in files::of(lang) {
                if file.kind == files::Kind::Template {
                    let text = fill(file.contents, lang, &name);
                    assert!(!text.contains("{{"), "{}: {text}", file.path);
                    assert!(!text.contains("}}"), "{}: {text}", file.path);
                }
            }
        }
    }

    #[test]
    fn the_readme_has_the_printed_build_command() {
        let name = Name::parse("x1").unwrap();
        for lang in ALL {
            let readme = files::of(lang)
                .into_iter()
                .find(|f| f.path == "README.md")
                .unwrap();
            let text = fill(readme.contents, lang, &name);
            let build = lang.build_command(&name);
            assert!(text.contains(&format!("```sh\n{build}\n```")), "{text}");
            let created = Created {
                dir: "d".into(),
                lang,
                name: name.clone(),
            };
            assert!(
                created.summary().contains(&format!("build:  {build}\n")),
                "{}",
                created.summary()
            );
        }
    }

    #[test]
    fn refuses_a_non_empty_directory_and_bad_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        assert!(matches!(
            create("ok", Lang::Rust, Some(dir.path())),
            Err(NewError::NotEmpty(_))
        ));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let target = dir.path().join("new");
        assert!(matches!(
            create("Bad Name", Lang::Rust, Some(&target)),
            Err(NewError::Name(_))
        ));
        assert!(!target.exists(), "nothing is written for a bad name");
    }

    #[test]
    fn an_empty_or_missing_directory_is_filled() {
        let dir = tempfile::tempdir().unwrap();
        for (lang, sub) in [
            (Lang::Rust, "r"),
            (Lang::Python, "p"),
            (Lang::Javascript, "j"),
        ] {
            let target = dir.path().join(sub);
            if lang == Lang::Python {
                std::fs::create_dir(&target).unwrap(); // exists, empty
            }
            let created = create("notes", lang, Some(&target)).unwrap();
            for file in files::of(lang) {
                let expected = match file.kind {
                    files::Kind::Template => fill(file.contents, lang, &created.name),
                    files::Kind::Verbatim => file.contents.to_owned(),
                };
                assert_eq!(
                    std::fs::read_to_string(target.join(file.path)).unwrap(),
                    expected,
                    "{}",
                    file.path
                );
            }
            assert!(created.summary().contains("notes"));
        }
    }

    /// The attack: in a directory another user can write (`/tmp/p`), a link
    /// planted after the emptiness check and before the writes, where a
    /// file will go, made `fs::write` overwrite the link's target. Now the
    /// file is created `O_EXCL | O_NOFOLLOW`: an error naming it, the
    /// target untouched.
    #[test]
    fn a_link_planted_after_the_emptiness_check_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "precious").unwrap();
        let target = dir.path().join("p");
        std::fs::create_dir(&target).unwrap();
        let planted = create_with("notes", Lang::Python, Some(&target), |d| {
            std::os::unix::fs::symlink(&victim, d.join("README.md")).unwrap();
        });
        match planted {
            Err(e @ NewError::Planted(_)) => {
                assert!(e.to_string().contains("README.md"), "{e}")
            }
            other => panic!("expected a planted-link error, got {other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // A dangling link (the target does not exist yet) is not followed
        // either: nothing is created at its target.
        let target = dir.path().join("q");
        let made = dir.path().join("made-by-link");
        let planted = create_with("notes", Lang::Rust, Some(&target), |d| {
            std::os::unix::fs::symlink(&made, d.join("README.md")).unwrap();
        });
        assert!(matches!(planted, Err(NewError::Planted(_))), "{planted:?}");
        assert!(!made.exists());
    }

    /// The same with a link where one of the tool's own subdirectories will
    /// go: `create_dir_all` followed it and the file went into the link's
    /// target. Now the subdirectory must be made by the tool (`mkdirat`).
    #[test]
    fn a_link_planted_for_a_subdirectory_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        for lang in ALL {
            let target = dir.path().join(format!("p-{lang:?}"));
            let planted = create_with("notes", lang, Some(&target), |d| {
                std::os::unix::fs::symlink(&outside, d.join("wit")).unwrap();
            });
            match planted {
                Err(e @ NewError::Planted(_)) => assert!(e.to_string().contains("wit"), "{e}"),
                other => panic!("{lang:?}: expected a planted-link error, got {other:?}"),
            }
            assert_eq!(
                std::fs::read_dir(&outside).unwrap().count(),
                0,
                "{lang:?}: nothing written into the link's target"
            );
        }
    }

    /// The project directory itself given as a link: refused, not followed.
    #[test]
    fn a_project_directory_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = create("notes", Lang::Rust, Some(&link)).unwrap_err();
        assert!(matches!(e, NewError::NotADirectory(_)), "{e:?}");
        assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
    }
}
