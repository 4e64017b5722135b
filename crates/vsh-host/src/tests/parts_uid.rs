//! `effective_uid` is this process's effective uid.

#[test]
fn the_effective_uid_is_this_processs() {
    assert_eq!(crate::effective_uid(), rustix::process::geteuid().as_raw());
}
