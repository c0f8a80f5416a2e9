//! The container image's promise, checked without a container runtime.
//!
//! The `Dockerfile` puts the server binary alone on a distroless base (glibc,
//! libgcc, CA certificates; no shell) and runs it as uid 65532. Base images
//! cannot be fetched here (only package registries are reachable) and
//! podman cannot start a container in this sandbox (its cgroups are mounted
//! in hybrid mode), so this test builds the same root filesystem by hand:
//! the binary, exactly the shared libraries `ldd` names, the CA bundle, an
//! `/etc/passwd` with the nonroot user, and the demo's config and sources.
//! It then runs the server as a container would: in its own PID and mount
//! namespaces with a fresh `/proc`, chrooted into that tree, as 65532:65532.
//! It must start, mint a dev token, and serve the demo's listing: proof that
//! the image needs nothing but what the Dockerfile copies.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{BIN, guest, root, traverse};

const NONROOT: &str = "65532:65532";

/// The libraries (and the dynamic loader) `ldd` says the binary needs.
fn shared_libraries(bin: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(bin).output().expect("ldd");
    assert!(out.status.success(), "ldd failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
            // "/lib64/ld-linux-x86-64.so.2 (0x...)"; vdso has no file.
            let path = l.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

fn copy_into(rootfs: &Path, file: &Path, to: &str) {
    let dest = rootfs.join(to.trim_start_matches('/'));
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(file, &dest).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}

fn chown_nonroot(path: &Path) {
    let st = Command::new("chown")
        .args(["-R", NONROOT])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// `emseepea ARGS` inside the image: own PID + mount namespaces, `/proc`
/// mounted fresh, chrooted, as the nonroot user.
fn in_image(rootfs: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--fork", "--pid"])
        .arg(format!("--mount-proc={}", rootfs.join("proc").display()))
        .arg("chroot")
        .arg(format!("--userspec={NONROOT}"))
        .arg(rootfs)
        .arg("/usr/local/bin/emseepea")
        .args(args)
        .env_clear()
        // For unshare to find chroot; the server itself sees no PATH use.
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("EMSEEPEA_LOG", "info")
        // A group of its own, which `end` kills whole: killing unshare
        // alone left the server running after the test, holding whatever
        // descriptors the test runner had (a build lock, here).
        .process_group(0);
    cmd
}

/// Kill `child` and everything in its process group (the server inside).
fn end(child: &mut std::process::Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.wait();
}

fn build_rootfs(dir: &Path) -> PathBuf {
    let rootfs = dir.join("rootfs");
    copy_into(&rootfs, Path::new(BIN), "/usr/local/bin/emseepea");
    for lib in shared_libraries(Path::new(BIN)) {
        copy_into(&rootfs, &lib, lib.to_str().unwrap());
    }
    // What distroless/cc adds besides libraries: CA roots and the users.
    copy_into(
        &rootfs,
        Path::new("/etc/ssl/certs/ca-certificates.crt"),
        "/etc/ssl/certs/ca-certificates.crt",
    );
    std::fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
    )
    .unwrap();
    for d in ["proc", "tmp", "home/nonroot", "config", "data"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    // The demo's sources and database, as an init container would leave them.
    for name in ["catalog", "documents"] {
        let wasm = guest(name);
        copy_into(&rootfs, &wasm, &format!("/sources/{name}.wasm"));
        copy_into(
            &rootfs,
            &wasm.with_extension("toml"),
            &format!("/sources/{name}.toml"),
        );
    }
    let db = seed_documents(&rootfs.join("data/documents.sqlite"));
    assert!(db.is_file());
    std::fs::write(
        rootfs.join("config/emseepea.toml"),
        r#"sources_dir = "/sources"
state_dir = "/home/nonroot/state"

[auth]
mode = "dev"

[databases.documents]
file = "/data/documents.sqlite"
"#,
    )
    .unwrap();
    chown_nonroot(&rootfs.join("home/nonroot"));
    chown_nonroot(&rootfs.join("data"));
    let st = Command::new("chmod")
        .args(["1777"])
        .arg(rootfs.join("tmp"))
        .status()
        .unwrap();
    assert!(st.success());
    rootfs
}

/// The documents database, seeded from the example's SQL with Python's
/// sqlite3 module (the tests' clients need python3 anyway).
fn seed_documents(db: &Path) -> PathBuf {
    let ex = root().join("guest-examples/documents/sql");
    let sql = ["schema.sql", "seed.sql"]
        .iter()
        .map(|f| std::fs::read_to_string(ex.join(f)).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let script = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.stdin.read()); c.commit()";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .stdin(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "seeding the database");
    db.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_root_filesystem_serves_the_demo_as_nonroot_without_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = build_rootfs(dir.path());
    assert!(
        !rootfs.join("bin/sh").exists() && !rootfs.join("usr/bin").exists(),
        "the image has no shell"
    );

    let mut server = in_image(
        &rootfs,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--config",
            "/config/emseepea.toml",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("unshare + chroot");
    let stderr = server.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
            .join("\n")
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = server.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("emseepea listening on ") {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let Ok(url) = rx.recv_timeout(Duration::from_secs(300)) else {
        end(&mut server);
        panic!(
            "the server did not start in the image:\n{}",
            log.join().unwrap()
        );
    };

    // The state the server made is its own, private, inside the image.
    let state = rootfs.join("home/nonroot/state");
    let meta = std::fs::metadata(&state).expect("state dir made by the server");
    use std::os::unix::fs::MetadataExt;
    assert_eq!((meta.uid(), meta.mode() & 0o777), (65532, 0o700));

    let out = in_image(
        &rootfs,
        &[
            "token",
            "--config",
            "/config/emseepea.toml",
            "--sub",
            "alice",
            "--scope",
            "catalog:read documents:read",
            "--audience",
            &url,
        ],
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "token in the image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();

    let (uris, pages) = traverse(&url, &token).await;
    assert!(pages > 1, "the catalog pages");
    assert!(uris.iter().any(|u| u.starts_with("catalog://")), "{uris:?}");
    assert!(
        uris.iter().any(|u| u.starts_with("learn://documents/")),
        "the SQLite-backed source serves alice's documents: {uris:?}"
    );

    end(&mut server);
}
