//! Compiles the long-double shim (INCRBYFLOAT needs x87 80-bit arithmetic, which Rust lacks).
fn main() {
    println!("cargo:rerun-if-changed=src/util/ldouble.c");
    cc::Build::new().file("src/util/ldouble.c").opt_level(2).compile("ferrodis_ldouble");
}
