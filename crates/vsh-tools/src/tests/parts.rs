//! The small parts of the exec machinery on their own: process-group ids that
//! may be signalled, a group killed when its handle is dropped, deadlines
//! that never overflow, the builders and predicates of the public types.

use std::time::{Duration, SystemTime};

use crate::spawn::{GroupChild, GroupId};
use crate::supervise::deadline_after;
use vsh_host::HostKind;

use crate::{ExecLimits, FileStat, ShellSpec};

#[test]
fn only_a_plausible_leader_names_a_group() {
    assert_eq!(GroupId::led_by(0), None, "0 would signal our own group");
    assert_eq!(GroupId::led_by(1), None, "1 would be init's group");
    assert_eq!(GroupId::led_by(std::process::id()), None, "never our own group");
    assert_eq!(GroupId::led_by(u32::MAX), None, "not a pid");
    let child = std::process::Command::new("/bin/true").spawn().unwrap();
    let id = child.id();
    assert!(GroupId::led_by(id).is_some());
    let mut child = child;
    child.wait().unwrap();
}

#[test]
fn dropping_a_group_handle_kills_the_group() {
    use std::os::unix::process::CommandExt as _;
    let mut command = std::process::Command::new("/bin/sleep");
    command.arg("37.25").process_group(0);
    let child = command.spawn().unwrap();
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    let group = GroupChild::new(child).unwrap();
    drop(group);
    // Reaped by the handle's reaper thread; gone within a moment.
    let started = std::time::Instant::now();
    while rustix::process::test_kill_process(pid).is_ok() {
        assert!(started.elapsed() < Duration::from_secs(10), "the dropped group is still alive");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_deadline_far_beyond_the_clock_is_a_century_away() {
    let now = tokio::time::Instant::now();
    let far = deadline_after(Duration::MAX);
    assert!(far > now + Duration::from_hours(50 * 365 * 24), "{:?}", far - now);
    let near = deadline_after(Duration::from_secs(3));
    assert!(near >= now + Duration::from_secs(3) && near < now + Duration::from_mins(1));
}

#[test]
fn builders_set_their_field_and_stats_tell_files_apart() {
    assert_eq!(
        ExecLimits::default().with_kill_grace(Duration::from_millis(123)).kill_grace,
        Duration::from_millis(123)
    );
    assert!(ShellSpec::sh().with_login(true).login);
    assert!(!ShellSpec::sh().with_login(true).with_login(false).login);
    let stat = |kind| FileStat { len: 0, mtime: SystemTime::UNIX_EPOCH, kind, mode: 0o644 };
    assert!(stat(HostKind::File).is_file() && !stat(HostKind::File).is_dir());
    assert!(!stat(HostKind::Directory).is_file() && stat(HostKind::Directory).is_dir());
    assert!(!stat(HostKind::Symlink).is_file());
}
