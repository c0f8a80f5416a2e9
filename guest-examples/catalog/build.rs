// A 16 KiB shadow stack instead of Rust's default 1 MiB: every call gets a
// fresh instance whose memory the host resets afterwards, so a smaller
// memory makes each call cheaper (see BENCHMARKS.md). The catalog recurses
// nowhere and keeps its data on the heap.
fn main() {
    println!("cargo:rustc-link-arg-cdylib=-zstack-size=16384");
}
