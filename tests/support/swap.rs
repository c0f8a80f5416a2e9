//! Swap for tests that page a running server out: `Swap::ensure()` uses the
//! machine's swap when it has some, or else (the tests run as root, as for
//! PostgreSQL's user) makes a 256 MiB swap file in a temporary directory,
//! enables it, and disables and removes it on drop. `page_out` asks the
//! kernel to reclaim a process's private writable memory to that swap
//! (`process_madvise(MADV_PAGEOUT)`), as memory pressure would.
#![allow(dead_code)]

use std::process::Command;

pub struct Swap {
    /// The directory of the swap file this guard enabled (`SWAP_FILE`);
    /// `None` when the machine had swap.
    ours: Option<tempfile::TempDir>,
}

const SWAP_FILE: &str = "swapfile";

fn active_swap_areas() -> usize {
    std::fs::read_to_string("/proc/swaps")
        .expect("read /proc/swaps")
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .count()
}

/// util-linux's tools live in /usr/sbin, which a PATH may leave out.
fn sbin(name: &str) -> Command {
    let full = std::path::Path::new("/usr/sbin").join(name);
    Command::new(if full.is_file() { full } else { name.into() })
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed (the swap tests need root, as `.ci/run` has): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Swap {
    pub fn ensure() -> Swap {
        if active_swap_areas() > 0 {
            return Swap { ours: None };
        }
        let dir = tempfile::Builder::new()
            .prefix("emseepea-swap")
            .tempdir_in("/var/tmp")
            .expect("temporary directory for a swap file");
        let file = dir.path().join(SWAP_FILE);
        // Written, not `fallocate`d: some file systems refuse holes in swap.
        std::fs::write(&file, vec![0u8; 256 << 20]).expect("write the swap file");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
        run(sbin("mkswap").arg(&file));
        run(sbin("swapon").arg(&file));
        Swap { ours: Some(dir) }
    }
}

impl Drop for Swap {
    fn drop(&mut self) {
        if let Some(dir) = &self.ours {
            let _ = sbin("swapoff").arg(dir.path().join(SWAP_FILE)).status();
        }
    }
}

/// The process's swapped-out memory, in KiB (`VmSwap` of /proc/PID/status).
pub fn swapped_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmSwap:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSwap in /proc/PID/status")
}

/// Reclaim every private writable mapping of `pid` to swap, one
/// `process_madvise` per mapping (the kernel skips what it cannot page out).
/// Returns `swapped_kib` afterwards.
pub fn page_out(pid: u32) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    // SAFETY: plain syscalls on a descriptor this function owns; the iovec
    // names the other process's addresses, which the kernel checks.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) as libc::c_int;
        assert!(
            pidfd >= 0,
            "pidfd_open: {}",
            std::io::Error::last_os_error()
        );
        for line in maps.lines() {
            let mut fields = line.split_whitespace();
            let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
                continue;
            };
            if !perms.starts_with("rw") || !perms.ends_with('p') {
                continue;
            }
            let Some((start, end)) = range.split_once('-') else {
                continue;
            };
            let start = usize::from_str_radix(start, 16).unwrap();
            let end = usize::from_str_radix(end, 16).unwrap();
            let iov = libc::iovec {
                iov_base: start as *mut libc::c_void,
                iov_len: end - start,
            };
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd,
                &iov as *const libc::iovec,
                1usize,
                libc::MADV_PAGEOUT,
                0u32,
            );
        }
        libc::close(pidfd);
    }
    swapped_kib(pid)
}
