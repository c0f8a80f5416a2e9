//! A valid WebAssembly component of the wrong world (a WASI command): the host
//! must refuse to start with it, naming the file.
fn main() {
    println!("I am not an inventory source");
}
