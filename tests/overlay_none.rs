//! The none backend's overlay through the real binary: a `--backend none`
//! run and an `ah work` run copy nothing (the project is the overlay's
//! lower layer, never touched, a big file never copied), a command sees its
//! work folder at its usual path and its writes land in the patch, and a
//! SIGKILL of ah leaves neither the namespace holder nor a mount behind.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::support::host::{Host, describe, run_id, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::work::Script;
use serde_json::json;

/// How big the project's big file is.
const BIG: usize = 50 << 20;

/// Every file of the project but `.ah` and `.git` (whose objects the
/// shadow repo borrows, and libgit2 freshens): its inode, modification
/// time and size.
pub(crate) fn stamps(project: &Path) -> BTreeMap<PathBuf, (u64, i64, i64, u64)> {
    let mut all = BTreeMap::new();
    let mut pending = vec![project.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path == project.join(".ah") || path == project.join(".git") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                pending.push(path.clone());
            }
            all.insert(
                path,
                (meta.ino(), meta.mtime(), meta.mtime_nsec(), meta.size()),
            );
        }
    }
    all
}

/// A project with a 50 MB file of bytes that do not compress, committed.
pub(crate) fn big_project() -> Host {
    let host = Host::git(&[("greet.txt", "hello\n"), ("src/keep.txt", "keep\n")]);
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..BIG)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect();
    std::fs::write(host.project.join("big.bin"), bytes).unwrap();
    host.commit_all("big file");
    host
}

/// The run folder's size in KiB, from a command inside the run: `du -x`
/// does not cross into the overlay mounted on `work`.
const RUN_FOLDER_KIB: &str = "du -skx \"$HOME/..\" | cut -f1";

/// Checks the size [`RUN_FOLDER_KIB`] wrote to `size`: a run folder that
/// holds no copy of the 50 MB file stays under 5 MiB.
fn assert_run_folder_small(size: &Path) {
    let kib: u64 = std::fs::read_to_string(size)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        kib < 5 * 1024,
        "the run folder holds {kib} KiB with a 50 MB file in the project"
    );
}

#[test]
fn a_none_run_copies_nothing_and_never_touches_the_project() {
    let host = big_project();
    let before = stamps(&host.project);
    // The command runs on the host: it can say the size outside the project.
    let size = host.root.path().join("size.txt");
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": format!(
                "pwd; /bin/pwd; echo \"$HOME\"; echo made > made.txt; echo more >> greet.txt; \
                 git init -q . && git status --short | head -3; rm -rf .git; \
                 {RUN_FOLDER_KIB} > {}", size.display()
            )}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "make a file"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("copying the project"), "{stderr}");

    let run = host.run();
    let work = run.join("work");
    let told = mock.requests()[1].told();
    let lines: Vec<&str> = told.lines().collect();
    // The command sees its folder at its usual path, both ways of asking.
    let work_path = work.to_string_lossy();
    assert_eq!(lines[..3], [&*work_path; 3], "{told}");
    assert!(
        told.contains("made.txt"),
        "git works in the work tree:\n{told}"
    );
    assert_run_folder_small(&size);

    // The commands' writes are the patch; the project was never written.
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("+made"), "{patch}");
    assert!(patch.contains("+more"), "{patch}");
    assert!(!patch.contains(".git/"), "{patch}");
    assert_eq!(stamps(&host.project), before, "the project was touched");
    // Nothing of the overlay is left but the run's record.
    for gone in ["work", "upper", "overlay", "probe"] {
        assert!(
            !run.join(gone).exists(),
            "{gone} is left in {}",
            run.display()
        );
    }
}

#[test]
fn an_ah_work_run_with_the_none_backend_copies_nothing() {
    let host = big_project();
    host.write("check.sh", "grep -qx hi greet.txt\n");
    host.commit_all("check");
    let before = stamps(&host.project);
    // The command runs on the host: it can say the size outside the project.
    let size = host.root.path().join("size.txt");
    let script = Script::new()
        .bash("cat greet.txt check.sh")
        .report("## Approach\nReplace hello.\n## Validation\n```\nsh check.sh\n```\n")
        .end("planned")
        .bash(&format!(
            "echo hi > greet.txt; {RUN_FOLDER_KIB} > {}",
            size.display()
        ))
        .report("greet.txt now says hi.")
        .end("done")
        .bash("sh check.sh; echo exit=$?")
        .report("| sh check.sh | pass |\n\noverall: pass\n")
        .end("checked")
        .verdict("done", "check.sh passes")
        .end("verdict given");
    let mock = MockServer::start(script.turns());
    let issue = host.root.path().join("ISSUE.md");
    std::fs::write(&issue, "Say hi\n\ngreet.txt must say `hi`.\n").unwrap();
    let out = host
        .ah(&mock.url())
        .args(["work", "--backend", "none", "--review", "never"])
        .arg(&issue)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("copying the project"), "{stderr}");
    assert_run_folder_small(&size);
    let patch = std::fs::read_to_string(host.run().join("session.patch")).unwrap();
    assert!(patch.contains("+hi"), "{patch}");
    assert_eq!(stamps(&host.project), before, "the project was touched");
}

/// The processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_sigkill_of_ah_leaves_no_holder_and_no_mount() {
    let host = Host::git(&[("greet.txt", "hello\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": "echo made > made.txt"}),
        )),
        // The model never answers the second time: ah is killed waiting.
        Turn::stall(Reply::new().text("late"), 1, Duration::from_secs(60)),
    ]);
    let mut child = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "make a file"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    mock.wait_for_requests(2, Duration::from_secs(60));
    let run = run_id(&host.run());
    let holders = processes_with(&run);
    assert_eq!(holders.len(), 1, "one namespace holder: {holders:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until("the holder's end", Duration::from_secs(10), || {
        processes_with(&run).is_empty()
    });
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&run), "{mounts}");
    // The run's folders stay for `ah runs prune`, which removes them.
    assert!(host.run().join("upper/made.txt").exists());
}
