//! Each language's project files: templates (placeholders filled by `new`)
//! from `templates/`, and verbatim copies of this repository's SDK and WIT,
//! compiled into the binary so a generated project matches its server.

use super::Lang;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `{{name}}` and the other placeholders are filled in.
    Template,
    /// Copied as is (the SDK, the WIT, lockfiles).
    Verbatim,
}

#[derive(Debug, Clone, Copy)]
pub struct File {
    /// Relative to the project directory.
    pub path: &'static str,
    pub contents: &'static str,
    pub kind: Kind,
}

const fn template(path: &'static str, contents: &'static str) -> File {
    File {
        path,
        contents,
        kind: Kind::Template,
    }
}

const fn verbatim(path: &'static str, contents: &'static str) -> File {
    File {
        path,
        contents,
        kind: Kind::Verbatim,
    }
}

const WIT: File = verbatim(
    "wit/inventory.wit",
    include_str!("../../../../wit/inventory.wit"),
);
const README: File = template("README.md", include_str!("templates/README.md"));

/// The Rust SDK's files (sdk/rust), in the project's `sdk/rust`: its
/// bindings find the WIT at `../../wit`, which is the project's `wit/`.
pub const RUST_SDK: [File; 5] = [
    verbatim(
        "sdk/rust/Cargo.toml",
        include_str!("../../../../sdk/rust/Cargo.toml"),
    ),
    verbatim(
        "sdk/rust/src/lib.rs",
        include_str!("../../../../sdk/rust/src/lib.rs"),
    ),
    verbatim(
        "sdk/rust/src/page.rs",
        include_str!("../../../../sdk/rust/src/page.rs"),
    ),
    verbatim(
        "sdk/rust/src/keys.rs",
        include_str!("../../../../sdk/rust/src/keys.rs"),
    ),
    verbatim(
        "sdk/rust/src/deadline.rs",
        include_str!("../../../../sdk/rust/src/deadline.rs"),
    ),
];

/// esbuild bundles the guest and the SDK into one module (componentize-js
/// does not follow relative imports), then componentize-js builds it;
/// js-catalog's `npm run build` does the same. The `-d` flags drop WASI
/// features the generated guest does not use (no stdout, randomness or
/// outbound HTTP: leave `http` out of them to `fetch`). The world is
/// `inventory-source-json`: the guest exports `inventoryJson` (its pages as
/// JSON, `sdk.json`), several times faster than records lowered by
/// interpreted glue.
pub const JS_BUILD_SCRIPT: &str = "esbuild src/guest.js --bundle --format=esm --platform=neutral '--external:emseepea:*' '--external:wasi:*' --log-level=warning --outfile=dist/guest.js && componentize-js dist/guest.js --wit wit -n inventory-source-json -d stdio random http fetch-event -o {{name}}.wasm";

/// The files of a `lang` project.
pub fn of(lang: Lang) -> Vec<File> {
    let mut files = vec![README, WIT];
    match lang {
        Lang::Rust => {
            files.extend([
                template("Cargo.toml", include_str!("templates/rust/Cargo.toml.in")),
                // The SDK's own lockfile: the same wit-bindgen as this
                // repository's guests (cargo adds the project's entry).
                verbatim(
                    "Cargo.lock",
                    include_str!("../../../../sdk/rust/Cargo.lock"),
                ),
                verbatim(
                    "rust-toolchain.toml",
                    include_str!("../../../../rust-toolchain.toml"),
                ),
                template("src/lib.rs", include_str!("templates/rust/src/lib.rs")),
                template(
                    "manifest.toml",
                    include_str!("templates/rust/manifest.toml"),
                ),
                verbatim(".gitignore", include_str!("templates/rust/gitignore")),
            ]);
            files.extend(RUST_SDK);
        }
        Lang::Python => files.extend([
            template("guest.py", include_str!("templates/python/guest.py")),
            verbatim(
                "emseepea_guest.py",
                include_str!("../../../../sdk/python/emseepea_guest.py"),
            ),
            // The componentize-py version this repository's guests use.
            verbatim(
                "requirements.txt",
                include_str!("../../../../guest-examples/python-notes/requirements.txt"),
            ),
            template(
                "manifest.toml",
                include_str!("templates/python/manifest.toml"),
            ),
            verbatim(".gitignore", include_str!("templates/python/gitignore")),
        ]),
        Lang::Javascript => files.extend([
            template(
                "package.json",
                include_str!("templates/javascript/package.json"),
            ),
            template(
                "src/guest.js",
                include_str!("templates/javascript/src/guest.js"),
            ),
            verbatim(
                "src/emseepea-guest.js",
                include_str!("../../../../sdk/js/emseepea-guest.js"),
            ),
            template(
                "manifest.toml",
                include_str!("templates/javascript/manifest.toml"),
            ),
            verbatim(".gitignore", include_str!("templates/javascript/gitignore")),
        ]),
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn repo(rel: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
    }

    /// A module added to the Rust SDK must be vendored too, or generated
    /// projects stop compiling.
    #[test]
    fn every_rust_sdk_source_is_vendored() {
        let mut on_disk: Vec<String> = std::fs::read_dir(repo("sdk/rust/src"))
            .unwrap()
            .map(|e| format!("sdk/rust/src/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        on_disk.sort();
        let mut vendored: Vec<&str> = RUST_SDK
            .iter()
            .map(|f| f.path)
            .filter(|p| p.starts_with("sdk/rust/src/"))
            .collect();
        vendored.sort();
        assert_eq!(on_disk, vendored);
    }

    /// The generated JavaScript project installs what js-catalog installs
    /// (the end-to-end test builds it with js-catalog's node_modules).
    #[test]
    fn the_javascript_tools_are_js_catalogs() {
        let ours: serde_json::Value =
            serde_json::from_str(include_str!("templates/javascript/package.json")).unwrap();
        let catalog: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(repo("guest-examples/js-catalog/package.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(ours["devDependencies"], catalog["devDependencies"]);
    }
}
