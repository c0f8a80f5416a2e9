//! `cargo xtask`: the project's chores as code.
//!
//! - `cargo xtask guests`  build every example guest from source into target/guests/
//! - `cargo xtask clients` install the real MCP clients the end-to-end tests drive
//! - `cargo xtask demo`    build, seed the demo databases, serve, print a token and a call
//!   (`--postgres`: the same on a local PostgreSQL started for it, removed on exit)
//! - `cargo xtask test`    everything CI runs
//! - `cargo xtask fuzz`    the property tests (`prop_*`) with many more cases
//! - `cargo xtask bench`   the criterion benchmarks behind BENCHMARKS.md
//! - `cargo xtask load`    the HTTP load driver behind BENCHMARKS.md
//! - `cargo xtask soak`    a bounded, self-stopping mixed load: every answer checked, RSS sampled
//! - `cargo xtask proxybench` the listing through nginx (two instances) next to one instance direct
//! - `cargo xtask docs`    the book: generated pages current, `mdbook build`, links, config blocks
//! - `cargo xtask config-reference` regenerate the book's configuration reference from the code

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

type Result<T = ()> = std::result::Result<T, String>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

mod docs;

fn run(cmd: &mut Command) -> Result {
    eprintln!("xtask: {}", describe(cmd));
    let status = cmd
        .status()
        .map_err(|e| format!("{}: {e}", describe(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", describe(cmd)))
    }
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{}: {e}", describe(cmd)))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            describe(cmd),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("guests") => guests().map(|_| ()),
        Some("clients") => clients(),
        Some("demo") if args.get(1).is_some_and(|a| a == "--postgres") => demo_postgres(),
        Some("demo") => demo(),
        Some("test") => test(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("sdk-tests") => sdk_tests(),
        Some("bench") => bench(&args[1..]),
        Some("load") => load(),
        Some("soak") => soak(),
        Some("proxybench") => proxybench(),
        Some("docs") => docs::check(),
        Some("config-reference") => docs::write_reference(),
        _ => Err(
            "usage: cargo xtask <guests|clients|demo|test|sdk-tests|fuzz|bench|load|soak|proxybench|docs|config-reference>"
                .into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Install the wasm32-wasip2 target when this toolchain lacks it.
fn ensure_wasm_target() -> Result {
    let dir = root().join("guest-examples");
    let installed =
        output(
            Command::new("rustup")
                .current_dir(&dir)
                .args(["target", "list", "--installed"]),
        )?;
    if !installed.lines().any(|l| l.trim() == "wasm32-wasip2") {
        run(Command::new("rustup")
            .current_dir(&dir)
            .args(["target", "add", "wasm32-wasip2"]))?;
    }
    Ok(())
}

/// The example guests: (crate, output name, subdirectory of target/guests).
const RUST_GUESTS: &[(&str, &str, &str)] = &[
    ("catalog", "catalog", ""),
    ("documents", "documents", ""),
    ("minimal", "minimal", "examples"),
    ("conformance_fixture", "template-data", "conformance"),
    ("hostile", "hostile", "hostile"),
    ("hostile_json", "hostile-json", "hostile"),
    ("hostile_two_lists", "two-lists", "hostile"),
    ("hostile-wrong-world", "wrong-world", "hostile"),
];

fn copy_if_changed(from: &Path, to: &Path) -> Result {
    let new = std::fs::read(from).map_err(|e| format!("{}: {e}", from.display()))?;
    if std::fs::read(to).ok().as_deref() != Some(&new[..]) {
        std::fs::create_dir_all(to.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(to, new).map_err(|e| format!("{}: {e}", to.display()))?;
    }
    Ok(())
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Build every guest into target/guests/; returns that directory.
fn guests() -> Result<PathBuf> {
    build_guests(true)
}

/// With `all = false` (the demo), the Python and JavaScript guests are
/// skipped with a note when `python3` or `npm` is missing.
fn build_guests(all: bool) -> Result<PathBuf> {
    ensure_wasm_target()?;
    let root = root();
    let examples = root.join("guest-examples");
    let out = root.join("target/guests");
    // Run from guest-examples/ so its .cargo/config.toml (target, target-dir) applies.
    run(cargo()
        .current_dir(&examples)
        .env_remove("CARGO_TARGET_DIR")
        .args(["build", "--release", "--quiet"]))?;
    let built = root.join("target/guest-build/wasm32-wasip2/release");
    for (krate, name, sub) in RUST_GUESTS {
        copy_if_changed(
            &built.join(format!("{krate}.wasm")),
            &out.join(sub).join(format!("{name}.wasm")),
        )?;
        let manifest = examples.join(krate.replace('_', "-")).join("manifest.toml");
        if manifest.is_file() {
            copy_if_changed(&manifest, &out.join(sub).join(format!("{name}.toml")))?;
        }
    }
    if all || have(&python()) {
        python_guest(&out)?;
    } else {
        eprintln!(
            "xtask: note: no {} on this machine, so the Python guest (python-notes) is not built",
            python()
        );
    }
    if all || have("npm") {
        js_guest(&out)?;
    } else {
        eprintln!(
            "xtask: note: no npm on this machine, so the JavaScript guest (js-catalog) is not built"
        );
    }
    eprintln!("xtask: guests are in {}", out.display());
    Ok(out)
}

/// A hash of files' names and contents, to skip rebuilding unchanged guests.
fn stamp_of(paths: &[PathBuf]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for p in paths {
        collect_files(p, &mut files);
    }
    files.sort();
    let root = root();
    for f in files {
        // Relative names, so a clone or worktree elsewhere reuses the stamp.
        f.strip_prefix(&root).unwrap_or(&f).hash(&mut h);
        std::fs::read(&f).unwrap_or_default().hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

fn collect_files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            let path = e.path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "node_modules" || name == "__pycache__" || name.starts_with('.') {
                continue;
            }
            collect_files(&path, out);
        }
    } else if p.is_file() {
        out.push(p.to_owned());
    }
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// A virtualenv under target/clients with exactly `requirements` installed.
fn venv(name: &str, requirements: &Path) -> Result<PathBuf> {
    let dir = root().join("target/clients").join(name);
    let py = dir.join("bin/python");
    let stamp_file = dir.join(".requirements-stamp");
    let stamp = stamp_of(&[requirements.to_owned()]);
    if py.is_file() && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str())
    {
        return Ok(py);
    }
    if !py.is_file() {
        run(Command::new(python()).args(["-m", "venv"]).arg(&dir))?;
    }
    run(Command::new(&py)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(requirements))?;
    std::fs::write(&stamp_file, stamp).map_err(|e| e.to_string())?;
    Ok(py)
}

/// `npm ci` in `dir` when its lockfile changed since the last install.
fn npm_install(dir: &Path) -> Result {
    let stamp_file = dir.join("node_modules/.xtask-stamp");
    let stamp = stamp_of(&[dir.join("package.json"), dir.join("package-lock.json")]);
    if std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(());
    }
    run(Command::new("npm").current_dir(dir).args([
        "ci",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
    ]))?;
    std::fs::write(&stamp_file, stamp).map_err(|e| e.to_string())
}

/// guest-examples/python-notes, built with componentize-py.
fn python_guest(out: &Path) -> Result {
    let root = root();
    let src = root.join("guest-examples/python-notes");
    if !src.is_dir() {
        return Ok(());
    }
    let target = out.join("python-notes.wasm");
    let stamp_file = out.join(".python-notes-stamp");
    let stamp = stamp_of(&[
        src.clone(),
        root.join("wit"),
        root.join("sdk/python/emseepea_guest.py"),
    ]);
    if target.is_file()
        && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str())
    {
        return Ok(());
    }
    let py = venv("guest-tools", &src.join("requirements.txt"))?;
    let bin = py.parent().unwrap().join("componentize-py");
    run(Command::new(bin)
        .current_dir(&src)
        .args(["-d"])
        .arg(root.join("wit"))
        .args([
            "-w",
            "inventory-source-json",
            "componentize",
            "notes",
            "-p",
            ".",
            "-p",
        ])
        .arg(root.join("sdk/python"))
        .arg("-o")
        .arg(&target))?;
    copy_if_changed(&src.join("manifest.toml"), &out.join("python-notes.toml"))?;
    std::fs::write(&stamp_file, stamp).map_err(|e| e.to_string())
}

/// guest-examples/js-catalog, built by its `npm run build`: esbuild bundles
/// it with the JS SDK (componentize-js does not follow relative imports),
/// then componentize-js builds the component, as in a project made by
/// `emseepea new --lang javascript`.
fn js_guest(out: &Path) -> Result {
    let root = root();
    let src = root.join("guest-examples/js-catalog");
    if !src.is_dir() {
        return Ok(());
    }
    let target = out.join("js-catalog.wasm");
    let stamp_file = out.join(".js-catalog-stamp");
    let stamp = stamp_of(&[
        src.join("catalog.js"),
        src.join("package.json"),
        src.join("package-lock.json"),
        src.join("manifest.toml"),
        root.join("sdk/js/emseepea-guest.js"),
        root.join("wit"),
    ]);
    if target.is_file()
        && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str())
    {
        return Ok(());
    }
    npm_install(&src)?;
    run(Command::new("npm")
        .current_dir(&src)
        .args(["run", "--silent", "build"]))?;
    copy_if_changed(&src.join("dist/js-catalog.wasm"), &target)?;
    copy_if_changed(&src.join("manifest.toml"), &out.join("js-catalog.toml"))?;
    std::fs::write(&stamp_file, stamp).map_err(|e| e.to_string())
}

/// The real MCP clients the end-to-end tests run: the Python SDK (2.x and
/// 1.x), and the TypeScript SDK plus the conformance suite (on Node 22 from npm).
fn clients() -> Result {
    let root = root();
    for (tool, why) in [
        (python().as_str(), "the Python SDK clients"),
        ("npm", "the TypeScript SDK and the conformance suite"),
    ] {
        if !have(tool) {
            return Err(format!(
                "{tool} is needed for {why}: install it (`.ci/run` does, from Debian) and run again"
            ));
        }
    }
    let py = root.join("tests/clients/python");
    venv("py-mcp2", &py.join("requirements-mcp2.txt"))?;
    venv("py-mcp1", &py.join("requirements-mcp1.txt"))?;
    npm_install(&root.join("tests/clients/node"))?;
    // checkov, the Kubernetes manifests' linter (tests/deploy.rs).
    venv("deploy-lint", &root.join("deploy/lint/requirements.txt"))?;
    // The test authorization server (oidc-provider) of tests/oauth_flow.rs.
    npm_install(&root.join("tests/oauth"))?;
    Ok(())
}

/// Create `db` from SQL files (replacing any previous copy).
fn sqlite_from(db: &Path, sql: &[PathBuf]) -> Result {
    let _ = std::fs::remove_file(db);
    std::fs::create_dir_all(db.parent().unwrap()).map_err(|e| e.to_string())?;
    let conn = rusqlite::Connection::open(db).map_err(|e| e.to_string())?;
    for f in sql {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        conn.execute_batch(&text)
            .map_err(|e| format!("{}: {e}", f.display()))?;
    }
    Ok(())
}

fn demo() -> Result {
    let root = root();
    build_guests(false)?;
    let demo_dir = root.join("target/demo");
    let ex = root.join("guest-examples");
    sqlite_from(
        &demo_dir.join("documents.sqlite"),
        &[
            ex.join("documents/sql/schema.sql"),
            ex.join("documents/sql/seed.sql"),
        ],
    )?;
    if ex.join("python-notes").is_dir() {
        sqlite_from(
            &demo_dir.join("notes.sqlite"),
            &[
                ex.join("python-notes/sql/schema.sql"),
                ex.join("python-notes/sql/seed.sql"),
            ],
        )?;
    }
    serve_demo(&ex.join("demo.toml"))
}

/// The PostgreSQL harness of the end-to-end tests: the same cluster setup.
#[path = "../../tests/support/postgres.rs"]
mod postgres;

/// The demo on a local PostgreSQL: a temporary cluster (as the tests start
/// it) with databases `documents` and `notes` from the examples' schema and
/// seed, and the demo config with those two databases on it.
fn demo_postgres() -> Result {
    if !postgres::installed() {
        return Err("PostgreSQL is not installed: apt-get install postgresql".into());
    }
    let root = root();
    build_guests(false)?;
    let ex = root.join("guest-examples");
    eprintln!("xtask: starting a local PostgreSQL");
    let pg = postgres::Postgres::start();
    let mut databases = String::new();
    for (label, guest) in [("documents", "documents"), ("notes", "python-notes")] {
        pg.psql(&format!("CREATE DATABASE {label}"));
        // One unprivileged role per database (and so per source): the host
        // refuses a privileged role and two sources on one role.
        let role = format!("{label}_app");
        pg.add_role(&role, label);
        for file in ["schema.sql", "seed.sql"] {
            let path = ex.join(guest).join("sql").join(file);
            let sql =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            // The seed's one SQLite-only word: a fresh database has nothing to replace.
            pg.psql_in(label, &sql.replace("INSERT OR REPLACE INTO", "INSERT INTO"));
        }
        databases.push_str(&format!(
            "[databases.{label}]\nengine = \"postgres\"\nurl = \"{}\"\ntls = \"disable\"\n\n",
            pg.url_as(&role, label)
        ));
    }
    let demo = std::fs::read_to_string(ex.join("demo.toml")).map_err(|e| e.to_string())?;
    let config = postgres_config(&demo, &databases, &root);
    let path = root.join("target/demo/postgres.toml");
    std::fs::create_dir_all(path.parent().unwrap()).map_err(|e| e.to_string())?;
    std::fs::write(&path, config).map_err(|e| e.to_string())?;
    eprintln!(
        "xtask: PostgreSQL on {} (databases documents, notes); config {}",
        pg.url(),
        path.display()
    );
    let served = serve_demo(&path);
    drop(pg);
    served
}

/// demo.toml with its SQLite databases replaced by `databases` and its
/// relative paths made absolute (the copy lives in target/demo/).
fn postgres_config(demo: &str, databases: &str, root: &Path) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in demo.lines() {
        if line.starts_with('[') {
            skipping = line.starts_with("[databases.");
        }
        if !skipping {
            out.push_str(&line.replace("\"../target/", &format!("\"{}/target/", root.display())));
            out.push('\n');
        }
    }
    // TOML tables may come in any order: the databases go last.
    out.push('\n');
    out.push_str(databases);
    out
}

fn serve_demo(config: &Path) -> Result {
    let root = root();
    run(cargo()
        .current_dir(&root)
        .args(["build", "--quiet", "-p", "emseepea", "--bin", "emseepea"]))?;
    let bin = root.join("target/debug/emseepea");
    let config = config.to_owned();
    let token = output(
        Command::new(&bin)
            .args(["token", "--config"])
            .arg(&config)
            .args([
                "--sub",
                "alice",
                "--scope",
                "catalog:read documents:read notes:read",
                "--client-id",
                "demo-client",
                "--ttl",
                "86400",
            ]),
    )?;
    let token = token.trim();
    let mut child = Command::new(&bin)
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Ctrl-C reaches the server (same process group), which shuts down;
    // xtask outlives it to clean up (`demo --postgres` removes its cluster).
    // Set after the spawn: an ignored signal would be inherited.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let url = loop {
        match lines.next() {
            Some(Ok(line)) if line.starts_with("emseepea listening on ") => {
                break line.trim_start_matches("emseepea listening on ").to_owned();
            }
            Some(Ok(_)) => continue,
            _ => return Err("the server exited before it was ready (see the log above)".into()),
        }
    };
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let headers = "-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28'";
    let lines = [
        String::new(),
        format!("emseepea is serving the demo sources from target/guests at {url}"),
        String::new(),
        "A dev token for alice (catalog:read documents:read notes:read), valid 24 h:".into(),
        String::new(),
        format!("  export TOKEN={token}"),
        String::new(),
        "List alice's resources (2026-07-28, stateless; page by sending back nextCursor as params.cursor):".into(),
        String::new(),
        format!("  curl -s {url} {headers} \\"),
        "    -H 'Mcp-Method: resources/list' -H \"Authorization: Bearer $TOKEN\" \\".into(),
        format!("    -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\",\"params\":{{{meta}}}}}'"),
        String::new(),
        "Read one of alice's documents:".into(),
        String::new(),
        format!("  curl -s {url} {headers} \\"),
        "    -H 'Mcp-Method: resources/read' -H 'Mcp-Name: learn://documents/a-001' -H \"Authorization: Bearer $TOKEN\" \\".into(),
        format!("    -d '{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{{\"uri\":\"learn://documents/a-001\",{meta}}}}}'"),
        String::new(),
        format!("More tokens: target/debug/emseepea token --config {} --sub bob --scope documents:read", config.display()),
        "Stop with Ctrl-C.".into(),
    ];
    println!("{}", lines.join("\n"));
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("server exited with {status}"))
    }
}

