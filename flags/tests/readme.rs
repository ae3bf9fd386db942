//! README.md's flag table lists every flag of the table, with its kind and type.

#[test]
fn readme_lists_every_flag() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    for f in rtvm_flags::FLAGS {
        let kind = f.kind.label(f.platform_dependent);
        let row = format!("| `{}` | {kind} | {} |", f.name, f.ty);
        assert!(
            readme.contains(&row),
            "README.md has no row starting {row:?}"
        );
    }
}
