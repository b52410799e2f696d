//! Tool paths stay inside the work copy: `..`, absolute paths elsewhere and
//! symlinks leading out are refused with a clear error the model sees, and
//! nothing outside is read or written.

use crate::support::host::{Host, describe};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::json;

#[test]
fn paths_that_leave_the_work_dir_are_refused_and_the_model_is_told() {
    let host = Host::git(&[("a.txt", "one\n")]);
    std::os::unix::fs::symlink("/etc/passwd", host.project.join("passwd-link")).unwrap();
    std::os::unix::fs::symlink("/etc", host.project.join("etc-dir")).unwrap();
    host.git_out(&["add", "-A"]);
    host.git_out(&["commit", "-q", "-m", "links"]);
    let outside = host.root.path().join("outside.txt");
    std::fs::write(&outside, "secret\n").unwrap();

    let attempts = [
        ("read", json!({"path": "../outside.txt"})),
        ("read", json!({"path": "/etc/passwd"})),
        ("read", json!({"path": "passwd-link"})),
        ("read", json!({"path": "etc-dir/hostname"})),
        (
            "write",
            json!({"path": "../outside.txt", "content": "pwned\n"}),
        ),
        (
            "write",
            json!({"path": "passwd-link", "content": "pwned\n"}),
        ),
        (
            "edit",
            json!({"path": "etc-dir/hostname", "old_string": "a", "new_string": "b"}),
        ),
    ];
    let mut turns: Vec<Turn> = attempts
        .iter()
        .enumerate()
        .map(|(i, (tool, input))| {
            Turn::reply(Reply::new().tool_use(format!("toolu_{i}"), *tool, input.clone()))
        })
        .collect();
    turns.push(Turn::reply(Reply::new().text("gave up")));
    let mock = MockServer::start(turns);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "escape"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    for (i, (tool, input)) in attempts.iter().enumerate() {
        let result = requests[i + 1].tool_result();
        assert_eq!(
            result["is_error"],
            json!(true),
            "{tool} {input} must fail: {result}"
        );
        let text = result["content"].as_str().unwrap();
        assert!(
            text.contains("outside") || text.contains("/work"),
            "{tool} {input}: unclear error {text}"
        );
        assert!(!text.contains("root:"), "{tool} {input} leaked /etc/passwd");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");
    assert_eq!(
        host.git_out(&["log", "--format=%s"]).lines().count(),
        2,
        "nothing applied"
    );
}