fn has_nextest() -> bool {
    cargo()
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn test(extra: &[String]) -> Result {
    let root = root();
    guests()?;
    clients()?;
    sdk_tests()?;
    docs::check()?;
    if has_nextest() {
        run(cargo()
            .current_dir(&root)
            .args(["nextest", "run", "--workspace", "--no-fail-fast"])
            .args(extra))?;
    } else {
        run(cargo()
            .current_dir(&root)
            .args(["test", "--workspace", "--no-fail-fast"])
            .args(extra))?;
    }
    Ok(())
}

/// Cases per property in `cargo xtask fuzz` (CI runs proptest's 256).
const FUZZ_CASES: u64 = 100_000;
/// Seconds each property may explore before its remaining cases pass
/// without work (the host's `crate::fuzz::SECONDS_VAR`).
const FUZZ_SECONDS: u64 = 120;
/// A property still running this long after its time cap is hung: nextest
/// stops it and reports it as failed. Generous, because after the cap
/// proptest still generates (and skips) the remaining cases: up to a minute
/// for 100,000 JSON documents on a busy machine.
const FUZZ_HANG_GRACE_S: u64 = 300;
/// Bound on the time proptest spends shrinking a failing input.
const FUZZ_SHRINK_MS: u64 = 60_000;

/// `cargo xtask fuzz [--cases N] [--seconds S] [NEXTEST ARGS]`: every
/// property test of the host crate (by convention named `prop_*`), with
/// `N` cases each and at most `S` seconds of exploration per property. A
/// failing input is shrunk and saved under host/proptest-regressions/
/// (commit it: later runs, CI included, replay it first).
fn fuzz(args: &[String]) -> Result {
    let mut cases = FUZZ_CASES;
    let mut seconds = FUZZ_SECONDS;
    let mut rest: Vec<String> = Vec::new();
    let mut args = args.iter();
    while let Some(a) = args.next() {
        let mut number = |name: &str| -> Result<u64> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match a.as_str() {
            "--cases" => cases = number("--cases")?,
            "--seconds" => seconds = number("--seconds")?,
            _ => rest.push(a.clone()),
        }
    }
    // The per-property time cap needs nextest's process per test.
    if !has_nextest() {
        return Err("cargo xtask fuzz needs cargo-nextest (cargo install cargo-nextest)".into());
    }
    let root = root();
    guests()?;
    let profile = root.join("target/xtask/fuzz-nextest.toml");
    std::fs::create_dir_all(profile.parent().unwrap()).map_err(|e| e.to_string())?;
    std::fs::write(
        &profile,
        format!(
            "[profile.fuzz]\nslow-timeout = {{ period = \"{}s\", terminate-after = 1 }}\nfail-fast = false\n",
            seconds + FUZZ_HANG_GRACE_S
        ),
    )
    .map_err(|e| format!("{}: {e}", profile.display()))?;
    run(cargo()
        .current_dir(&root)
        .env("PROPTEST_CASES", cases.to_string())
        .env("PROPTEST_MAX_SHRINK_TIME", FUZZ_SHRINK_MS.to_string())
        .env("EMSEEPEA_FUZZ_SECONDS", seconds.to_string())
        .args(["nextest", "run", "-p", "emseepea", "--profile", "fuzz"])
        .arg("--tool-config-file")
        .arg(format!("xtask:{}", profile.display()))
        .args(["-E", "test(/prop_/)"])
        .args(rest))
}

/// The guest SDKs' own unit tests, on the host target (the Rust SDK's
/// wit-bindgen imports are stubs there).
fn sdk_tests() -> Result {
    let root = root();
    run(cargo()
        .current_dir(root.join("sdk/rust"))
        .args(["test", "--quiet", "--target-dir"])
        .arg(root.join("target/sdk-rust")))?;
    let py = venv("sdk-python", &root.join("sdk/python/requirements.txt"))?;
    run(Command::new(py).current_dir(root.join("sdk/python")).args([
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
    ]))?;
    run(Command::new("node")
        .current_dir(root.join("sdk/js"))
        .args(["--test", "emseepea-guest.test.js"]))
}

/// The HTTP load driver (release build) behind BENCHMARKS.md.
fn load() -> Result {
    let root = root();
    guests()?;
    run(cargo().current_dir(&root).args([
        "build",
        "--release",
        "--quiet",
        "-p",
        "emseepea",
        "--bin",
        "emseepea",
        "--example",
        "loadgen",
    ]))?;
    run(Command::new(root.join("target/release/examples/loadgen")).current_dir(&root))
}

/// The listing through nginx with two instances next to one direct
/// (host/examples/proxybench.rs, needs nginx); PROFILE=release (default)
/// or debug picks the server build.
fn proxybench() -> Result {
    profiled_example("proxybench")
}

/// The soak (host/examples/soak.rs): PROFILE=release (default) or debug
/// picks the server build; REQUESTS, MAX_SECONDS and WORKERS bound it.
fn soak() -> Result {
    profiled_example("soak")
}

/// Build the guests, the server and the example `name` in the PROFILE
/// (release by default, or debug) and run the example, which finds the
/// server binary of the same profile through PROFILE.
fn profiled_example(name: &str) -> Result {
    let root = root();
    guests()?;
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "release".into());
    let mut build = cargo();
    build.current_dir(&root).args([
        "build",
        "--quiet",
        "-p",
        "emseepea",
        "--bin",
        "emseepea",
        "--example",
        name,
    ]);
    if profile == "release" {
        build.arg("--release");
    }
    run(&mut build)?;
    run(
        Command::new(root.join(format!("target/{profile}/examples/{name}")))
            .current_dir(&root)
            .env("PROFILE", &profile),
    )
}

fn bench(extra: &[String]) -> Result {
    let root = root();
    guests()?;
    run(cargo()
        .current_dir(&root)
        .args(["bench", "-p", "emseepea"])
        .args(extra))
}
