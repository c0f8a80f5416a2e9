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
                "componentize-py -d wit -w inventory-source componentize guest -p . -o {}.wasm",
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
    let name = Name::parse(name)?;
    let dir = dir.map_or_else(|| PathBuf::from(name.as_str()), Path::to_owned);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| NewError::Io { path, source }
    };
    match std::fs::read_dir(&dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(NewError::NotEmpty(dir));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&dir)(e)),
    }
    for file in files::of(lang) {
        let path = dir.join(file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let contents = match file.kind {
            files::Kind::Template => fill(file.contents, lang, &name),
            files::Kind::Verbatim => file.contents.to_owned(),
        };
        std::fs::write(&path, contents).map_err(io(&path))?;
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
                assert!(target.join(file.path).is_file(), "{}", file.path);
            }
            assert!(created.summary().contains("notes"));
        }
    }
}
